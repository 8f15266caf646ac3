"""The fine-tuned classifier as one SavedModel that takes raw strings (use: docs/fine_tuning.md).

Root `__call__(text_a [B], text_b [B])` (text_b only for sentence-pair tasks) and the
same as the `serving_default` signature. Outputs: classification -> `logits` [B, C],
`probabilities` [B, C], `label_id` int32 [B], `label` string [B] (the task's label
names); regression -> `score` [B]. `serve_examples(examples [B])` (a method and the
signature of that name, as Model Garden's): serialized tf.Examples with bytes features
`text_a` (and `text_b` for a pair task) -> the same outputs as `__call__` on those texts;
bytes that are no tf.Example, a text feature missing or not one bytes value, or a `text_b`
given to a single-text task fail the request (InvalidArgumentError naming it); other
features are ignored. Tokenization is the preprocessing model's (the one
the classifier was trained with), inside the SavedModel together with its SentencePiece
asset. Each request is padded only to the length bucket of its longest input
(classifier_info.json lists the buckets). `dropout` is off: the classifier runs with
training=False. Loading needs
`import tensorflow_text` first (it registers the SentencePiece ops).
"""

import os

import tensorflow as tf

from albert_tf.tasks.classification.pipeline import pack
from albert_tf.export import savedmodel
from albert_tf.storage import atomic, outputs, provenance
from albert_tf.storage import files


class ClassifierModule(tf.train.Checkpoint):
    """Root object of the classifier SavedModel.

    Args:
        preprocess: the preprocessing object (loaded `preprocess/` SavedModel or a
            PreprocessModule).
        classifier: the fine-tuned AlbertClassifier.
        seq_length: T used for packing.
        labels: the task's label names; empty for regression.
        pair: whether the task has a second text (text_b).
        widths: the length buckets (albert_tf.data.bucket_widths.bucket_widths): a request is
            padded to the smallest that holds its longest input; None: seq_length.
    """

    def __init__(self, preprocess, classifier, seq_length, labels=(), pair=False, widths=None):
        super().__init__()
        self.preprocess = preprocess
        self.classifier = classifier
        self._seq_length = int(seq_length)
        self._labels = list(labels)
        self._pair = bool(pair)
        self._widths = tuple(widths) if widths else (self._seq_length,)
        self.variables = [getattr(v, "value", v) for v in classifier.weights]
        if self._labels:
            self._label_names = tf.constant(self._labels)
        specs = {"text_a": tf.TensorSpec([None], tf.string, name="text_a")}
        if self._pair:
            specs["text_b"] = tf.TensorSpec([None], tf.string, name="text_b")
        fn = self._call_pair if self._pair else self._call_single
        self.__call__ = tf.function(fn, input_signature=list(specs.values()), autograph=False)
        self.serve_examples = tf.function(self._serve_examples, autograph=False,
                                          input_signature=[tf.TensorSpec([None], tf.string, name="examples")])

    def _outputs(self, text_a, text_b):
        inputs = pack(self.preprocess, text_a, text_b, self._seq_length, self._widths)
        logits = tf.cast(self.classifier(inputs, training=False), tf.float32)
        if not self._labels:
            return {"score": tf.squeeze(logits, -1)}
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), "label_id": label_id,
                "label": tf.gather(self._label_names, label_id)}

    def _call_single(self, text_a):
        return self._outputs(text_a, None)

    def _call_pair(self, text_a, text_b):
        return self._outputs(text_a, text_b)

    def _serve_examples(self, examples):
        features = {"text_a": tf.io.FixedLenFeature([], tf.string)}
        # a pair task needs one text_b; a single-text task takes none (a text it would ignore)
        features["text_b"] = tf.io.FixedLenFeature([], tf.string) if self._pair else tf.io.VarLenFeature(tf.string)
        texts = tf.io.parse_example(examples, features)
        if self._pair:
            return self.__call__(texts["text_a"], texts["text_b"])
        unused = tf.debugging.assert_equal(tf.size(texts["text_b"].values), 0, message=(
            "Feature: text_b is given, but this classifier's task has one text (text_a)"))
        with tf.control_dependencies([unused]):
            return self.__call__(tf.identity(texts["text_a"]))

    def signatures(self):
        # the one trace of __call__; serve_examples calls it
        return {"serving_default": self.__call__.get_concrete_function(),
                "serve_examples": self.serve_examples.get_concrete_function()}


def export_classifier(preprocess, classifier, export_dir, seq_length, labels=(), pair=False, task_name="",
                      widths=None, skip_padding=True, made_by=None):
    """Writes the classifier SavedModel to export_dir atomically
    (`albert_tf.storage.atomic.output_dir`: a temporary sibling renamed into place).

    Also writes `export_dir/classifier_info.json` (task, labels, seq_length, inputs, and
    "made_by": `made_by`, what made the export (albert_tf.storage.provenance.record),
    stamped when written; left out when None).

    skip_padding: serve requests on their real tokens only (the encoder's run-time option skip_padding:
    same logits, less work); False computes the padding too, as the release did.

    Returns:
        export_dir.
    """
    with outputs.replacing_dir(export_dir, outputs.EXPORT) as tmp:
        module = ClassifierModule(preprocess, classifier, seq_length, labels, pair, widths)
        # requests are served on the real tokens only (padding skipped; pooled outputs unchanged)
        with classifier.runtime_options(skip_padding=skip_padding) as skipped:
            savedmodel.save(module, tmp, module.signatures)
        info = {"task_name": task_name, "labels": list(labels), "regression": not labels,
                "seq_length": int(seq_length), "length_buckets": list(module._widths),
                "skips_padding": bool(skip_padding and skipped),
                "inputs": ["text_a", "text_b"] if pair else ["text_a"]}
        if made_by is not None:
            info["made_by"] = provenance.stamp(made_by)
        atomic.write_json(files.join(tmp, "classifier_info.json"), info, sort_keys=False)
    return os.path.abspath(export_dir)
