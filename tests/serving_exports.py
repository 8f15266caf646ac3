"""Every kind of SavedModel albert_tf writes, tiny and random, with what each signature answers
on fixed inputs: the exports tests/serving_check.py loads as a model server does
(tests/test_serving.py).

`write_exports(directory, spm_model)` writes, under `directory`, hub/encoder and hub/preprocess
(export_tfhub), classifier_pair (MRPC-like: two labels, text_a and text_b), classifier_single
(STS-B-like regression on text_a), squad_v1, squad_v2 and race, each as its command's
--export_dir writes it, then loads each and records in `directory/reference.json` every
signature's outputs on fixed inputs (and the requests serve_examples must refuse), with the
TensorFlow and tensorflow-text versions that wrote and ran them.

As a script it writes tests/data/serving/exports.tar.xz, the exports tests/test_serving.py
loads in the lower-bound run (requirements-lower.txt). Run it with the lock's venv
(requirements.txt) whenever an export's code or the lock's TensorFlow changes:

    PYTHONPATH=$PWD TF_NUM_INTRAOP_THREADS=1 .venv/bin/python tests/serving_exports.py \\
        --archive=tests/data/serving/exports.tar.xz
"""

import argparse
import json
import os
import sys
import tarfile
import tempfile

import numpy as np

SEQ = 32  # the encoder export's preprocessing and the classifiers
QA_SEQ, STRIDE, QUERY = 64, 24, 16  # several windows for the long context
MC_SEQ, MC_QA = 48, 16
ARCHIVE_SPM = dict(corpus_mb=0.2, vocab_size=1000)  # the archive's own SentencePiece model (small)
TEXTS_A = ["The module reads the configuration file and returns a dictionary.",
           "Crème brûlée costs 7,000 won in Zoë's café.", ""]
TEXTS_B = ["Each worker opens its own connection.", "The café sells crème brûlée.",
           "An empty first text."]
CONTEXT = ("The exporter writes the encoder and the preprocessing model. Each model is a directory with "
           "its graph, its variables and its assets. The SentencePiece model is one of the assets, so the "
           "directory holds everything needed to serve. A server loads the newest version it finds, "
           "version 2 before version 1, and answers requests until a newer one appears.")
QUESTIONS = ["What does the exporter write?", "Which version does a server load first?", ""]
ARTICLE = ("Ana planted three trees in spring. By summer the smallest had grown the most, and in autumn "
           "she gave its apples to her neighbours.")
MC_QUESTIONS = ["Ana planted _ trees.", "What did she give away?"]
MC_OPTIONS = [["two", "three", "four", "five"], ["apples", "pears", "trees", "seeds"]]


def _models(vocab_size):
    """The random models (seeded): a pretrainer, two classifiers, QA v1 and v2, multiple choice."""
    import keras

    from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    keras.utils.set_random_seed(11)
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=vocab_size, num_hidden_layers=2,
                                                             num_hidden_groups=1, initializer_range=0.5)
    ones = np.ones((1, 8), "int32")
    flat = {"input_word_ids": ones * 5, "input_mask": ones, "input_type_ids": ones * 0}
    models = {"pretrainer": AlbertPretrainer(config)}
    for name, classes in (("classifier_pair", 2), ("classifier_single", 1)):
        models[name] = AlbertClassifier(AlbertEncoder(config), num_classes=classes)
        models[name](flat, training=False)  # the weights exist before the export lists them
    for version in ("v1", "v2"):
        models[f"squad_{version}"] = AlbertForQuestionAnswering(config, version=version)
        models[f"squad_{version}"](dict(flat, p_mask=ones * 0), training=False)
    models["race"] = AlbertForMultipleChoice(config)
    models["race"]({k: v[:, None] for k, v in flat.items()}, training=False)
    return models


def _example(**texts):
    import tensorflow as tf

    feature = {name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))
               for name, text in texts.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _strings(values):
    return np.array([v.encode("utf-8") for v in values], object)


def requests():
    """{export: {signature: inputs}} (numpy arrays; strings as bytes), and the requests that must
    fail: [(export, signature, inputs, a word of the error)]."""
    rng = np.random.default_rng(5)
    ids = rng.integers(5, 200, (2, 12)).astype("int32")
    mask = np.ones((2, 12), "int32")
    mask[1, 7:] = 0
    pair = [_example(text_a=a, text_b=b) for a, b in zip(TEXTS_A, TEXTS_B)]
    single = [_example(text_a=a, label="1") for a in TEXTS_A]  # a feature the classifier does not read
    ok = {
        "hub/encoder": {"serving_default": {"input_word_ids": ids * mask, "input_mask": mask,
                                            "input_type_ids": np.zeros_like(mask)}},
        "hub/preprocess": {"serving_default": {"strings": _strings(TEXTS_A)}},
        "classifier_pair": {"serving_default": {"text_a": _strings(TEXTS_A), "text_b": _strings(TEXTS_B)},
                            "serve_examples": {"examples": np.array(pair, object)}},
        "classifier_single": {"serving_default": {"text_a": _strings(TEXTS_A)},
                              "serve_examples": {"examples": np.array(single, object)}},
        "race": {"serving_default": {"article": _strings([ARTICLE, ARTICLE]), "question": _strings(MC_QUESTIONS),
                                     "options": np.array([_strings(o) for o in MC_OPTIONS], object)}},
    }
    for version in ("v1", "v2"):
        ok[f"squad_{version}"] = {"serving_default": {"question": _strings(QUESTIONS),
                                                      "context": _strings([CONTEXT] * len(QUESTIONS))}}
    fail = [("classifier_pair", "serve_examples", {"examples": np.array([_example(text_a="no second text")], object)},
             "text_b"),
            ("classifier_pair", "serve_examples", {"examples": np.array([b"not a tf.Example"], object)}, "parse"),
            ("classifier_single", "serve_examples",
             {"examples": np.array([_example(text_a="one", text_b="two")], object)}, "text_b")]
    return ok, fail


