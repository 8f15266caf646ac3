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

import sys

from absl import flags

from albert_tf import cli
from albert_tf.training.precision import check_policy, choose
from albert_tf.storage import files

PRETRAINED_WEIGHTS = ("pretrainer.weights.h5",)


def define_flags(flag_values=None):
    fv = {"flag_values": flags.FLAGS if flag_values is None else flag_values}
    flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.", **fv)
    flags.DEFINE_string("checkpoint", None, "A run_pretraining checkpoint (ckpt-N prefix), its output_dir, or an "
                        "albert_tf pretrained directory (pretrainer.weights.h5, e.g. from albert_tf.convert).", **fv)
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model the data was made with.", **fv)
    flags.DEFINE_string("export_path", None, "Output directory (gets encoder/ and preprocess/): a new path or an "
                        "earlier export of albert_tf's (replaced); anything else is refused.", **fv)
    flags.DEFINE_bool("with_mlm", True, "Add the .mlm sub-object (masked_lm_positions -> mlm_logits).", **fv)
    flags.DEFINE_integer("seq_length", 128, "Default sequence length of the preprocessing model.", **fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case text (as create_pretraining_data).", **fv)
    flags.DEFINE_bool("jit_compile", False, "Serve through XLA: the encoder's `serve` and `serving_default` run as one "
                      "compiled program, compiled once per new [batch, length] shape in the loading process (faster at "
                      "fixed shapes, e.g. length buckets; the root __call__ that hub.KerasLayer fine-tunes is "
                      "unchanged).", **fv)
    cli.define_dtype_policy_flag(default="float32", what="the exported encoder's matmuls (float32: portable, the "
                                 "default; the exporting machine is not the serving one)", **fv)


def run(f):
    albert_config_file, checkpoint, spm_model_file, export_path = (
        f.albert_config_file, f.checkpoint, f.spm_model_file, f.export_path)
    with_mlm, seq_length, do_lower_case = f.with_mlm, f.seq_length, f.do_lower_case
    check_policy(f.dtype_policy)
    for name, value in (("albert_config_file", albert_config_file), ("checkpoint", checkpoint),
                        ("spm_model_file", spm_model_file), ("export_path", export_path)):
        if not value:
            raise ValueError(f"--{name} is required.")
    check_paths(f)  # before TensorFlow starts
    precision = choose(f.dtype_policy)
    print(f"dtype policy {precision.policy} ({precision.reason})")
    from albert_tf.storage import provenance

    made_by = provenance.record("export_tfhub", cli.given_flags(f), dtype_policy=precision.policy)
    return export(albert_config_file, checkpoint, spm_model_file, export_path, with_mlm=with_mlm,
                  seq_length=seq_length, do_lower_case=do_lower_case, dtype_policy=precision.policy,
                  jit_compile=f.jit_compile, made_by=made_by)


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


def main(argv=None):
    """`export_tfhub ARGV` in this process: returns its exit status
    (albert_tf.cli.main: its own flags, the process's state put back; not undone:
    cli.IRREVERSIBLE).

    Args:
        argv: the arguments, without the program name (default sys.argv[1:]).
    """
    return cli.main("export_tfhub", define_flags, run, argv)


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
