"""The fine-tuned multiple-choice model (RACE) as one SavedModel that takes raw strings (docs/race.md;
load after `import tensorflow_text`).

Root `__call__(article [B], question [B], options [B, C])` and the `serving_default`
signature (any C >= 2, the same for the whole request) -> `probabilities`, `logits` [B, C],
`choice` int32 [B], `letter` [B] ("A", ...). Inputs are built in the graph as
albert_tf.tasks.race.features builds them in training (albert_tf.export.normalization,
albert_tf.export.release_tokenizer), each request padded only to the length bucket of its
longest input (padding is masked: the same logits). Dropout is off (training=False).
"""

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data.buckets import width_for
from albert_tf.export import savedmodel
from albert_tf.export.raw_text_module import RawTextModule, writing_export
from albert_tf.storage import atomic, provenance
from albert_tf.storage import files

MULTIPLE_CHOICE_INFO = "multiple_choice_info.json"


class MultipleChoiceModule(RawTextModule):
    """Root object of the multiple-choice SavedModel.

    Args:
        model: a fine-tuned AlbertForMultipleChoice.
        spm_model_file, do_lower_case, widths: as RawTextModule's.
        max_seq_length, max_qa_length: the run's settings.
    """

    def __init__(self, model, spm_model_file, do_lower_case=True, max_seq_length=512, max_qa_length=128,
                 widths=None):
        super().__init__(model, spm_model_file, do_lower_case, max_seq_length, widths)
        self._max_qa_length = int(max_qa_length)
        specs = [tf.TensorSpec([None], tf.string, name="article"), tf.TensorSpec([None], tf.string, name="question"),
                 tf.TensorSpec([None, None], tf.string, name="options")]
        self.__call__ = tf.function(self._answer, input_signature=specs, autograph=False)

    def _qa_text(self, question, option):
        """The release's question-with-option, on normalised strings [N]."""
        parts = tf.strings.split(question, "_")  # [N, (k)]
        last = tf.ragged.range(parts.row_lengths()) < parts.row_lengths()[:, None] - 1
        glue = tf.where(last.flat_values, tf.repeat(option, parts.row_lengths()), "")
        filled = tf.strings.reduce_join(parts.with_flat_values(tf.strings.join([parts.flat_values, glue])), axis=1)
        has_blank = tf.strings.regex_full_match(question, r"(?s).*_.*")
        return tf.where(has_blank, filled, tf.strings.join([question, option], separator=" "))

    def _twice(self, text):
        return self.normalized(self.normalized(text))

    def inputs(self, article, question, options):
        """Raw strings -> the model's int32 inputs [B, C, T'] (T' the longest of the request)."""
        batch, choices = tf.shape(options)[0], tf.shape(options)[1]
        # as race_data: question and option normalised, joined, then normalised twice
        # (race_data's preprocess_text, then SentencePieceTokenizer.encode's own); the article
        # twice too. Twice is not once: NFKD can make spaces (U+00A8 -> a space and a dropped
        # mark) that only the second pass collapses.
        question = tf.repeat(self.normalized(question), choices)  # [B*C]
        option = tf.reshape(self.normalized(options), [-1])
        qa = self._tokenizer.tokenize(self._twice(self._qa_text(question, option)))  # [B*C, (n)]
        keep = tf.ragged.range(qa.row_lengths()) >= qa.row_lengths()[:, None] - self._max_qa_length
        qa = tf.ragged.boolean_mask(qa, keep)  # its last max_qa_length pieces
        text = self._tokenizer.tokenize(self._twice(article))  # [B, (m)]
        text = tf.gather(text, tf.repeat(tf.range(batch), choices))
        room = self._max_seq_length - 3 - tf.cast(qa.row_lengths(), tf.int32)
        text = tf.ragged.boolean_mask(text, tf.ragged.range(text.row_lengths()) < tf.cast(room, tf.int64)[:, None])
        ids, types = tf_text.combine_segments([text, qa], start_of_sequence_id=self._cls_id,
                                              end_of_segment_id=self._sep_id)
        lengths = ids.row_lengths()
        width = width_for(lengths, self._widths)  # the bucket of the longest input
        shape = [batch, choices, width]
        def padded(ragged, value):  # [B*C, (n)] -> [B*C, width]
            dense = tf.cast(ragged.to_tensor(value), tf.int32)
            return tf.pad(dense, [[0, 0], [0, width - tf.shape(dense)[1]]], constant_values=value)

        return {"input_word_ids": tf.reshape(padded(ids, self._pad_id), shape),
                "input_mask": tf.reshape(tf.sequence_mask(lengths, width, tf.int32), shape),
                "input_type_ids": tf.reshape(padded(types, 0), shape)}

    def _answer(self, article, question, options):
        logits = tf.cast(self.model(self.inputs(article, question, options), training=False)["logits"], tf.float32)
        choice = tf.argmax(logits, axis=-1, output_type=tf.int32)
        letters = tf.constant([chr(ord("A") + i) for i in range(26)])
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), "choice": choice,
                "letter": tf.gather(letters, tf.minimum(choice, 25))}


def export_multiple_choice(model, spm_model_file, export_dir, do_lower_case=True, max_seq_length=512,
                           max_qa_length=128, widths=None, extra_info=None, made_by=None):
    """Writes the multiple-choice SavedModel to export_dir atomically (a temporary sibling
    renamed into place) with `export_dir/multiple_choice_info.json` (settings, inputs,
    outputs, `extra_info`, and "made_by": `made_by`, what made the export
    (albert_tf.storage.provenance.record), stamped when written; left out when None).

    Returns:
        export_dir (absolute).
    """
    settings = dict(do_lower_case=bool(do_lower_case), max_seq_length=int(max_seq_length),
                    max_qa_length=int(max_qa_length))
    with writing_export(export_dir, spm_model_file) as (tmp, spm_copy):
        module = MultipleChoiceModule(model, spm_copy, widths=widths, **settings)
        # requests are served on the real tokens only (padding skipped; pooled outputs unchanged)
        with model.runtime_options(skip_padding=True) as skipped:
            savedmodel.save(module, tmp, module.signatures)
        info = {**settings, "dropout_prob": model.dropout_prob, "length_buckets": list(module._widths),
                "skips_padding": bool(skipped),
                "inputs": ["article", "question", "options"],
                "outputs": ["logits", "probabilities", "choice", "letter"], **(extra_info or {})}
        if made_by is not None:
            info["made_by"] = provenance.stamp(made_by)
        atomic.write_json(files.join(tmp, MULTIPLE_CHOICE_INFO), info, sort_keys=False)
    return os.path.abspath(export_dir)
