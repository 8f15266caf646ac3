"""The fine-tuned SQuAD model as one SavedModel that takes raw strings (use: docs/squad.md, "Serving").

Root `__call__(question [B], context [B])` and the `serving_default` signature return, per
question:
  answer           string: context[start:end] (characters of the original context)
  score            float32: start + end score of the answer (v1: logits; v2: log-probs)
  start, end       int32: the answer's character span in `context`, end exclusive; -1 when
                   no span qualifies or the question or context has no piece (an empty
                   one): then answer is "" and score -1e6, and the other questions of the
                   batch get what they get alone
  no_answer_score  float32 (v2 only): the minimum answer-class logit over the windows
                   (higher: more likely unanswerable; "no answer" when > the
                   threshold of the run's predictions_best_f1_thresh.json, kept in
                   qa_info.json as null_threshold when the run had metrics)

`context_tokens(context)` (one string) gives the context's pieces as the model reads them:
`ids` int32 [P] and their character spans `start`, `end` [P] in `context`; `tokenize(strings)`
the ids of questions (RawTextModule).

The windows, the model's batch and the choice of span are run_squad's prediction's, so `answer`
is the first entry of nbest_predictions.json for the same question. Dropout is off (training=False).
"""

import os

import tensorflow as tf

from albert_tf.data.buckets import width_for
from albert_tf.export import savedmodel
from albert_tf.tasks.squad.aligned_tokens import context_pieces
from albert_tf.export.normalization import SPACE
from albert_tf.export.raw_text_module import RawTextModule, writing_export
from albert_tf.storage import atomic, provenance
from albert_tf.storage import files

NO_SPAN_SCORE = -1e6
QA_INFO = "qa_info.json"


