"""SQuAD heads of the release (squad_utils.create_v1_model / create_v2_model) and their losses.

Shape legend: B batch, T sequence length, H hidden size, k1 = start_n_top, k2 = end_n_top.

Variable paths and the release's names (`albert_tf.convert.tf1.TF1_TABLE` maps them):

    squad/output_weights [2, H]                  cls/squad/output_weights
    squad/output_bias [2]                        cls/squad/output_bias
    squad_v2/start_logits_dense/{kernel [H, 1], bias [1]}        start_logits/dense/*
    squad_v2/end_logits_dense_0/{kernel [2H, H], bias [H]}       end_logits/dense_0/*
    squad_v2/end_logits_LayerNorm/{gamma, beta [H]}              end_logits/LayerNorm/*
    squad_v2/end_logits_dense_1/{kernel [H, 1], bias [1]}        end_logits/dense_1/*
    squad_v2/answer_class_dense_0/{kernel [2H, H], bias [H]}     answer_class/dense_0/*
    squad_v2/answer_class_dense_1/kernel [H, 1] (no bias)        answer_class/dense_1/kernel

The v2 end LayerNorm is the release's `contrib_layers.layer_norm(begin_norm_axis=-1)`,
whose variance epsilon is fixed at 1e-12: the project's `LAYER_NORM_EPSILON`.

Both heads compute in float32 (the -1e30 mask does not fit float16).
"""

import keras
from keras import ops

from albert_tf.modeling.embeddings import LAYER_NORM_EPSILON, check_rank, dense_layer
from albert_tf.modeling.heads import OutputWeightsHead
from albert_tf.modeling.losses import gold_nll, softmax_nll

# What the release subtracts at p_mask positions before the log-softmax.
P_MASK_ADDER = 1e30
VERSIONS = ("v1", "v2")


@keras.saving.register_keras_serializable(package="albert_tf")
class SquadV1Head(OutputWeightsHead):
    """The release's SQuAD v1.1 head: one linear map of every position to a start and
    an end logit.

    logits = sequence_output . output_weights^T + output_bias;
    start_logits, end_logits = logits[..., 0], logits[..., 1]

    Nothing is masked (the release masks nothing either; answer selection skips
    positions outside the context). Hugging Face's AlbertForQuestionAnswering
    `qa_outputs` (weight [2, H], bias [2]) holds the same numbers.

    Args:
        hidden_size: int. H.
        initializer_range: float. Truncated-normal stddev of `output_weights`.

    Call args:
        sequence_output: float [B, T, H].

    Returns:
        dict `start_logits`, `end_logits`: float32 [B, T].

    Example:
    ```python
    head = SquadV1Head(8)
    head(np.ones((2, 5, 8), "float32"))["start_logits"].shape  # (2, 5)
    ```
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        kwargs.setdefault("name", "squad")
        super().__init__(hidden_size, initializer_range, **kwargs)

    def call(self, sequence_output):
        check_rank(sequence_output, 3, "sequence_output")
        logits = self.logits(ops.cast(sequence_output, "float32"))  # [B, T, 2]
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def compute_output_shape(self, input_shape):
        return {"start_logits": tuple(input_shape[:2]), "end_logits": tuple(input_shape[:2])}


def _mask(logits, p_mask):
    """The release's masking: logits where p_mask is 0, -1e30 where it is 1."""
    return logits * (1.0 - p_mask) - P_MASK_ADDER * p_mask