def encode(value):
    """A numpy array -> JSON: {"dtype", "shape", "value"} (strings as hex: bytes of any kind)."""
    value = np.asarray(value)
    if value.dtype == object or value.dtype.kind == "S":
        return {"dtype": "string", "shape": list(value.shape), "value": [v.hex() for v in value.reshape(-1)]}
    return {"dtype": value.dtype.name, "shape": list(value.shape), "value": value.reshape(-1).tolist()}


def write_exports(directory, spm_model):
    """Writes the exports and reference.json under `directory` (see the module's docstring);
    returns reference.json's content."""
    import tensorflow as tf
    import tensorflow_text

    from albert_tf.data.bucket_widths import bucket_widths
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.export.exporter import export_tfhub
    from albert_tf.export.preprocess_module import PreprocessModule
    from albert_tf.tasks.classification.export import export_classifier
    from albert_tf.tasks.race.export import export_multiple_choice
    from albert_tf.tasks.squad.export import export_question_answering

    directory = str(directory)
    models = _models(SentencePieceTokenizer(spm_model).vocab_size)

    def path(name):
        return os.path.join(directory, name)

    export_tfhub(models["pretrainer"], spm_model, path("hub"), seq_length=SEQ)
    export_classifier(PreprocessModule(spm_model, seq_length=SEQ), models["classifier_pair"], path("classifier_pair"),
                      SEQ, labels=("not_equivalent", "equivalent"), pair=True, task_name="mrpc",
                      widths=bucket_widths(SEQ))
    export_classifier(PreprocessModule(spm_model, seq_length=SEQ), models["classifier_single"],
                      path("classifier_single"), SEQ, task_name="sts-b", widths=bucket_widths(SEQ))
    for version in ("v1", "v2"):
        export_question_answering(models[f"squad_{version}"], spm_model, path(f"squad_{version}"),
                                  max_seq_length=QA_SEQ, doc_stride=STRIDE, max_query_length=QUERY, n_best_size=5,
                                  max_answer_length=10, widths=bucket_widths(QA_SEQ))
    export_multiple_choice(models["race"], spm_model, path("race"), max_seq_length=MC_SEQ, max_qa_length=MC_QA,
                           widths=bucket_widths(MC_SEQ))
    ok, fail = requests()
    reference = {"written_with": {"tensorflow": tf.__version__, "tensorflow_text": tensorflow_text.__version__},
                 "exports": {}, "errors": []}
    for name, signatures in ok.items():
        loaded = tf.saved_model.load(path(name))
        reference["exports"][name] = {"signatures": sorted(loaded.signatures), "calls": {}}
        for signature, inputs in signatures.items():
            outputs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
            reference["exports"][name]["calls"][signature] = {
                "inputs": {k: encode(v) for k, v in inputs.items()},
                "outputs": {k: encode(v.numpy()) for k, v in sorted(outputs.items())}}
    for name, signature, inputs, word in fail:
        reference["errors"].append({"export": name, "signature": signature,
                                    "inputs": {k: encode(v) for k, v in inputs.items()}, "error": word})
    with open(path("reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1)
    return reference


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True, help="the .tar.xz to write")
    args = parser.parse_args(argv)
    from albert_tf.data.sample_corpus import write_corpus
    from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

    with tempfile.TemporaryDirectory() as scratch:
        corpus = os.path.join(scratch, "corpus.txt")
        write_corpus(corpus, ARCHIVE_SPM["corpus_mb"])
        spm_model = train_sentencepiece([corpus], os.path.join(scratch, "spm"),
                                        SentencePieceOptions(vocab_size=ARCHIVE_SPM["vocab_size"]))
        exports = os.path.join(scratch, "serving")
        write_exports(exports, spm_model)
        with tarfile.open(args.archive, "w:xz") as tar:
            for root, dirs, names in os.walk(exports):
                dirs.sort()
                for name in sorted(names):
                    full = os.path.join(root, name)
                    tar.add(full, arcname=os.path.relpath(full, scratch), recursive=False)
    print(f"wrote {args.archive} ({os.path.getsize(args.archive):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
