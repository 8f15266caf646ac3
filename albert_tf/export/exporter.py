"""Writes EXPORT_PATH/encoder and EXPORT_PATH/preprocess (or the encoder alone), atomically
(`outputs.replacing_dir`: EXPORT_PATH must be new or albert_tf's own export). Assets (the
SentencePiece model, albert_config.json) are copied inside; no path of the exporting machine
is stored in saved_model.pb.
"""

import os

import tensorflow as tf

from albert_tf.export import savedmodel
from albert_tf.export.encoder_module import EncoderModule
from albert_tf.export.preprocess_module import PreprocessModule
from albert_tf.export.raw_text_module import writing_export
from albert_tf.storage import files


def export_tfhub(pretrainer, spm_model_file, export_path, with_mlm=True, seq_length=128, do_lower_case=True,
                 dtype_policy="float32", jit_compile=False, made_by=None, with_preprocess=True):
    """Exports an AlbertPretrainer's encoder (and masked-LM head) plus preprocessing.

    Args:
        pretrainer, spm_model_file: an AlbertPretrainer with trained weights, its SentencePiece model.
        export_path: output directory (gets `encoder/` and `preprocess/`).
        with_mlm: add the `.mlm` sub-object.
        seq_length, do_lower_case: the preprocessing model's default length and lower-casing.
        dtype_policy: what the encoder computes in ("float32" or "mixed_bfloat16"); its
            signatures and variables are int32 / float32 either way.
        jit_compile: the encoder serves (`serve`, `serving_default`) as one XLA program.
        made_by: a provenance.record, kept in the export's marker.
        with_preprocess: also write `preprocess/` (False: `encoder/` alone).

    Returns:
        export_path.
    """
    if not files.isfile(spm_model_file):
        raise ValueError(f"--spm_model_file {spm_model_file!r} does not exist.")
    if pretrainer.dtype_policy.name != dtype_policy:  # a copy computing in dtype_policy
        from albert_tf.modeling.pretrainer import AlbertPretrainer

        weights = pretrainer.get_weights()
        pretrainer = AlbertPretrainer(pretrainer.config, use_one_hot_embeddings=pretrainer.use_one_hot_embeddings,
                                      dtype=dtype_policy)
        pretrainer.set_weights(weights)
    with writing_export(export_path, spm_model_file, made_by) as (tmp, spm_copy):
        config_path = files.join(files.dirname(spm_copy), "albert_config.json")  # stable asset names
        pretrainer.config.to_json_file(config_path)
        encoder = EncoderModule(pretrainer.encoder, pretrainer.masked_lm_head if with_mlm else None,
                                assets={"albert_config_file": config_path, "sp_model_file": spm_copy},
                                jit_compile=jit_compile)
        # traced with the plain forward: a SavedModel cannot hold the gradient functions of
        # rematerialized or ordered-gradient applications (every run exports the same graph)
        with pretrainer.tracing_for_export():
            savedmodel.save(encoder, files.join(tmp, "encoder"), encoder.trace)
        if with_preprocess:
            preprocess = PreprocessModule(spm_copy, do_lower_case=do_lower_case, seq_length=seq_length)
            savedmodel.save(preprocess, files.join(tmp, "preprocess"), preprocess.trace)
    return os.path.abspath(export_path)


def load_encoder(export_path):
    """An AlbertEncoder holding the weights of an albert_tf export (the export directory or
    its `encoder/` SavedModel), its config from the export's assets, its weights read with
    the one matching report.

    Raises:
        ValueError: not an albert_tf encoder export (named), or variables that differ.
    """
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.storage.checkpoints import model_variables, object_variables
    from albert_tf.storage.report import MatchReport

    directory = files.join(export_path, "encoder") if files.isdir(files.join(export_path, "encoder")) \
        else export_path
    config_file = files.join(directory, "assets", "albert_config.json")
    prefix = files.join(directory, "variables", "variables")
    if not (files.isfile(config_file) and files.exists(prefix + ".index")):
        raise ValueError(f"{export_path}: not an albert_tf encoder export (expected encoder/assets/albert_config.json "
                         "and encoder/variables/, as written by albert_tf.export_tfhub).")
    encoder = AlbertEncoder(AlbertConfig.from_json_file(config_file))
    MatchReport.compare(model_variables(encoder, root="_encoder"), object_variables(prefix, "_encoder"),
                        f"the encoder export {directory}").raise_if_mismatched()
    tf.train.Checkpoint(_encoder=encoder).read(prefix).expect_partial().assert_existing_objects_matched()
    return encoder
