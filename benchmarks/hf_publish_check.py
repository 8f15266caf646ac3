"""`--to=hf` against real transformers: what the suite checks against its NumPy
transcription of transformers' ALBERT, here with transformers itself (the peers venv of
benchmarks/make_peers_venv.sh: torch, transformers, sentencepiece; never albert_tf's
dependencies).

    python benchmarks/hf_publish_check.py [--output_dir=benchmarks/results/publish] \\
        [--hf_python=benchmarks/.peers-venv/bin/python] [--texts=2000]

For each model (AlbertPretrainer with one and with two groups of two inner layers,
AlbertForQuestionAnswering v1, a v2 one (written as AlbertModel, its head left behind),
AlbertForMultipleChoice, AlbertEncoder, an AlbertClassifier
of three labels (transformers must read its id2label); random known
weights, float32): albert_tf writes it with `python -m albert_tf.convert --to=hf`'s
code, transformers loads it with `from_pretrained(..., output_loading_info=True)` (no
missing, unexpected or mismatched weight allowed) and computes on the same ids; the
largest difference per output is recorded (goal: 1e-4). The tokenizer: the written
directory's `AutoTokenizer` against albert_tf's tokenization of --texts sentences of the
sample corpus plus one sentence in each of 13 scripts, [CLS] and [SEP] included: the
count of equal id lists and the first differences.

Writes OUTPUT_DIR/hf_check.json and prints a line per model. Exit 1 when a check fails.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

PEER = r'''
import json, sys
import numpy as np, torch, transformers
from transformers import AutoTokenizer
job = json.load(open(sys.argv[1]))
out = {"transformers": transformers.__version__, "torch": torch.__version__, "models": {}}
for name, spec in job["models"].items():
    cls = getattr(transformers, spec["architecture"])
    model, info = cls.from_pretrained(spec["dir"], output_loading_info=True)
    model.eval()
    x = {k: torch.tensor(np.asarray(v)) for k, v in spec["inputs"].items()}
    with torch.no_grad():
        if spec["architecture"] == "AlbertForSequenceClassification":
            r = model(input_ids=x["input_word_ids"], attention_mask=x["input_mask"], token_type_ids=x["input_type_ids"])
            outputs = {"logits": r.logits}
        elif spec["architecture"] == "AlbertForMultipleChoice":
            r = model(input_ids=x["input_word_ids"][None], attention_mask=x["input_mask"][None],
                      token_type_ids=x["input_type_ids"][None])
            outputs = {"logits": r.logits[0]}
        else:
            r = model(input_ids=x["input_word_ids"], attention_mask=x["input_mask"], token_type_ids=x["input_type_ids"],
                      output_hidden_states=True)
            outputs = {"sequence_output": r.hidden_states[-1]}
            base = model if spec["architecture"] == "AlbertModel" else model.albert
            if base.pooler is not None:
                outputs["pooled_output"] = base(input_ids=x["input_word_ids"], attention_mask=x["input_mask"],
                                                token_type_ids=x["input_type_ids"]).pooler_output
            if spec["architecture"] == "AlbertForPreTraining":
                outputs["mlm_logits"] = r.prediction_logits
                outputs["sop_logits"] = r.sop_logits
            if spec["architecture"] == "AlbertForQuestionAnswering":
                outputs["start_logits"], outputs["end_logits"] = r.start_logits, r.end_logits
    out["models"][name] = {"loading_info": {k: [str(i) for i in v] for k, v in info.items()},
                           "id2label": {str(k): v for k, v in model.config.id2label.items()},
                           "outputs": {k: v.numpy().tolist() for k, v in outputs.items()}}
tok = AutoTokenizer.from_pretrained(job["tokenizer_dir"])
out["tokenizer_class"] = type(tok).__name__
out["ids"] = [tok(t)["input_ids"] for t in job["texts"]]
pair = tok(job["texts"][0], job["texts"][1])
out["pair"] = {"input_ids": pair["input_ids"], "token_type_ids": pair.get("token_type_ids")}
print(json.dumps(out))
'''

MULTISCRIPT = [
    "Crème brûlée à la façade: naïve Zoë, Ångström, São Paulo, Straße, ÆØ, Łódź, Ṣạ́ḍ.",
    "हिन्दी में कुछ शब्द: संस्कृत, प्रेम, गुरु, क़िला, ज्ञान और चाँद।",
    "ภาษาไทยมีวรรณยุกต์ เช่น ที่ น้ำ ไม้ กิน สั้น และ เด็ก",
    "اَلْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ، وَالْكِتَابُ مُفِيدٌ.",
    "Tiếng Việt có dấu: người, được, những, Hà Nội và Đà Nẵng.",
    "Η ελληνική γλώσσα: ΟΔΟΣ ΚΑΛΟΣ, άνθρωπος, Σίσυφος, ΐ ΰ, ΣΟΦΟΣ.",
    "Йошкар-Ола, ёлка и ЁЖ: йогурт, район, объём, Ёлкин.",
    "日本語の文章と中文句子，还有全角ＡＢＣ１２３と「かぎ括弧」。",
    "한국어 문장입니다. 훈민정음 해례본.",
    "Good 👍🏽 family 👨\u200d👩\u200d👧\u200d👦 love ❤\ufe0f key 1\ufe0f\u20e3.",
    "བོད་ཡིག, မြန်မာ, ភាសាខ្មែរ, ދިވެހި.",
    "Vithkuqi 𐕰𐕱 and Glagolitic Ⱟ, ΜΕΓΑΛΟΣ.",
    "Ｉｔ＇＇ｓ ``quoted'' and ‘single’ ＂full＂.",
]


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(scale=0.05, size=v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    return model


def _ours(model, x):
    """albert_tf's outputs of `model` on x, named as the peer names transformers' outputs."""
    from albert_tf import AlbertEncoder, AlbertPretrainer
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    if isinstance(model, AlbertForMultipleChoice):
        return {"logits": np.asarray(model({k: v[None] for k, v in x.items()}, training=False)["logits"])[0]}
    if type(model).__name__ == "AlbertClassifier":
        return {"logits": np.asarray(model(x, training=False))}
    encoder = model if isinstance(model, AlbertEncoder) else model.encoder
    enc = encoder(x, training=False)
    out = {"sequence_output": np.asarray(enc["sequence_output"])}
    v1 = isinstance(model, AlbertForQuestionAnswering) and model.version == "v1"
    if not v1:  # transformers' AlbertForQuestionAnswering has no pooler; a v2 model is written as AlbertModel
        out["pooled_output"] = np.asarray(enc["pooled_output"])
    if isinstance(model, AlbertPretrainer):
        length = x["input_word_ids"].shape[1]
        positions = np.tile(np.arange(length, dtype="int32"), (x["input_word_ids"].shape[0], 1))
        r = model({**x, "masked_lm_positions": positions}, training=False)
        out["mlm_logits"], out["sop_logits"] = np.asarray(r["mlm_logits"]), np.asarray(r["sop_logits"])
    if v1:
        r = model(x, training=False)
        out["start_logits"], out["end_logits"] = np.asarray(r["start_logits"]), np.asarray(r["end_logits"])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default=os.path.join(HERE, "results", "publish"))
    parser.add_argument("--hf_python", default=os.path.join(HERE, ".peers-venv", "bin", "python"))
    parser.add_argument("--texts", type=int, default=2000)
    args = parser.parse_args(argv)
    if not os.path.isfile(args.hf_python):
        print(f"hf_publish_check: --hf_python={args.hf_python} does not exist; run benchmarks/make_peers_venv.sh",
              file=sys.stderr)
        return 2

    import keras

    from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.convert.api import write_target
    from albert_tf.data.sample_corpus import iter_documents
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    keras.config.set_dtype_policy("float32")
    work = tempfile.mkdtemp(prefix="hf_publish_")
    sentences = []
    for document in iter_documents():
        sentences.extend(s for s in document if len(s) > 20)
        if len(sentences) >= 20 * args.texts:
            break
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences + MULTISCRIPT) + "\n")
    spm_model = train_sentencepiece([corpus], os.path.join(work, "spm"), SentencePieceOptions(vocab_size=3000))
    texts = sentences[:: max(1, len(sentences) // args.texts)][: args.texts] + MULTISCRIPT

    base = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, hidden_dropout_prob=0.0,
                                                            attention_probs_dropout_prob=0.0)
    models = {
        "pretrainer": AlbertPretrainer(base),
        "pretrainer_2_groups_2_inner": AlbertPretrainer(base.replace(num_hidden_groups=2, inner_group_num=2)),
        "squad_v1": AlbertForQuestionAnswering(base, version="v1"),
        "squad_v2_encoder": AlbertForQuestionAnswering(base, version="v2"),
        "multiple_choice": AlbertForMultipleChoice(base),
        "encoder": AlbertEncoder(base),
        "classifier_3_labels": AlbertClassifier(AlbertEncoder(base, name="encoder"), 3),
    }
    models["classifier_3_labels"].run_labels = ["contradiction", "entailment", "neutral"]
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 3000, (2, 16)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 11:] = 0
    x = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    job = {"models": {}, "texts": texts}
    ours = {}
    for seed, (name, model) in enumerate(models.items()):
        _randomize(model, seed)
        directory, architecture, left_behind = write_target(model, "hf", os.path.join(work, name), spm_model)
        job["models"][name] = {"dir": directory, "architecture": architecture, "left_behind": left_behind,
                               "inputs": {k: v.tolist() for k, v in x.items()}}
        ours[name] = _ours(model, x)
    job["tokenizer_dir"] = job["models"]["encoder"]["dir"]
    job_file = os.path.join(work, "job.json")
    with open(job_file, "w") as f:
        json.dump(job, f)
    peer_file = os.path.join(work, "peer.py")
    with open(peer_file, "w") as f:
        f.write(PEER)
    done = subprocess.run([args.hf_python, peer_file, job_file], capture_output=True, text=True, timeout=1800)
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    theirs = json.loads(done.stdout.strip().splitlines()[-1])

    real = mask.astype(bool)
    result = {"transformers": theirs["transformers"], "torch": theirs["torch"], "models": {}, "ok": True}
    for name, spec in job["models"].items():
        got = theirs["models"][name]
        diffs = {}
        for key, value in ours[name].items():
            other = np.asarray(got["outputs"][key])
            if key in ("sequence_output", "start_logits", "end_logits", "mlm_logits"):
                value, other = value[real], other[real]  # padded positions are not compared
            diffs[key] = float(np.abs(value - other).max())
        problems = {k: v for k, v in got["loading_info"].items() if v}
        ok = not problems and max(diffs.values()) <= 1e-4
        if name == "classifier_3_labels":
            ok &= got["id2label"] == {"0": "contradiction", "1": "entailment", "2": "neutral"}
        result["ok"] &= ok
        result["models"][name] = {"architecture": spec["architecture"], "loading_problems": problems,
                                  "left_behind": spec["left_behind"], "max_abs_difference": diffs, "ok": ok}
        print(f"{name:30s} {spec['architecture']:28s} loading problems: {problems or 'none'}; max |diff|: "
              + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()))
    tokenizer = SentencePieceTokenizer(spm_model)
    expected = [[tokenizer.cls_id] + tokenizer.encode(t) + [tokenizer.sep_id] for t in texts]
    differ = [i for i, (a, b) in enumerate(zip(expected, theirs["ids"], strict=True)) if a != b]
    result["tokenizer"] = {
        "class": theirs["tokenizer_class"], "texts": len(texts), "equal": len(texts) - len(differ),
        "multiscript_differ": [MULTISCRIPT.index(texts[i]) for i in differ if texts[i] in MULTISCRIPT],
        "first_differences": [{"text": texts[i], "albert_tf": expected[i], "transformers": theirs["ids"][i],
                               "albert_tf_pieces": [tokenizer.id_to_piece(j) for j in expected[i]],
                               "transformers_pieces": [tokenizer.id_to_piece(j) for j in theirs["ids"][i]]}
                              for i in differ[:10]]}
    a, b = tokenizer.encode(texts[0]), tokenizer.encode(texts[1])
    pair = {"input_ids": [tokenizer.cls_id] + a + [tokenizer.sep_id] + b + [tokenizer.sep_id],
            "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1)}
    result["tokenizer"]["pair_equal"] = theirs["pair"] == pair
    result["ok"] &= result["tokenizer"]["pair_equal"]
    print(f"tokenizer ({theirs['tokenizer_class']}): {len(texts) - len(differ)} of {len(texts)} texts give "
          f"albert_tf's ids; a text pair's ids and token_type_ids equal: {result['tokenizer']['pair_equal']}")
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "hf_check.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
