"""What the raw-string SavedModels of the fine-tuned models share (tasks.squad.export,
tasks.race.export): the root object's model, variables, SentencePiece asset and
in-graph tokenizer, the special ids and length buckets; writing the export atomically
with a SentencePiece model that holds no path of this machine.
"""

import contextlib
import tempfile

import tensorflow as tf

from albert_tf.data.vocab import SpecialTokens
from albert_tf.export.normalization import normalize
from albert_tf.export.release_tokenizer import ReleaseTokenizer
from albert_tf.storage.outputs import EXPORT, replacing_dir
from albert_tf.storage import files


class RawTextModule(tf.train.Checkpoint):
    """Root object of a raw-string SavedModel: `model` and its `variables`, the asset
    `sp_model_file`, the release's tokenizer and special ids, `_widths`;
    `tokenize(strings [B])` -> int32 RaggedTensor [B, (n)] (as the preprocessing model's);
    `normalized(text)` (any shape) -> normalize(text, do_lower_case), one tf.function every
    call site shares. A subclass sets `self.__call__` (a tf.function with named input specs),
    which is also the serving_default signature.

    Args:
        model: the fine-tuned Keras model.
        spm_model_file: its SentencePiece model (saved as the asset `sp_model_file`).
        do_lower_case: as in training.
        max_seq_length: the run's setting.
        widths: the length buckets (albert_tf.data.bucket_widths.bucket_widths): a request is
            padded to the smallest that holds its longest input; None: max_seq_length.
    """

    def __init__(self, model, spm_model_file, do_lower_case, max_seq_length, widths):
        super().__init__()
        special = SpecialTokens.from_sentencepiece(spm_model_file)
        self._cls_id, self._sep_id, self._pad_id = special.cls_id, special.sep_id, special.pad_id
        self.model = model
        self.variables = [getattr(v, "value", v) for v in model.weights]
        self.sp_model_file = tf.saved_model.Asset(spm_model_file)
        self._tokenizer = ReleaseTokenizer(files.read_bytes(spm_model_file))
        self._lower = bool(do_lower_case)
        self._max_seq_length = int(max_seq_length)
        self._widths = tuple(widths) if widths else (self._max_seq_length,)
        self._normalize = tf.function(lambda strings: normalize(strings, self._lower),
                                      input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        self.tokenize = tf.function(self._tokenize, input_signature=[tf.TensorSpec([None], tf.string)],
                                    autograph=False)

    def normalized(self, text):
        """normalize(text, do_lower_case) of a string tensor of any shape (the same shape back)."""
        text = tf.convert_to_tensor(text, tf.string)
        return tf.reshape(self._normalize(tf.reshape(text, [-1])), tf.shape(text))

    def _tokenize(self, strings):
        return self._tokenizer.tokenize(self.normalized(strings))

    def signatures(self):
        return {"serving_default": self.__call__.get_concrete_function()}


@contextlib.contextmanager
def writing_export(export_dir, spm_model_file, made_by=None):
    """Yields (tmp, spm_copy): the directory to write the export into, which replaces
    `export_dir` when the block ends without error (`outputs.replacing_dir`; `made_by` goes
    into its marker), and a copy of `spm_model_file` named spm.model, with no path of this
    machine, in a scratch directory of its own (removed after)."""
    from albert_tf.data.tokenization import strip_machine_paths

    with replacing_dir(export_dir, EXPORT, made_by=made_by) as tmp, tempfile.TemporaryDirectory() as scratch:
        spm_copy = files.join(scratch, "spm.model")
        files.write_bytes(spm_copy, strip_machine_paths(files.read_bytes(spm_model_file)))
        yield tmp, spm_copy
