"""Real dev texts (tests/real_data.py's data) chosen for the release's digit-comma rule.

`release_rule_texts()` reads the SQuAD v1.1 dev contexts and questions, the GLUE dev
sentences (SST-2, CoLA, RTE, STS-B, MRPC) and the RACE dev articles, questions and options,
and returns those whose release tokenization (`SentencePieceTokenizer.tokenize` with the 30k
model) differs from plain SentencePiece (`EncodeAsPieces(preprocess_text(t))`) together with a
fixed sample of the others. Texts on which tensorflow_text's own SentencePiece and Python's
disagree before any rule (two equal-score segmentations of "2.666" resolved differently) are
set apart: the graph is compared with Python where their SentencePiece agrees.
"""

import csv
import functools
import glob
import json
import os
import re

import tensorflow as tf
import tensorflow_text as tf_text
from real_data import SPM_30K, real_path

from albert_tf.data.tokenization import SentencePieceTokenizer, preprocess_text

OTHERS = 300
_GLUE_COLUMNS = {"SST-2": (0,), "CoLA": (3,), "RTE": (1, 2), "STS-B": (7, 8), "MRPC": (3, 4)}


def _dev_texts():
    """(source, text) of every real dev text, in a fixed order."""
    out = []
    with open(real_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        for article in json.load(f)["data"]:
            for paragraph in article["paragraphs"]:
                out.append(("squad_context", paragraph["context"]))
                out += [("squad_question", qa["question"]) for qa in paragraph["qas"]]
    for task, columns in _GLUE_COLUMNS.items():
        with open(real_path(f"glue/{task}/dev.tsv"), encoding="utf-8-sig") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        out += [(task, row[c]) for row in rows[task != "CoLA":] for c in columns]
    for path in sorted(glob.glob(os.path.join(real_path("race/RACE/dev"), "*", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            example = json.load(f)
        out.append(("race_article", example["article"]))
        out += [("race_question", q) for q in example["questions"]]
        out += [("race_option", o) for options in example["options"] for o in options]
    return out


@functools.lru_cache(maxsize=None)
def release_rule_texts():
    """-> SimpleNamespace: tok (the 30k SentencePieceTokenizer), model (its path), total (texts
    read), split (sources and texts the rule changes), others (a fixed sample of the rest),
    ties (texts set apart, see module docstring)."""
    import types

    model = real_path(SPM_30K)
    tok = SentencePieceTokenizer(model)
    texts = _dev_texts()
    # the rule can only change a text whose normalised form has a digit before a comma
    digit_comma = re.compile(r"[^\W_],")
    split, rest = [], []
    for source, text in texts:
        normalized = preprocess_text(text)
        changed = False
        if digit_comma.search(normalized) and any(a.isdigit() and b == ","
                                                  for a, b in zip(normalized, normalized[1:])):
            changed = tok.tokenize(text) != tok.sp.EncodeAsPieces(normalized)
        (split if changed else rest).append((source, text))
    others = rest[::len(rest) // OTHERS][:OTHERS]
    chosen = split + others
    with open(model, "rb") as f:
        plain = tf_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)
    graph_plain = plain.tokenize(tf.constant([preprocess_text(t) for _, t in chosen])).to_list()
    ties = {t for (_, t), ids in zip(chosen, graph_plain) if ids != tok.sp.EncodeAsIds(preprocess_text(t))}
    return types.SimpleNamespace(tok=tok, model=model, total=len(texts),
                                 split=[x for x in split if x[1] not in ties],
                                 others=[x for x in others if x[1] not in ties], ties=sorted(ties))
