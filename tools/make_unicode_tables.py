"""Writes albert_tf/data/unicode_VERSION.json: the Unicode data of the one text normalisation, for the
Unicode version of this Python's unicodedata (Python 3.11: 14.0.0, 3.12: 15.0.0, 3.13: 15.1.0), of
which albert_tf/data/unicode_tables.py takes the running Python's.

    python tools/make_unicode_tables.py          # rewrite this Python's tables from its unicodedata
    python tools/make_unicode_tables.py --check  # exit 1 if the file differs from what this Python gives

Each Python's own: its `preprocess_text` (unicodedata) and the graph (albert_tf.export.normalization,
which takes every decision about a character from these tables, not from ICU's, RE2's or TensorFlow's
Unicode data: docs/export.md) then agree on every code point. The tables, from Python's own functions:

  COMBINING       unicodedata.combining(c) != 0: dropped after NFKD (Python uses it too)
  DECOMPOSED      unicodedata.normalize("NFKD", c) != c: the only characters the graph hands
                  to ICU's NFKD (ICU's newer Unicode decomposes characters Python's does not know)
  LOWER           c.lower() for every character NFKD leaves alone (runs: first, last, step, delta)
  CASE_IGNORABLE  skipped by str.lower()'s final-sigma rule
  CASED           cased and not case-ignorable: str.lower() turns a capital sigma after such a
                  character, and not before one, into the final sigma
  BLANK           str.isspace() or category Cc, Cf, Zs, Zl, Zp: what SentencePiece treats as
                  blank (left out of piece spans, albert_tf.tasks.squad.alignment and aligned_tokens)
  DIGIT           str.isdigit(): the release's `encode_pieces` splits a piece ending in a digit
                  and "," (all of Unicode's digits, not RE2's ASCII \\d)

CASE_IGNORABLE and CASED are read off str.lower() itself: "AΣx".lower() keeps σ exactly when x
is cased and not case-ignorable, and "AΣxB".lower() keeps σ when x is cased or case-ignorable.
The file is one JSON object: "UNICODE_VERSION" and a list of ints per table, one table a line.
Sets are flat lists of sorted [start, end) bounds: c is in the set when
bisect.bisect_right(bounds, c) is odd (tf.searchsorted in the graph). Surrogates are left out
(UTF-8 cannot carry them).
"""

import json
import os
import sys
import unicodedata

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TARGET = os.path.join(ROOT, "albert_tf", "data", f"unicode_{unicodedata.unidata_version.replace('.', '_')}.json")
_SIGMA_CONTEXT = ("A\u03a3", "B")


def _characters():
    return (c for c in range(0x110000) if not 0xD800 <= c < 0xE000)


def _bounds(members):
    """Sorted code points -> flat [start, end) bounds."""
    out = []
    for c in members:
        if out and out[-1] == c:
            out[-1] = c + 1
        else:
            out += [c, c + 1]
    return out


def _sigma(c):
    """(what "AΣx" and "AΣxB" lower-case the sigma to) for x = chr(c)."""
    x = chr(c)
    return (_SIGMA_CONTEXT[0] + x).lower()[1], (_SIGMA_CONTEXT[0] + x + _SIGMA_CONTEXT[1]).lower()[1]


def _lower_runs(pairs):
    """[(c, lower)] sorted -> flat (first, last, step, delta) runs of one delta and one step."""
    runs = []
    for c, low in pairs:
        delta = low - c
        if runs:
            first, last, step, d = runs[-1]
            if d == delta and ((first == last and c - last in (1, 2)) or (first != last and c - last == step)):
                runs[-1] = (first, c, c - last, d)
                continue
        runs.append((c, c, 1, delta))
    return [x for run in runs for x in run]


def tables():
    """{name: flat tuple of ints} from this Python's unicodedata and str.lower()."""
    combining, decomposed, lower, ignorable, cased, blank, digit = [], [], [], [], [], [], []
    for c in _characters():
        x = chr(c)
        if unicodedata.combining(x):
            combining.append(c)
        if unicodedata.normalize("NFKD", x) != x:
            decomposed.append(c)
        elif x.lower() != x:
            if len(x.lower()) != 1:
                raise ValueError(f"U+{c:04X} lower-cases to {len(x.lower())} characters and NFKD keeps it: "
                                 "the graph's one-to-one lower-casing cannot follow.")
            lower.append((c, ord(x.lower())))
        alone, before = _sigma(c)
        if alone == "\u03c3":
            cased.append(c)
        elif before == "\u03c3":
            ignorable.append(c)
        if x.isspace() or unicodedata.category(x) in ("Cc", "Cf", "Zs", "Zl", "Zp"):
            blank.append(c)
        if x.isdigit():
            digit.append(c)
    return {"COMBINING": _bounds(combining), "DECOMPOSED": _bounds(decomposed), "LOWER": _lower_runs(lower),
            "CASE_IGNORABLE": _bounds(ignorable), "CASED": _bounds(cased), "BLANK": _bounds(blank),
            "DIGIT": _bounds(digit)}


def text_of(version, values_by_name):
    """The file's text: {"UNICODE_VERSION": version, name: [ints], ...}, one entry a line."""
    entries = [f'"UNICODE_VERSION": {json.dumps(version)}']
    entries += [f"{json.dumps(name)}: {json.dumps(list(values))}" for name, values in values_by_name.items()]
    return "{\n" + ",\n".join(entries) + "\n}\n"


def generate():
    """The text of TARGET (albert_tf/data/unicode_VERSION.json) for this Python."""
    return text_of(unicodedata.unidata_version, tables())


def main(argv):
    text = generate()
    if "--check" in argv[1:]:
        with open(TARGET, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{TARGET} is stale for Unicode {unicodedata.unidata_version}: "
                      "run python tools/make_unicode_tables.py", file=sys.stderr)
                return 1
        return 0
    sys.path.insert(0, ROOT)
    from albert_tf.storage import atomic

    atomic.write_text(TARGET, text)
    print(f"wrote {TARGET} (Unicode {unicodedata.unidata_version})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
