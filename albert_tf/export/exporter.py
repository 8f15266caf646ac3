"""Writes EXPORT_PATH/encoder and EXPORT_PATH/preprocess (or the encoder alone), atomically.

Both SavedModels are written into a temporary sibling of EXPORT_PATH
(`albert_tf.storage.outputs.replacing_dir`) that replaces it only when both are complete (an
existing export is put aside first and removed after), so a crash never leaves a
half-written export; EXPORT_PATH must be new or albert_tf's own export (marked), never a
user's directory. Assets (the SentencePiece model, albert_config.json) are copied
inside; no path of the exporting machine is stored in saved_model.pb.
"""

import os
import tempfile

import tensorflow as tf

from albert_tf.data.tokenization import strip_machine_paths
from albert_tf.export import savedmodel
from albert_tf.export.encoder_module import EncoderModule
from albert_tf.export.preprocess_module import PreprocessModule
from albert_tf.storage import outputs
from albert_tf.storage import files


def export_tfhub(pretrainer, spm_model_file, export_path, with_mlm=True, seq_length=128, do_lower_case=True,
                 dtype_policy="float32", jit_compile=False, made_by=None, with_preprocess=True):
    """Exports an AlbertPretrainer's encoder (and masked-LM head) plus preprocessing.

    Args:
        pretrainer: an AlbertPretrainer with trained weights.
        spm_model_file: its SentencePiece model.
        export_path: output directory (gets `encoder/` and `preprocess/`).
        with_mlm: add the `.mlm` sub-object.
        seq_length: default length of the preprocessing model.
        do_lower_case: as create_pretraining_data's flag.
        dtype_policy: what the exported encoder computes in: "float32" (portable: the
            default) or "mixed_bfloat16" (for serving machines with native bf16). Its
            signatures take and return the same int32 / float32 tensors either way, and its
            variables are float32.
        jit_compile: the encoder serves (`serve`, `serving_default`) as one XLA program,
            compiled once per new [B, T] shape by the loading process (faster at a fixed
            shape; see benchmarks/inference_bench.py). The root `__call__` is unchanged.
        made_by: what made the export (albert_tf.storage.provenance.record), kept as
            "made_by" in the export's marker (`export_path/.albert_tf_output.json`): the
            SavedModels' assets/albert_config.json stays the model's config alone.
        with_preprocess: also write `preprocess/`; False: `encoder/` alone (for callers
            that load only the encoder, e.g. the benchmarks).

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
    with outputs.replacing_dir(export_path, outputs.EXPORT, made_by=made_by) as tmp:
        with tempfile.TemporaryDirectory() as scratch:
            # assets get stable names inside the SavedModel whatever the source paths are
            config_path = files.join(scratch, "albert_config.json")
            pretrainer.config.to_json_file(config_path)
            spm_copy = files.join(scratch, "spm.model")
            with files.open(spm_model_file, "rb") as src, files.open(spm_copy, "wb") as dst:
                dst.write(strip_machine_paths(src.read()))
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
    """An AlbertEncoder (Keras 3, any head can sit on it) holding the weights of an
    albert_tf export: `export_path` is the export directory (with `encoder/`) or its
    `encoder/` SavedModel. The config comes from the export's assets; the weights are read
    from its variables with the one matching report, so a foreign SavedModel is refused
    with the differences named.

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