@keras.saving.register_keras_serializable(package="albert_tf")
class SquadV2Head(keras.layers.Layer):
    """The release's SQuAD 2.0 head (XLNet style): start, end conditioned on a start,
    and an answerability logit.

    start_log_probs = log_softmax(mask(dense_{H->1}(x)))
    end(x, s)       = dense_{H->1}(LayerNorm(tanh(dense_{2H->H}([x ; s]))))
    training:  s = x at the gold start; end_log_probs = log_softmax(mask(end(x, s)))
    inference: the k1 best starts; for each, the k2 best ends of log_softmax(mask(end(x, s)))
    cls_logits = dense_{H->1, no bias}(dropout(tanh(dense_{2H->H}([softmax(start) . x ; x[:, 0]]))))

    mask(l) = l * (1 - p_mask) - 1e30 * p_mask; dropout (training) in the answer-class branch only.

    Args:
        hidden_size: int. H.
        start_n_top: int. k1, starts kept in inference.
        end_n_top: int. k2, ends kept per start in inference.
        dropout_prob: float. Dropout rate in the answer-class branch (release: 0.1).
        initializer_range: float. Truncated-normal stddev of the kernels.

    Call args:
        sequence_output: float [B, T, H].
        p_mask: [B, T], 1 at positions that cannot be in an answer (question,
            separators, padding), 0 in the context and at [CLS].
        start_positions: int [B]; required when `training` is true.
        training: bool. Training outputs (the end conditioned on the gold start) when true.

    Returns:
        training: dict `start_log_probs` [B, T], `end_log_probs` [B, T], `cls_logits` [B].
        inference: dict `start_top_log_probs` [B, k1], `start_top_index` int32 [B, k1],
        `end_top_log_probs` [B, k1*k2], `end_top_index` int32 [B, k1*k2] (the k2 ends of
        start i at [i*k2, (i+1)*k2)), `cls_logits` [B]. T must be at least k1 and k2.

    Example:
    ```python
    head = SquadV2Head(8, start_n_top=2, end_n_top=3)
    x, p_mask = np.ones((2, 5, 8), "float32"), np.array([[0, 1, 0, 0, 1]] * 2)
    head(x, p_mask)["end_top_index"].shape  # (2, 6)
    head(x, p_mask, np.array([2, 3]), training=True)["end_log_probs"].shape  # (2, 5)
    ```
    """

    def __init__(self, hidden_size, start_n_top=5, end_n_top=5, dropout_prob=0.1, initializer_range=0.02,
                 **kwargs):
        kwargs.setdefault("name", "squad_v2")
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.hidden_size = int(hidden_size)
        self.start_n_top = int(start_n_top)
        self.end_n_top = int(end_n_top)
        self.dropout_prob = float(dropout_prob)
        self.initializer_range = float(initializer_range)
        if self.start_n_top < 1 or self.end_n_top < 1:
            raise ValueError(f"start_n_top and end_n_top must be at least 1, got {start_n_top}, {end_n_top}.")

        def dense(units, name, activation=None, use_bias=True):
            return dense_layer(units, self.initializer_range, self.dtype_policy, name, activation, use_bias)

        h = self.hidden_size
        self.start_dense = dense(1, "start_logits_dense")
        self.end_dense_0 = dense(h, "end_logits_dense_0", activation="tanh")
        self.end_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="end_logits_LayerNorm")
        self.end_dense_1 = dense(1, "end_logits_dense_1")
        self.answer_dense_0 = dense(h, "answer_class_dense_0", activation="tanh")
        self.answer_dropout = keras.layers.Dropout(self.dropout_prob, dtype=self.dtype_policy)
        self.answer_dense_1 = dense(1, "answer_class_dense_1", use_bias=False)

    def build(self, input_shape=None, *args, **kwargs):
        h = self.hidden_size
        self.start_dense.build((None, None, h))
        self.end_dense_0.build((None, None, 2 * h))
        self.end_layer_norm.build((None, None, h))
        self.end_dense_1.build((None, None, h))
        self.answer_dense_0.build((None, 2 * h))
        self.answer_dense_1.build((None, h))
        self.built = True

    def _end_log_probs(self, x, start_features, p_mask):
        """x [B, T, H], start_features [B, K, H] -> end log-probs [B, K, T].

        dense_0 on [x ; s] is x . W[:H] + s . W[H:] + b: the [B, T, K, 2H] concatenation
        of the release is never built.
        """
        kernel = self.end_dense_0.kernel  # [2H, H]
        h = self.hidden_size
        from_x = ops.matmul(x, kernel[:h])  # [B, T, H]
        from_start = ops.matmul(start_features, kernel[h:]) + self.end_dense_0.bias  # [B, K, H]
        hidden = ops.tanh(ops.expand_dims(from_x, 1) + ops.expand_dims(from_start, 2))  # [B, K, T, H]
        hidden = self.end_layer_norm(hidden)
        end_logits = ops.squeeze(self.end_dense_1(hidden), -1)  # [B, K, T]
        return ops.log_softmax(_mask(end_logits, ops.expand_dims(p_mask, 1)), axis=-1)

    def call(self, sequence_output, p_mask, start_positions=None, training=None):
        check_rank(sequence_output, 3, "sequence_output")
        check_rank(p_mask, 2, "p_mask")
        x = ops.cast(sequence_output, "float32")  # [B, T, H]
        p_mask = ops.cast(p_mask, "float32")  # [B, T]

        start_logits = _mask(ops.squeeze(self.start_dense(x), -1), p_mask)  # [B, T]
        start_log_probs = ops.log_softmax(start_logits, axis=-1)

        if training:
            if start_positions is None:
                raise ValueError("SquadV2Head: training needs `start_positions` [B] (the end is conditioned "
                                 "on the gold start).")
            start_positions = ops.reshape(ops.cast(start_positions, "int32"), (-1, 1, 1))
            start_features = ops.take_along_axis(x, start_positions, axis=1)  # [B, 1, H]
            end_log_probs = ops.squeeze(self._end_log_probs(x, start_features, p_mask), 1)  # [B, T]
            outputs = {"start_log_probs": start_log_probs, "end_log_probs": end_log_probs}
        else:
            start_top_log_probs, start_top_index = ops.top_k(start_log_probs, self.start_n_top)  # [B, k1]
            start_top_index = ops.cast(start_top_index, "int32")
            start_features = ops.take_along_axis(x, ops.expand_dims(start_top_index, -1), axis=1)  # [B, k1, H]
            end_log_probs = self._end_log_probs(x, start_features, p_mask)  # [B, k1, T]
            end_top_log_probs, end_top_index = ops.top_k(end_log_probs, self.end_n_top)  # [B, k1, k2]
            k = self.start_n_top * self.end_n_top
            outputs = {
                "start_top_log_probs": start_top_log_probs,
                "start_top_index": start_top_index,
                "end_top_log_probs": ops.reshape(end_top_log_probs, (-1, k)),
                "end_top_index": ops.reshape(ops.cast(end_top_index, "int32"), (-1, k)),
            }

        # answerability from [start-probability-weighted state ; [CLS] state]
        start_p = ops.softmax(start_logits, axis=-1)  # [B, T]
        start_feature = ops.squeeze(ops.matmul(ops.expand_dims(start_p, 1), x), 1)  # [B, H]
        answer = self.answer_dense_0(ops.concatenate([start_feature, x[:, 0]], axis=-1))  # [B, H]
        answer = self.answer_dropout(answer, training=training)
        outputs["cls_logits"] = ops.squeeze(self.answer_dense_1(answer), -1)  # [B]
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                      dropout_prob=self.dropout_prob, initializer_range=self.initializer_range)
        return config


