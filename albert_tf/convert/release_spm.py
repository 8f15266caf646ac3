"""The release's tokenization carried inside a SentencePiece model, for tokenizers that run
the model alone (keras-hub's AlbertTokenizer, Hugging Face's tokenizer.json).

Two changes to the model: its normaliser (`normalizer_spec.precompiled_charsmap`, compiled
by SentencePiece's own builder) maps every character to what `preprocess_text` and then the
model's own normaliser give it (`release_rules`); every digit-comma piece becomes UNUSED, so
"▁2016," comes out as "▁2016" "," as the release's `encode_pieces` gives. What a character
map cannot say: `NOT_EXPRESSED`. `check_report` records a written tokenizer against albert_tf
on `CHECK_TEXTS`; `refuse_mismatch` refuses one that differs there. docs/convert.md.
"""

import functools
import unicodedata

from albert_tf.data import unicode_tables
from albert_tf.data.tokenization import is_combining, is_digit_comma_piece, preprocess_text

MAX_CODE_POINT = 0x110000
# Built-in texts every written tokenizer is checked on: cased, accented, full-width,
# digit-commas, quotes (`` and '' stay as they are in the release), combining marks.
CHECK_TEXTS = (
    "The Quick Brown Fox Jumps Over The Lazy Dog.",
    "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations",
    "On February 7, 2016, at Levi's Stadium in Santa Clara, California, 71,088 people watched.",
    "Crème Brûlée, Café au lait, Señor Muñoz, Zoë and Chloë met in São Paulo and Zürich.",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＴＥＸＴ １２３, and ﬁne ligatures: ½ cup, 10 km².",
    "He said ``Hello'' and she replied ''Goodbye'' in 1999, 2000, and 2001.",
    "Accents by combining marks: Cafe\u0301, nai\u0308ve, re\u0301sume\u0301, A\u030angstro\u0308m.",
    "  Spaces\tand\ttabs\u00a0and\u2003em spaces,\nnewlines  and   runs  ",
    "In 1850, 1851, or 1852, the town had 3,456 people; by 2010, 12,000 and 71,088 in 2016.",
    "Ünïcödé ÀÉÎÕÜ àéîõü ÇçÑñ ŁłØøÆæŒœ ß İstanbul.",
)


def _char_map(rules):
    """A SentencePieceNormalizer applying `rules` (a list of (source, target)) and nothing
    else (no whitespace handling)."""
    import sentencepiece as spm

    return spm.SentencePieceNormalizer(norm_map=rules, add_dummy_prefix=False, escape_whitespaces=False,
                                       remove_extra_whitespaces=False)


_BLOCK = 256  # code points tested at once (the surrogates, 0xD800-0xDFFF, are whole blocks)


