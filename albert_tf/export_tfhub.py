"""Exports a pretrained albert_tf checkpoint as TF-Hub-style SavedModels.

    python -m albert_tf.export_tfhub --albert_config_file=runs/base/albert_config.json \
        --checkpoint=runs/base --spm_model_file=data/spm.model --export_path=export/base

EXPORT_PATH is a new path or an earlier export of albert_tf's (replaced atomically); an
existing directory albert_tf did not make, the checkpoint's own directory or one holding an
input is refused (exit 2) before anything is loaded.

Writes EXPORT_PATH/encoder (fine-tunes with hub.KerasLayer(trainable=True); loads in
Keras 3 with albert_tf.export.keras3.EncoderTFSMLayer or keras.layers.TFSMLayer) and
EXPORT_PATH/preprocess (strings -> encoder inputs). What made it (this command, its flags as
given, albert_tf's version and source state, TensorFlow/Keras, the device and the dtype
policy) is EXPORT_PATH/.albert_tf_output.json's "made_by" (albert_tf.storage.provenance).
"""

import dataclasses

from albert_tf import entry_points, option_flags
from albert_tf.storage.options import Command, LowerCase, ModelFiles, option
from albert_tf.tasks.options import PretrainingRunOptions
from albert_tf.training.options import TrainingOptions
from albert_tf.training.precision import PrecisionOptions, check_policy, choose
from albert_tf.storage import files

PRETRAINED_WEIGHTS = ("pretrainer.weights.h5",)


@dataclasses.dataclass(kw_only=True)
class ExportTfhubOptions:
    """export_tfhub's own flags (the rest are the fields it shares: RECORD)."""

    checkpoint: str = option(None, "A run_pretraining checkpoint (ckpt-N prefix), its output_dir, or an albert_tf "
                                   "pretrained directory (pretrainer.weights.h5, e.g. from albert_tf.convert).")
    export_path: str = option(None, "Output directory (gets encoder/ and preprocess/): a new path or an earlier "
                                    "export of albert_tf's (replaced); anything else is refused.")
    with_mlm: bool = option(True, "Add the .mlm sub-object (masked_lm_positions -> mlm_logits).")


# float32 by default: portable, the exporting machine is not the serving one
RECORD = Command("export_tfhub", (
    (ModelFiles, ("albert_config_file",)), (ExportTfhubOptions, ("checkpoint",)), (ModelFiles, ("spm_model_file",)),
    (ExportTfhubOptions, ("export_path", "with_mlm")), (PretrainingRunOptions, ("export_seq_length",)),
    (LowerCase, None), (TrainingOptions, ("jit_compile",)), (PrecisionOptions, None)),
    defaults={"dtype_policy": "float32"})
REQUIRED = ("albert_config_file", "checkpoint", "spm_model_file", "export_path")


def define_flags(flag_values=None):
    option_flags.define_command(flag_values, RECORD)


def run(f):
    found = check_options(f)  # before TensorFlow starts
    precision = choose(found["dtype_policy"])
    print(f"dtype policy {precision.policy} ({precision.reason})")
    from albert_tf.storage import provenance

    made_by = provenance.record("export_tfhub", option_flags.given_flags(f), dtype_policy=precision.policy)
    return export(found["albert_config_file"], found["checkpoint"], found["spm_model_file"], found["export_path"],
                  with_mlm=found["with_mlm"], seq_length=found["export_seq_length"],
                  do_lower_case=found["do_lower_case"], dtype_policy=precision.policy,
                  jit_compile=found["jit_compile"], made_by=made_by)


def check_options(f):
    """Every check of the command, before anything is loaded: the flags (ValueError naming
    the flag) and the paths (check_paths). Returns {field: value} of RECORD."""
    found = option_flags.values(f, RECORD)
    check_policy(found["dtype_policy"])
    for name in REQUIRED:
        if not found[name]:
            raise ValueError(f"--{name} is required.")
    check_paths(f)
    return found


def check_paths(f):
    """--export_path: new or albert_tf's own export, and apart from the inputs
    (albert_tf.storage.outputs); raises OutputRefused naming the flag. Writes nothing."""
    from albert_tf.storage import outputs

    outputs.check([outputs.Output("--export_path", f.export_path, outputs.EXPORT)],
                  [outputs.Input("--checkpoint", f.checkpoint),
                   outputs.Input("--albert_config_file", f.albert_config_file),
                   outputs.Input("--spm_model_file", f.spm_model_file)])


def export(albert_config_file, checkpoint, spm_model_file, export_path, with_mlm=True, seq_length=128,
           do_lower_case=True, dtype_policy="float32", jit_compile=False, made_by=None):
    """Loads `checkpoint` into an AlbertPretrainer of `albert_config_file` and exports it
    computing in `dtype_policy` (serving through XLA with `jit_compile`; `made_by`, a
    provenance.record, kept in the export's marker); returns the export path."""
    if seq_length < 8:
        raise ValueError(f"--seq_length must be at least 8, got {seq_length}.")
    if files.exists(export_path) and not files.isdir(export_path):
        raise NotADirectoryError(f"--export_path={export_path} exists and is not a directory; choose another path.")
    from albert_tf.export.exporter import export_tfhub
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.storage.checkpoints import load_init_checkpoint

    config = AlbertConfig.from_json_file(albert_config_file)
    if seq_length > config.max_position_embeddings:
        raise ValueError(f"--seq_length {seq_length} exceeds max_position_embeddings {config.max_position_embeddings}.")
    pretrainer = AlbertPretrainer(config, dtype=dtype_policy)
    source = load_init_checkpoint(pretrainer, checkpoint, flag="--checkpoint", weights_file_names=PRETRAINED_WEIGHTS)
    path = export_tfhub(pretrainer, spm_model_file, export_path, with_mlm=with_mlm, seq_length=seq_length,
                        do_lower_case=do_lower_case, dtype_policy=dtype_policy, jit_compile=jit_compile,
                        made_by=made_by)
    print(f"exported {source} to {path}/encoder and {path}/preprocess")
    return path


main, entry = entry_points.command("export_tfhub", define_flags, run)


if __name__ == "__main__":
    entry()