def squad_v1_loss(start_logits, end_logits, start_positions, end_positions, per_example=False):
    """The release's v1 loss: (mean start CE + mean end CE) / 2.

    Args:
        start_logits, end_logits: float [B, T].
        start_positions, end_positions: int [B].
        per_example: return each example's (start CE + end CE) / 2, float32 [B], whose
            mean is the loss (a distributed step sums them over the global batch).

    Returns:
        float32 scalar (or [B] with per_example).

    Example:
    ```python
    squad_v1_loss(np.zeros((2, 4)), np.zeros((2, 4)), [1, 2], [2, 3])  # log(4) = 1.386
    ```
    """
    start = softmax_nll(start_logits, start_positions)
    end = softmax_nll(end_logits, end_positions)
    rows = (start + end) / 2.0
    return rows if per_example else ops.mean(rows)


def squad_v2_loss(outputs, start_positions, end_positions, is_impossible, per_example=False):
    """The release's v2 loss on the head's training outputs:
    (mean start NLL + mean end NLL) / 2 + 0.5 * mean sigmoid CE(cls_logits, is_impossible).

    Args:
        outputs: dict with `start_log_probs`, `end_log_probs` [B, T], `cls_logits` [B]
            (SquadV2Head or AlbertForQuestionAnswering(version="v2") with training=True).
        start_positions, end_positions: int [B] (0, the [CLS] position, when impossible).
        is_impossible: [B], 1 for unanswerable.
        per_example: return each example's share, float32 [B], whose mean is the loss.

    Returns:
        float32 scalar (or [B] with per_example).
    """
    start = gold_nll(outputs["start_log_probs"], ops.reshape(start_positions, (-1,)))
    end = gold_nll(outputs["end_log_probs"], ops.reshape(end_positions, (-1,)))
    logits = ops.cast(outputs["cls_logits"], "float32")
    labels = ops.cast(ops.reshape(is_impossible, (-1,)), "float32")
    # stable sigmoid cross-entropy: max(x, 0) - x z + log(1 + exp(-|x|))
    answer = ops.maximum(logits, 0.0) - logits * labels + ops.log1p(ops.exp(-ops.abs(logits)))
    rows = (start + end) * 0.5 + 0.5 * answer
    return rows if per_example else ops.mean(rows)
