"""The preprocessing SavedModel: strings -> the encoder's three int32 inputs.

Root `__call__(strings [B])` -> `input_word_ids`, `input_mask`, `input_type_ids`
[B, seq_length]; `.tokenize(strings)` -> int32 RaggedTensor [B, (tokens)];
`.bert_pack_inputs(segments, seq_length=128)` with one or two tokenized segments:
[CLS] A [SEP] (B [SEP]), trimmed round-robin to seq_length.

`.tokenize` is `normalization.normalize` then `release_tokenizer.ReleaseTokenizer`: the same
ids as `SentencePieceTokenizer.encode` for the same text. Loading it needs
`import tensorflow_text` first (it registers the ops), as for every TF Hub preprocessing model.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data.vocab import SpecialTokens
from albert_tf.export.normalization import normalize
from albert_tf.export.release_tokenizer import ReleaseTokenizer
from albert_tf.storage import files


class PreprocessModule(tf.train.Checkpoint):
    """Root object of the preprocessing SavedModel.

    Args:
        spm_model_file: the SentencePiece model (also saved as the asset `sp_model_file`).
        do_lower_case: lower-case before SentencePiece (as create_pretraining_data).
        seq_length: default output length of `__call__` and `bert_pack_inputs`.
    """

    def __init__(self, spm_model_file, do_lower_case=True, seq_length=128):
        super().__init__()
        # the ids come from the model itself (a ValueError names a missing piece)
        special = SpecialTokens.from_sentencepiece(spm_model_file)
        self._cls_id, self._sep_id, self._mask_id, self._pad_id = (special.cls_id, special.sep_id, special.mask_id,
                                                                   special.pad_id)
        self._lower = bool(do_lower_case)
        self._seq_length = int(seq_length)
        self.sp_model_file = tf.saved_model.Asset(spm_model_file)
        self._tokenizer = ReleaseTokenizer(files.read_bytes(spm_model_file))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        return self._tokenizer.tokenize(normalize(strings, self._lower))

    @tf.function(autograph=False)
    def bert_pack_inputs(self, segments, seq_length=128):
        packed = _pack([tf.cast(s, tf.int32) for s in segments], tf.cast(seq_length, tf.int32), self._cls_id,
                       self._sep_id, self._pad_id)
        if isinstance(seq_length, int):  # a length known when traced: the outputs' static [B, seq_length]
            for value in packed.values():
                value.set_shape([None, seq_length])
        return packed

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def __call__(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)], seq_length=self._seq_length)

    def trace(self):
        segment = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
        # the length's spec is named as the saved signature names it: an unnamed one is traced
        # again while saving (tf.saved_model re-creates each traced signature)
        length = tf.TensorSpec([], tf.int32, name="seq_length")
        for count in (1, 2):
            self.bert_pack_inputs.get_concrete_function([segment] * count, seq_length=length)
            self.bert_pack_inputs.get_concrete_function([segment] * count)
        return {"serving_default": self.__call__.get_concrete_function()}


@tf.function(autograph=False)
def _pack(segments, seq_length, cls_id, sep_id, pad_id):
    """[CLS] A [SEP] (B [SEP]) trimmed round-robin and padded to seq_length (an int32 scalar
    tensor); traced once per form of the segments, which every trace of bert_pack_inputs calls."""
    specials = len(segments) + 1
    trimmed = tf_text.RoundRobinTrimmer(max_seq_length=seq_length - specials).trim(segments)
    ids, types = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
    word_ids, mask = tf_text.pad_model_inputs(ids, max_seq_length=seq_length, pad_value=pad_id)
    type_ids, _ = tf_text.pad_model_inputs(types, max_seq_length=seq_length)
    return {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32)}
