"""LiteRT (TensorFlow Lite) models of albert_tf models, for on-device ALBERT (docs/litert.md):
the serving function frozen at float32, dynamic batch and length, builtin ops only:

    model                              inputs (int32)                  outputs (float32 but indices)
    AlbertEncoder / AlbertPretrainer   input_word_ids, input_mask,     pooled_output [B, H],
                                       input_type_ids [B, T]           sequence_output [B, T, H]
    AlbertClassifier                   the same                        logits [B, C]
    AlbertForQuestionAnswering (v1)    the same                        start_logits, end_logits [B, T]
    AlbertForQuestionAnswering (v2)    the same (T >= the beam:        start_top_log_probs,
                                       start_n_top and end_n_top)      start_top_index [B, K1];
                                                                       end_top_log_probs,
                                                                       end_top_index [B, K1 x K2];
                                                                       cls_logits [B] (the release's
                                                                       v2 beam, indices int32)
    AlbertForMultipleChoice            the same, [B, C, T]             logits [B, C]

`QUANTIZATIONS`: "none", "float16" (weights), "dynamic_int8" (weights; activations at run
time). Text goes in as ids: the SentencePiece model is written beside the file, and the JSON
(`tokenization_record`) says how albert_tf turns text into ids with it.

Shape legend: B batch, C classes or choices, T sequence length, H hidden size.
"""

import tempfile

import tensorflow as tf

from albert_tf import extras
from albert_tf.compat import variables_to_constants
from albert_tf.modeling.encoder import INPUT_NAMES

QUANTIZATIONS = ("none", "float16", "dynamic_int8")
V1_OUTPUTS = ("end_logits", "start_logits")
# the release's v2 beam (albert_tf.modeling.qa_heads), computed inside the file with builtin ops
V2_OUTPUTS = ("cls_logits", "end_top_index", "end_top_log_probs", "start_top_index", "start_top_log_probs")


def serving_spec(model):
    """(kind, input rank, output names, fn(ids, mask, types) -> dict of outputs) of `model`.

    Raises:
        ValueError: a model with no LiteRT form (another class).
    """
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    def inputs(a, b, c):
        return {"input_word_ids": a, "input_mask": b, "input_type_ids": c}

    if isinstance(model, (AlbertEncoder, AlbertPretrainer)):
        encoder = model.encoder if isinstance(model, AlbertPretrainer) else model

        def encode(a, b, c):
            out = encoder(inputs(a, b, c), training=False)
            return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"]}

        return "encoder", 2, ("pooled_output", "sequence_output"), encode
    if isinstance(model, AlbertClassifier):
        return "classifier", 2, ("logits",), lambda a, b, c: {"logits": model(inputs(a, b, c), training=False)}
    if isinstance(model, AlbertForQuestionAnswering):
        names = V1_OUTPUTS if model.version == "v1" else V2_OUTPUTS

        def spans(a, b, c):
            out = model(inputs(a, b, c), training=False)
            return {name: out[name] for name in names}

        return f"squad_{model.version}", 2, names, spans
    if isinstance(model, AlbertForMultipleChoice):
        return "multiple_choice", 3, ("logits",), lambda a, b, c: {"logits": model(inputs(a, b, c),
                                                                                     training=False)["logits"]}
    raise ValueError(f"export_litert: no LiteRT form of {type(model).__name__}.")


def litert_bytes(model, quantization="none"):
    """The LiteRT flatbuffer of `model` (built at float32), its signature "serving_default"
    taking INPUT_NAMES and returning `serving_spec`'s outputs.

    Raises:
        ValueError: an unknown quantization or a model with no LiteRT form.
    """
    return litert_files(model, (quantization,))[quantization]


def litert_files(model, quantizations):
    """{quantization: `litert_bytes(model, quantization)`} for each of `quantizations`: the
    model is traced, frozen and saved once, then converted once per quantization.

    Raises:
        ValueError: an unknown quantization or a model with no LiteRT form.
    """
    for quantization in quantizations:
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}.")
    _, rank, names, fn = serving_spec(model)
    specs = [tf.TensorSpec([None] * rank, tf.int32, name=n) for n in INPUT_NAMES]
    traced = tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()
    frozen = variables_to_constants(traced)  # the weights become constants of the graph
    order = sorted(names)  # a dict's outputs flatten in key order

    class Serving(tf.Module):
        @tf.function(input_signature=specs, autograph=False)
        def __call__(self, input_word_ids, input_mask, input_type_ids):
            outputs = frozen(input_word_ids, input_mask, input_type_ids)
            return dict(zip(order, outputs, strict=True))

    module = Serving()
    with tempfile.TemporaryDirectory(prefix="albert_tf_litert_") as tmp:
        tf.saved_model.save(module, tmp, signatures={"serving_default": module.__call__.get_concrete_function()})
        files = {}
        for quantization in quantizations:
            converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            if quantization != "none":
                converter.optimizations = [tf.lite.Optimize.DEFAULT]
            if quantization == "float16":
                converter.target_spec.supported_types = [tf.float16]
            files[quantization] = converter.convert()
        return files


