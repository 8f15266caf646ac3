"""AlbertForQuestionAnswering: an ALBERT encoder with the release's SQuAD v1.1 or 2.0 head.

Shape legend: B batch, T sequence length, H hidden size, k1 = start_n_top, k2 = end_n_top.

Its pretrained directory: modeling/finetuned.py (model.json records version, start_n_top,
end_n_top and dropout_prob; 0.2.0 wrote them into question_answering.json).
"""

import os

import keras
from keras import ops

from albert_tf.modeling.finetuned import FineTunedModel
from albert_tf.modeling.qa_heads import VERSIONS, SquadV1Head, SquadV2Head

QUESTION_ANSWERING_WEIGHTS = "question_answering.weights.h5"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForQuestionAnswering(FineTunedModel):
    """ALBERT with a SQuAD head: "v1" (linear start/end, run_squad_v1.py) or "v2"
    (XLNet-style start, end and answerability, run_squad_v2.py).

    Args:
        encoder: an `AlbertEncoder`, or an `AlbertConfig` (or a dict of its keys) to
            build a new one.
        version: "v1" or "v2".
        start_n_top: int. v2 only: starts kept in inference (release: 5).
        end_n_top: int. v2 only: ends kept per start in inference (release: 5).
        dropout_prob: float. v2 only: dropout in the answer-class branch (release: 0.1).
            The encoder's own dropout comes from its config.

    Inputs: dict of int32 [B, T] `input_word_ids`, `input_mask`, `input_type_ids`; v2
    also reads `p_mask` [B, T] (1 where no answer may start or end: question,
    separators, padding; when absent only padding is masked; positions with
    input_mask 0 are always masked) and, in training, `start_positions` [B]. Other
    keys are ignored, so one batch feeds both versions.

    Outputs:
        v1: dict `start_logits`, `end_logits` float32 [B, T].
        v2 training (`training=True`): `start_log_probs` [B, T], `end_log_probs`
            [B, T] (end conditioned on the gold start), `cls_logits` [B].
        v2 inference: `start_top_log_probs` [B, k1], `start_top_index` [B, k1],
            `end_top_log_probs` [B, k1*k2], `end_top_index` [B, k1*k2], `cls_logits` [B].

    Losses: `albert_tf.modeling.qa_heads.squad_v1_loss` and `squad_v2_loss`. Variable paths:
    the encoder's (`AlbertEncoder`), then `squad/output_weights`, `squad/output_bias` (v1) or
    `squad_v2/...` (v2; `albert_tf.modeling.qa_heads`).

    Called as in `AlbertEncoder`'s example, on the same input dict.
    """

    WEIGHTS_FILE = QUESTION_ANSWERING_WEIGHTS
    HEAD_SETTINGS = ("version", "start_n_top", "end_n_top", "dropout_prob")
    EXTRA_PARTS = "SQuAD head"
    LEGACY_SETTINGS_FILE = "question_answering.json"
    SETTINGS_HOLD = "the head's version"

    def __init__(self, encoder, version="v1", start_n_top=5, end_n_top=5, dropout_prob=0.1, **kwargs):
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {', '.join(VERSIONS)}, got {version!r}.")
        kwargs.setdefault("name", "albert_for_question_answering")
        super().__init__(encoder, **kwargs)

        # === Layers ===
        hidden_size = self.encoder.config.hidden_size
        initializer_range = self.encoder.config.initializer_range
        if version == "v1":
            self.head = SquadV1Head(hidden_size, initializer_range=initializer_range, name="squad")
        else:
            self.head = SquadV2Head(hidden_size, start_n_top=start_n_top, end_n_top=end_n_top,
                                    dropout_prob=dropout_prob, initializer_range=initializer_range, name="squad_v2")
        self._build_head()  # paths `squad/...`, `squad_v2/...`

        # === Config ===
        self.version = version
        self.start_n_top = int(start_n_top)
        self.end_n_top = int(end_n_top)
        self.dropout_prob = float(dropout_prob)

    def call(self, inputs, training=None):
        encoded = self.encoder(self._encoder_inputs(inputs), training=training)
        sequence_output = encoded["sequence_output"]  # [B, T, H]
        if self.version == "v1":
            return self.head(sequence_output)
        padding = 1.0 - ops.cast(inputs["input_mask"], "float32")  # [B, T]
        p_mask = inputs.get("p_mask")
        p_mask = padding if p_mask is None else ops.maximum(ops.cast(p_mask, "float32"), padding)
        return self.head(sequence_output, p_mask, inputs.get("start_positions"), training=training)

    @classmethod
    def from_pretrained(cls, directory, version=None, start_n_top=None, end_n_top=None, dropout_prob=None):
        """Builds the model from an albert_tf pretrained directory.

        With question_answering.weights.h5 there: that model (arguments given here
        override its record's, except a different `version`, an error). Otherwise the
        encoder of encoder.weights.h5 or pretrainer.weights.h5 with a new head (`version`
        default "v1").

        Raises:
            ValueError: naming the directory and what is missing or does not match.
        """
        directory = os.fspath(directory)

        def check(found):
            if version is not None and version != found["version"]:
                raise ValueError(f"{directory}: holds a SQuAD {found['version']} head, not {version}.")

        overrides = dict(start_n_top=start_n_top, end_n_top=end_n_top, dropout_prob=dropout_prob)
        return cls._load_pretrained(directory, overrides, new_head={"version": version or "v1"}, check=check)
