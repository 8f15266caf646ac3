"""Bidirectional rename tables: `{field}` templates instead of one-way regexes.

A table is a tuple of `(source_template, target_template[, transform])`. A template is a
variable name with fields such as `{g}`; `FIELDS` gives what each field matches. The
same table converts forwards (`to_regex_table`) and backwards (`reverse`), so a
converter and its inverse cannot drift apart.
"""

import re

FIELDS = {
    "g": r"\d+",
    "k": r"\d+",
    "emb": "word_embeddings|position_embeddings|token_type_embeddings",
    "qkv": "query|key|value",
    "var": "kernel|bias",
    "ln": "gamma|beta",
    "head": "output_weights|output_bias",
}


def _regex(template):
    parts = re.split(r"(\{\w+\})", template)
    out = []
    for part in parts:
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            out.append(f"(?P<{name}>{FIELDS[name]})")
        else:
            out.append(re.escape(part))
    return "".join(out)


def _substitution(template):
    return re.sub(r"\{(\w+)\}", r"\\g<\1>", template)


def to_regex_table(table):
    """A template table -> the `(pattern, replacement[, transform])` table of `rename`."""
    return tuple((_regex(rule[0]), _substitution(rule[1])) + tuple(rule[2:]) for rule in table)


def reverse(table):
    """The inverse table (transposes are their own inverse)."""
    return tuple((rule[1], rule[0]) + tuple(rule[2:]) for rule in table)