class QuestionAnsweringModule(RawTextModule):
    """Root object of the QA SavedModel.

    Args:
        model: a fine-tuned AlbertForQuestionAnswering (v1 or v2 head).
        spm_model_file, do_lower_case: as RawTextModule's.
        max_seq_length, doc_stride, max_query_length: the run's window settings.
        n_best_size: v1 starts and ends considered per window.
        max_answer_length: longest answer in pieces.
        widths: the length buckets: a question's windows are padded to the smallest that
            holds the longest; None: max_seq_length.
    """

    def __init__(self, model, spm_model_file, do_lower_case=True, max_seq_length=384, doc_stride=128,
                 max_query_length=64, n_best_size=20, max_answer_length=30, widths=None):
        super().__init__(model, spm_model_file, do_lower_case, max_seq_length, widths)
        self._doc_stride = int(doc_stride)
        self._max_query_length = int(max_query_length)
        self._n_best_size = int(n_best_size)
        self._max_answer_length = int(max_answer_length)
        self._v2 = model.version == "v2"
        self.__call__ = tf.function(
            self._answer_batch, input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                                 tf.TensorSpec([None], tf.string, name="context")],
            autograph=False)
        self.context_tokens = tf.function(self._context_tokens, input_signature=[tf.TensorSpec([], tf.string)],
                                          autograph=False)

    def _context_tokens(self, context):
        ids, start, end = context_pieces(context, self._tokenizer, self._lower)
        return {"ids": ids, "start": start, "end": end}

    def _windows(self, question, context):
        """-> model inputs [W, T'] (T' = the longest window), doc index [W, T'] (-1 outside
        the context), in_doc and may_start [W, T'] (all False for a question without pieces:
        nothing is asked, so nothing is answered), and the context pieces' spans [P]."""
        query = self._tokenizer.tokenize(self.normalized(question))[:self._max_query_length]
        ids, span_start, span_end = context_pieces(context, self._tokenizer, self._lower)
        q = tf.size(query)
        n = tf.size(ids)
        # one extra entry each, so that gathers stay in range for an empty context
        ids = tf.concat([ids, [self._pad_id]], 0)
        span_start, span_end = tf.concat([span_start, [0]], 0), tf.concat([span_end, [0]], 0)
        room = self._max_seq_length - q - 3  # max_tokens_for_doc
        step = tf.minimum(room, self._doc_stride)
        count = 1 + (tf.maximum(n - room, 0) + step - 1) // step  # the release's doc_spans
        starts = tf.range(count) * step  # [W]
        lengths = tf.maximum(tf.minimum(n - starts, room), 0)  # [W]
        offset = q + 2
        width = width_for([offset + tf.reduce_max(lengths) + 1], self._widths)  # the bucket of the longest
        t = tf.range(width)[None, :]  # [1, T']
        k = t - offset  # position inside the window's context part
        in_doc = (k >= 0) & (k < lengths[:, None])  # [W, T']
        doc_index = tf.where(in_doc, starts[:, None] + k, -1)
        word = tf.gather(ids, tf.maximum(doc_index, 0))
        word = tf.where(in_doc, word, self._pad_id)
        word = tf.where(t == 0, self._cls_id, word)
        q_pos = (t >= 1) & (t <= q)
        query_ext = tf.concat([query, [self._pad_id]], 0)  # an entry to gather for an empty question
        word = tf.where(q_pos, tf.gather(query_ext, tf.clip_by_value(t - 1, 0, q)), word)
        sep = (t == q + 1) | (k == lengths[:, None])
        word = tf.where(sep, self._sep_id, word)
        mask = t <= offset + lengths[:, None]
        type_ids = (k >= 0) & mask
        # max-context: of the windows holding a piece, the one with the largest
        # min(left, right) + 0.01 * length (the first on a tie)
        pos = tf.range(n)[None, :]
        left = pos - starts[:, None]
        right = starts[:, None] + lengths[:, None] - 1 - pos
        score = tf.where((left >= 0) & (right >= 0),
                         tf.cast(tf.minimum(left, right), tf.float64) + 0.01 * tf.cast(lengths[:, None], tf.float64),
                         tf.constant(-1.0, tf.float64))  # [W, P]
        best = tf.reduce_max(score, axis=0, keepdims=True)
        window = tf.range(count)[:, None]
        best_window = tf.reduce_min(tf.where(tf.equal(score, best), window, count), axis=0)  # [P]
        best_window = tf.concat([best_window, [-1]], 0)
        may_start = in_doc & tf.equal(tf.gather(best_window, tf.maximum(doc_index, 0)), window)
        inputs = {"input_word_ids": word, "input_mask": tf.cast(mask, tf.int32),
                  "input_type_ids": tf.cast(type_ids, tf.int32)}
        if self._v2:
            inputs["p_mask"] = tf.cast(~(in_doc | (t == 0)), tf.int32)
        return inputs, doc_index, in_doc & (q > 0), may_start & (q > 0), span_start, span_end

    def _pairs_v1(self, out, in_doc, may_start):
        """-> start positions, end positions, scores [W, K, K] (invalid: -inf)."""
        k = tf.minimum(self._n_best_size, tf.shape(in_doc)[1])
        minus = tf.constant(float("-inf"))
        start_top, start_at = tf.math.top_k(tf.where(may_start, tf.cast(out["start_logits"], tf.float32), minus), k)
        end_top, end_at = tf.math.top_k(tf.where(in_doc, tf.cast(out["end_logits"], tf.float32), minus), k)
        scores = start_top[:, :, None] + end_top[:, None, :]
        starts = tf.broadcast_to(start_at[:, :, None], tf.shape(scores))
        ends = tf.broadcast_to(end_at[:, None, :], tf.shape(scores))
        return starts, ends, scores

    def _pairs_v2(self, out, in_doc, may_start):
        start_at = out["start_top_index"]  # [W, k1]
        k1 = tf.shape(start_at)[1]
        end_at = tf.reshape(out["end_top_index"], [tf.shape(start_at)[0], k1, -1])  # [W, k1, k2]
        end_lp = tf.reshape(tf.cast(out["end_top_log_probs"], tf.float32), tf.shape(end_at))
        start_lp = tf.cast(out["start_top_log_probs"], tf.float32)
        width = tf.shape(in_doc)[1]
        start_ok = tf.gather(may_start, tf.clip_by_value(start_at, 0, width - 1), batch_dims=1)
        end_ok = tf.gather(in_doc, tf.clip_by_value(tf.reshape(end_at, [tf.shape(end_at)[0], -1]), 0, width - 1),
                           batch_dims=1)
        scores = start_lp[:, :, None] + end_lp
        scores = tf.where(start_ok[:, :, None] & tf.reshape(end_ok, tf.shape(end_at)), scores, float("-inf"))
        starts = tf.broadcast_to(start_at[:, :, None], tf.shape(scores))
        return starts, end_at, scores

    def _answer_one(self, pair):
        question, context = pair[0], pair[1]
        inputs, doc_index, in_doc, may_start, span_start, span_end = self._windows(question, context)
        out = self.model(inputs, training=False)
        starts, ends, scores = (self._pairs_v2 if self._v2 else self._pairs_v1)(out, in_doc, may_start)
        count = tf.shape(scores)[0]
        window = tf.broadcast_to(tf.range(count)[:, None, None], tf.shape(scores))
        piece_start = _at(doc_index, window, starts)
        piece_end = _at(doc_index, window, ends)
        char_start = tf.gather(span_start, tf.maximum(piece_start, 0))
        char_end = tf.gather(span_end, tf.maximum(piece_end, 0))
        # as squad_postprocess: same window, both in the context, end >= start, length cap,
        # a non-empty character span
        valid = (tf.math.is_finite(scores) & (piece_start >= 0) & (piece_end >= 0) & (ends >= starts)
                 & (ends - starts + 1 <= self._max_answer_length) & (char_start < char_end))
        flat_scores = tf.reshape(tf.where(valid, scores, float("-inf")), [-1])
        best = tf.argmax(tf.cast(tf.equal(flat_scores, tf.reduce_max(flat_scores)), tf.int32), output_type=tf.int32)
        found = tf.reduce_any(valid)
        start = tf.where(found, tf.reshape(char_start, [-1])[best], -1)
        end = tf.where(found, tf.reshape(char_end, [-1])[best], -1)
        end = _strip_end(context, start, end)
        answer = tf.where(found, tf.strings.substr(context, tf.maximum(start, 0), tf.maximum(end - start, 0),
                                                   unit="UTF8_CHAR"), "")
        result = {"answer": answer, "score": tf.where(found, flat_scores[best], NO_SPAN_SCORE),
                  "start": start, "end": end}
        if self._v2:
            result["no_answer_score"] = tf.reduce_min(tf.cast(out["cls_logits"], tf.float32))
        return result

    def _answer_batch(self, question, context):
        signature = {"answer": tf.TensorSpec([], tf.string), "score": tf.TensorSpec([], tf.float32),
                     "start": tf.TensorSpec([], tf.int32), "end": tf.TensorSpec([], tf.int32)}
        if self._v2:
            signature["no_answer_score"] = tf.TensorSpec([], tf.float32)
        return tf.map_fn(self._answer_one, (question, context), fn_output_signature=signature)


