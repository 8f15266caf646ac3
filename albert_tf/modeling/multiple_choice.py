"""AlbertForMultipleChoice: an ALBERT encoder with the release's RACE head
(race_utils.create_model), and its loss.

Shape legend: B batch, C options per example (any number, may differ between batches),
T sequence length, H hidden size.

Each option is one sequence, [CLS] article [SEP] question-with-option [SEP]. The options
of a batch are encoded as B*C sequences, each one's pooled output gets one score, and the
options compete in a softmax over C (`multiple_choice_loss`). Its pretrained directory:
modeling/finetuned.py (0.2.0 wrote the head's dropout_prob into multiple_choice.json).
"""

import keras
from keras import ops

from albert_tf.modeling.embeddings import check_rank
from albert_tf.modeling.finetuned import FineTunedModel
from albert_tf.modeling.heads import OutputWeightsHead
from albert_tf.modeling.losses import softmax_nll

MULTIPLE_CHOICE_WEIGHTS = "multiple_choice.weights.h5"


@keras.saving.register_keras_serializable(package="albert_tf")
class MultipleChoiceHead(OutputWeightsHead):
    """The release's RACE head: dropout, then one linear score per option.

    logits = dropout(pooled_output) . output_weights^T + output_bias, squeezed to [B, C]

    Variables as the release's: `output_weights` [1, H], `output_bias` [1] (OutputWeightsHead).

    Args:
        hidden_size: int. H.
        dropout_prob: float. Dropout on the pooled output, in training only (release: 0.1).
        initializer_range: float. Truncated-normal stddev of `output_weights`.

    Call args:
        pooled_output: float [B, C, H], the encoder's pooled output of every option.
        training: bool. Dropout on when True.

    Returns:
        float32 [B, C] logits (computed in float32 whatever the input dtype).

    Example:
    ```python
    head = MultipleChoiceHead(8)
    head(np.ones((2, 4, 8), "float32")).shape  # (2, 4)
    ```
    """

    UNITS = 1

    def __init__(self, hidden_size, dropout_prob=0.1, initializer_range=0.02, **kwargs):
        kwargs.setdefault("name", "multiple_choice")
        super().__init__(hidden_size, initializer_range, **kwargs)
        self.dropout_prob = float(dropout_prob)
        if not 0.0 <= self.dropout_prob < 1.0:
            raise ValueError(f"dropout_prob must be in [0, 1), got {self.dropout_prob}.")
        self.dropout = keras.layers.Dropout(self.dropout_prob, dtype=self.dtype_policy, name="dropout")

    def call(self, pooled_output, training=None):
        check_rank(pooled_output, 3, "pooled_output")
        x = self.dropout(ops.cast(pooled_output, "float32"), training=training)  # [B, C, H]
        return ops.squeeze(self.logits(x), -1)  # [B, C, 1] -> [B, C]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2])

    def get_config(self):
        config = super().get_config()
        config.update(dropout_prob=self.dropout_prob)
        return config


def multiple_choice_loss(logits, labels, per_example=False):
    """The release's RACE loss: mean over the batch of the cross-entropy of the softmax
    over the options.

    Args:
        logits: float [B, C].
        labels: int [B], the index of the right option.
        per_example: return each example's cross-entropy, float32 [B], whose mean is the
            loss (a distributed step sums them over the global batch).

    Returns:
        float32 scalar (or [B] with per_example).

    Example:
    ```python
    multiple_choice_loss(np.zeros((2, 4)), [1, 3])  # log(4) = 1.386
    ```
    """
    rows = softmax_nll(logits, labels)  # [B]
    return rows if per_example else ops.mean(rows)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForMultipleChoice(FineTunedModel):
    """ALBERT with the release's multiple-choice (RACE) head: each option's pooled output
    scored by one linear map, the options of an example compared by a softmax.

    Args:
        encoder: an `AlbertEncoder`, or an `AlbertConfig` (or a dict of its keys) to
            build a new one.
        dropout_prob: float. Dropout on the pooled output before the head, in training
            only (release: 0.1). The encoder's own dropout comes from its config.

    Inputs: dict of int32 [B, C, T] `input_word_ids`, `input_mask`, `input_type_ids`:
    option c of example b is the sequence [b, c] ([CLS] article [SEP] question and
    option [SEP]). C may be any number of options and change between calls. Other keys
    are ignored.

    Outputs: dict `logits` float32 [B, C] (before the softmax over the options).

    Loss: `multiple_choice_loss(logits, labels)` (labels int [B]).

    Variable paths: the encoder's (`AlbertEncoder`), then `multiple_choice/output_weights`
    [1, H] and `multiple_choice/output_bias` [1] (the release's top-level
    `output_weights`, `output_bias`).

    Called as in `AlbertEncoder`'s example, on inputs [B, C, T].
    """

    WEIGHTS_FILE = MULTIPLE_CHOICE_WEIGHTS
    HEAD_SETTINGS = ("dropout_prob",)
    EXTRA_PARTS = "multiple-choice head"
    LEGACY_SETTINGS_FILE = "multiple_choice.json"
    SETTINGS_HOLD = "the head's dropout_prob"

    def __init__(self, encoder, dropout_prob=0.1, **kwargs):
        kwargs.setdefault("name", "albert_for_multiple_choice")
        super().__init__(encoder, **kwargs)

        # === Layers ===
        self.head = MultipleChoiceHead(self.encoder.config.hidden_size, dropout_prob=dropout_prob,
                                       initializer_range=self.encoder.config.initializer_range, name="multiple_choice")
        self._build_head()  # paths `multiple_choice/...`

        # === Config ===
        self.dropout_prob = self.head.dropout_prob

    def call(self, inputs, training=None):
        inputs = self._encoder_inputs(inputs)
        for name, value in inputs.items():
            shape = tuple(value.shape)
            if len(shape) != 3:
                raise ValueError(f"AlbertForMultipleChoice: `{name}` must have rank 3, [B, C, T] (batch, "
                                 f"options, tokens), got shape {shape}.")
        shape = ops.shape(inputs["input_word_ids"])
        options, length = shape[1], shape[2]
        flat = {name: ops.reshape(value, (-1, length)) for name, value in inputs.items()}  # [B*C, T]
        pooled = self.encoder(flat, training=training)["pooled_output"]  # [B*C, H]
        pooled = ops.reshape(pooled, (-1, options, self.config.hidden_size))  # [B, C, H]
        return {"logits": self.head(pooled, training=training)}  # [B, C]

    @classmethod
    def from_pretrained(cls, directory, dropout_prob=None):
        """Builds the model from an albert_tf pretrained directory.

        With multiple_choice.weights.h5 there: that model (`dropout_prob`, when given,
        overrides the record's). Otherwise the encoder of encoder.weights.h5 or
        pretrainer.weights.h5 with a new head (`dropout_prob` default 0.1).

        Raises:
            ValueError: naming the directory and what is missing or does not match
                (a CheckpointMismatchError listing the variables when the weights file
                does not fit albert_config.json).
        """
        return cls._load_pretrained(directory, {"dropout_prob": dropout_prob}, new_head={})