# A text whose release tokenization differs from SentencePiece's alone (the digit-comma rule)
TOKENIZATION_EXAMPLE = "On February 7, 2016, at Levi's Stadium, 71,088 people watched."


def tokenization_record(spm_model_file, spm_name, do_lower_case=True):
    """How the app turns text into the file's input_word_ids, as albert_tf does (the release's
    tokenization.py: albert_tf.data.tokenization), with `TOKENIZATION_EXAMPLE`'s pieces and
    ids by albert_tf as a test vector; `spm_name` is the SentencePiece model's file name
    written beside the file."""
    from albert_tf.data.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm_model_file, do_lower_case)
    steps = ["collapse whitespace: ' '.join(text.strip().split()) (Python's str.split: every Unicode space)",
             "Unicode NFKD", "drop every character of non-zero canonical combining class "
             "(Python's unicodedata.combining(c) != 0: accents)"]
    if do_lower_case:
        steps.append("lower-case (Python's str.lower)")
    example = tokenizer.tokenize(TOKENIZATION_EXAMPLE)
    return {
        "sentencepiece_model": spm_name, "do_lower_case": bool(do_lower_case),
        "normalization": steps + ["then the SentencePiece model's own normalizer (inside the model)"],
        "no_quote_mapping": "`` and '' stay as they are (Hugging Face's and XLNet's tokenizers map them to \"; "
                            "the release does not)",
        "digit_comma_rule": "after SentencePiece's EncodeAsPieces: every piece longer than one character whose last "
                            "character is ',' and whose second-to-last satisfies Python's str.isdigit() is replaced "
                            "by the pieces of EncodeAsPieces(piece[:-1] with every '\u2581' removed), whose first "
                            "piece loses a leading '\u2581' where the piece had none (dropped when it was only "
                            "'\u2581'), followed by ','",
        "ids": "PieceToId of each piece; [CLS] first, [SEP] after each segment (input_type_ids 1 for the second), "
               f"[CLS]={tokenizer.cls_id} [SEP]={tokenizer.sep_id} <pad>={tokenizer.pad_id}",
        "example": {"text": TOKENIZATION_EXAMPLE, "pieces": example,
                    "ids": [tokenizer.sp.PieceToId(p) for p in example]},
    }


def sidecar(model, quantization, max_seq_length, labels=None, tokenization=None, made_by=None):
    """The JSON written beside the file: what goes in and out, the length, the labels, how
    text becomes the ids (`tokenization_record`) and, given `made_by` (a
    albert_tf.storage.provenance.record), what made it ("made_by", stamped now)."""
    from albert_tf.storage import provenance

    kind, rank, names, _ = serving_spec(model)
    shape = ["batch", "choices", "length"] if rank == 3 else ["batch", "length"]
    info = {"kind": kind, "model": type(model).__name__, "quantization": quantization,
            "inputs": {n: {"dtype": "int32", "shape": shape} for n in INPUT_NAMES},
            "outputs": sorted(names), "max_seq_length": int(max_seq_length),
            "labels": list(labels) if labels is not None else None, "signature": "serving_default",
            "raw_string_input": False, "tokenization": tokenization}
    if made_by is not None:
        info["made_by"] = provenance.stamp(made_by)
    return info


def companion_paths(output):
    """(SentencePiece model, JSON) written beside `output` (x.tflite -> x.spm.model, x.json)."""
    stem = output[: -len(".tflite")] if output.endswith(".tflite") else output
    return stem + ".spm.model", stem + ".json"


def run_litert(model_content, inputs, num_threads=None):
    """Runs a LiteRT model once in ai_edge_litert's interpreter: dict of int32 arrays in,
    dict of float32 arrays out (its serving_default signature)."""
    Interpreter = extras.require("ai_edge_litert.interpreter", "run_litert").Interpreter

    interpreter = Interpreter(model_content=model_content, num_threads=num_threads)
    return interpreter.get_signature_runner("serving_default")(**inputs)