@functools.lru_cache(maxsize=2)
def _preprocess_changes(do_lower_case):
    """((character, what preprocess_text gives it), ...) for every code point where they
    differ, in code point order; each str.isspace character gives " " (" " itself left out).

    A block of code points that has no space, is NFKD-normalized and lower-case as a whole,
    and holds no combining mark has no such character: it is skipped whole (a character
    that NFKD or lower-casing changes changes its block too)."""
    bounds = unicode_tables.COMBINING  # [start, end) pairs: the characters is_combining holds for
    with_marks = {b for start, end in zip(bounds[::2], bounds[1::2]) for b in range(start // _BLOCK,
                                                                                      (end - 1) // _BLOCK + 1)}
    changed = []
    for start in range(0, MAX_CODE_POINT, _BLOCK):
        if 0xD800 <= start < 0xE000:
            continue  # surrogates: no characters
        block = "".join(map(chr, range(start, start + _BLOCK)))
        if (start // _BLOCK not in with_marks and not any(map(str.isspace, block))
                and unicodedata.is_normalized("NFKD", block) and not (do_lower_case and block.lower() != block)):
            continue
        for c in block:
            if c.isspace():
                changed.append((c, " "))
            elif not (unicodedata.is_normalized("NFKD", c) and not (do_lower_case and c.lower() != c)
                      and not is_combining(c)):
                p = preprocess_text(c, do_lower_case)
                if p != c:
                    changed.append((c, p))
    return tuple((c, p) for c, p in changed if c != " ")


def release_rules(model_bytes, do_lower_case=True):
    """The normalisation rules (a list of (source, target)) of `preprocess_text` followed by
    the model's own normaliser: the model's rules with their source preprocessed first, and
    each code point that `preprocess_text` changes mapped to the model's normalisation of
    what it gives."""
    import sentencepiece as spm

    own = spm.SentencePieceNormalizer(model_proto=model_bytes).Decompile()
    changed = dict(_preprocess_changes(do_lower_case))
    table = {ord(c): p for c, p in changed.items()}
    pending = list(changed.items())
    pending += [(s, s.translate(table)) for s, _ in own if len(s) > 1]
    pending += [(s, s) for s, _ in own if len(s) == 1 and s not in changed]  # its own rule applies
    targets = _char_map(own).Normalize([p for _, p in pending]) if own else [p for _, p in pending]
    rules = {}
    for (source, _), target in zip(pending, targets):
        if target != source or len(source) > 1:  # (a multi-character rule kept whole, even as itself)
            rules[source] = target
    return sorted(rules.items())


def digit_comma_ids(proto):
    """The ids of the model's digit-comma pieces (the release splits them; `is_digit_comma_piece`)."""
    return [i for i, p in enumerate(proto.pieces) if is_digit_comma_piece(p.piece)]


@functools.lru_cache(maxsize=4)
def release_model(model_bytes, do_lower_case=True):
    """The SentencePiece model `model_bytes` carrying the release's tokenization (see the
    module docstring): (model bytes, number of normalisation rules, digit-comma pieces made
    UNUSED). Its pieces, ids and scores are the model's."""
    import sentencepiece as spm
    from albert_tf.data.spm_model_proto import ModelProto, NormalizerSpec

    proto = ModelProto.FromString(model_bytes)
    spm.set_min_log_level(1)  # (without the builder's INFO lines on stderr; 0 is SentencePiece's default)
    try:
        rules = release_rules(model_bytes, do_lower_case)
        spec = NormalizerSpec.FromString(spm.SentencePieceNormalizer(norm_map=rules).serialized_normalizer_spec())
    finally:
        spm.set_min_log_level(0)
    proto.normalizer_spec.precompiled_charsmap = spec.precompiled_charsmap
    proto.normalizer_spec.name = "albert_tf_release" + ("" if do_lower_case else "_cased")
    comma = digit_comma_ids(proto)
    for i in comma:
        proto.pieces[i].type = ModelProto.SentencePiece.UNUSED
    return proto.SerializeToString(), len(rules), len(comma)


CHECK_FILE = "tokenizer_check.json"  # written into a converted directory: what the check found
# What the release's tokenization has that a character map and a segmentation cannot carry.
NOT_EXPRESSED = (
    "lower-casing's context rules: Python's str.lower() gives a final sigma for a word-final capital sigma, the "
    "character map a plain sigma",
    "a digit-comma piece the release splits inside a word (\"▁1,\" \"050\" -> \"▁1\" \",\" \"050\"): the "
    "segmentation without such pieces may take another way (\"▁\" \"1,0\" \"50\")",
)


class TokenizerMismatch(ValueError):
    """A written tokenizer that gives other ids than albert_tf's on `CHECK_TEXTS`."""


def check_report(target, tokenizer, ours, theirs, rules, unused, notes=()):
    """The record of a written tokenizer checked on `CHECK_TEXTS` (tokenizer_check.json).

    Args:
        target: "hf" or "keras_hub".
        tokenizer: what was checked, in words.
        ours, theirs: text -> list of ids (albert_tf's, the written tokenizer's).
        rules: normalisation rules in the written model; unused: digit-comma pieces left out.
        notes: what else differs, in words (beside NOT_EXPRESSED).
    """
    ids = [(text, [int(i) for i in ours(text)], [int(i) for i in theirs(text)]) for text in CHECK_TEXTS]
    differ = [(text, a, b) for text, a, b in ids if a != b]
    return {"target": target, "tokenizer": tokenizer, "texts": len(CHECK_TEXTS),
            "equal": len(CHECK_TEXTS) - len(differ),
            "differ": [{"text": t, "albert_tf": a, "written": b} for t, a, b in differ],
            "normalisation": "preprocess_text (whitespace collapsed, NFKD, combining marks dropped, lower-cased "
                             "where do_lower_case) then the model's own map, as one precompiled character map",
            "normalisation_rules": rules, "digit_comma_pieces_left_out": unused,
            "not_expressed": list(NOT_EXPRESSED) + list(notes), "mismatch_allowed": False}


def refuse_mismatch(report, allow):
    """Raises TokenizerMismatch naming the differing texts of `report` unless `allow` (then
    the report records that the mismatch was allowed)."""
    if not report["differ"]:
        return report
    if allow:
        report["mismatch_allowed"] = True
        return report
    lines = [f"  {d['text']!r}: albert_tf {d['albert_tf']}, written {d['written']}" for d in report["differ"][:3]]
    raise TokenizerMismatch(
        f"--to={report['target']}: the written tokenizer ({report['tokenizer']}) gives other ids than albert_tf for "
        f"{len(report['differ'])} of {report['texts']} built-in texts, so its users would get other inputs than the "
        "model was trained on:\n" + "\n".join(lines) + "\nNothing was written. Pass --allow_tokenizer_mismatch to "
        f"write it anyway (recorded in {CHECK_FILE}).")
