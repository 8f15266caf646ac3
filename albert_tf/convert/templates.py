"""Bidirectional rename tables: `{field}` templates instead of one-way regexes.

A table is a tuple of `(source_template, target_template[, transform])`. A template is a
variable name with fields such as `{g}`; `FIELDS` gives what each field matches;
`transform` names the rule's one shape change (`albert_tf.convert.rename.TRANSFORMS`).
The same table converts forwards (`to_regex_table`) and backwards (`reverse`, which puts
each transform's inverse in its place), so a converter and its inverse cannot drift apart.
"""

import re

from albert_tf.convert.rename import check_transform, inverse_transform

FIELDS = {
    "g": r"\d+",
    "k": r"\d+",
    "emb": "word_embeddings|position_embeddings|token_type_embeddings",
    "qkv": "query|key|value",
    "var": "kernel|bias",
    "ln": "gamma|beta",
    "head": "output_weights|output_bias",
}


def _transform(rule):
    if len(rule) > 3 or (len(rule) == 3 and rule[2] is None):
        raise ValueError(f"a rule is (source, target) or (source, target, transform), got {rule!r}")
    return check_transform(rule[2]) if len(rule) == 3 else None


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
    return tuple((_regex(rule[0]), _substitution(rule[1])) + ((_transform(rule),) if _transform(rule) else ())
                 for rule in table)


def model_kind(names, head_prefixes, in_head, holder):
    """The model whose head variables `names` hold: the key of `head_prefixes` ({kind:
    prefixes}) one of whose prefixes `in_head(name, prefix)` accepts, else "encoder".
    ValueError (`holder` saying what was read) for heads of more than one model."""
    kinds = [kind for kind, prefixes in head_prefixes.items() if any(in_head(n, p) for n in names for p in prefixes)]
    if len(kinds) > 1:
        raise ValueError(f"{holder} the heads of several models ({', '.join(kinds)}); expected one.")
    return kinds[0] if kinds else "encoder"


def reverse(table):
    """The inverse table: sides swapped, each transform replaced by its inverse
    (transpose by itself, merge_heads by split_heads, ...)."""
    return tuple((rule[1], rule[0]) + ((inverse_transform(_transform(rule)),) if _transform(rule) else ())
                 for rule in table)