def _at(table, rows, columns):
    """table[rows, columns] elementwise (rows and columns of one shape)."""
    return tf.gather_nd(table, tf.stack([rows, columns], axis=-1))


def _strip_end(context, start, end):
    """Moves `end` left past whitespace (a span ending on a bare "▁" piece reaches the next
    word's start); squad_postprocess strips the text the same way."""
    chars = tf.strings.unicode_split(context, "UTF-8")
    space = tf.strings.regex_full_match(chars, SPACE)
    solid = tf.cast(tf.where(~space)[:, 0], tf.int32)
    last = tf.gather(tf.concat([[-1], solid], 0), tf.searchsorted(solid, [end - 1], side="right"))[0]
    return tf.where(end > start, tf.maximum(last + 1, start), end)


def export_question_answering(model, spm_model_file, export_dir, do_lower_case=True, max_seq_length=384,
                              doc_stride=128, max_query_length=64, n_best_size=20, max_answer_length=30,
                              widths=None, extra_info=None, made_by=None):
    """Writes the QA SavedModel to export_dir atomically (a temporary sibling renamed into
    place) with `export_dir/qa_info.json` (head version, window and answer settings, the
    inputs and outputs, `extra_info`, e.g. the run's null_threshold, and "made_by": `made_by`,
    what made the export (albert_tf.storage.provenance.record), stamped when written; left
    out when None).

    Returns:
        export_dir (absolute).
    """
    settings = dict(do_lower_case=bool(do_lower_case), max_seq_length=int(max_seq_length), doc_stride=int(doc_stride),
                    max_query_length=int(max_query_length), n_best_size=int(n_best_size),
                    max_answer_length=int(max_answer_length))
    with writing_export(export_dir, spm_model_file) as (tmp, spm_copy):
        module = QuestionAnsweringModule(model, spm_copy, widths=widths, **settings)
        savedmodel.save(module, tmp, module.signatures)
        outputs = ["answer", "score", "start", "end"] + (["no_answer_score"] if model.version == "v2" else [])
        info = {"version": model.version, **settings, **model.head_settings(), "length_buckets": list(module._widths),
                "inputs": ["question", "context"],
                "outputs": outputs, **(extra_info or {})}
        if made_by is not None:
            info["made_by"] = provenance.stamp(made_by)
        atomic.write_json(files.join(tmp, QA_INFO), info, sort_keys=False)
    return os.path.abspath(export_dir)
