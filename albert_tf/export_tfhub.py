"""Exports a pretrained albert_tf checkpoint as TF-Hub-style SavedModels.

    python -m albert_tf.export_tfhub --albert_config_file=runs/base/albert_config.json \
        --checkpoint=runs/base --spm_model_file=data/spm.model --export_path=export/base

Writes EXPORT_PATH/encoder (fine-tunes with hub.KerasLayer(trainable=True); loads in
Keras 3 with albert_tf.export.keras3.EncoderTFSMLayer or keras.layers.TFSMLayer) and
EXPORT_PATH/preprocess (strings -> encoder inputs).
"""

from absl import flags

from albert_tf.cli import run_entry_point, start


def define_flags():
    flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
    flags.DEFINE_string("checkpoint", None, "A run_pretraining checkpoint (ckpt-N prefix) or its output_dir.")
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model the data was made with.")
    flags.DEFINE_string("export_path", None, "Output directory (gets encoder/ and preprocess/).")
    flags.DEFINE_bool("with_mlm", True, "Add the .mlm sub-object (masked_lm_positions -> mlm_logits).")
    flags.DEFINE_integer("seq_length", 128, "Default sequence length of the preprocessing model.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case text (as create_pretraining_data).")


def run(f):
    for name in ("albert_config_file", "checkpoint", "spm_model_file", "export_path"):
        if not getattr(f, name):
            raise ValueError(f"--{name} is required.")
    if f.seq_length < 8:
        raise ValueError(f"--seq_length must be at least 8, got {f.seq_length}.")
    from albert_tf.export.exporter import export_tfhub
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.training.checkpoints import load_init_checkpoint

    config = AlbertConfig.from_json_file(f.albert_config_file)
    if f.seq_length > config.max_position_embeddings:
        raise ValueError(f"--seq_length {f.seq_length} exceeds max_position_embeddings {config.max_position_embeddings}.")
    pretrainer = AlbertPretrainer(config)
    prefix = load_init_checkpoint(pretrainer, f.checkpoint)
    path = export_tfhub(pretrainer, f.spm_model_file, f.export_path, with_mlm=f.with_mlm, seq_length=f.seq_length,
                        do_lower_case=f.do_lower_case)
    print(f"exported {prefix} to {path}/encoder and {path}/preprocess")
    return path


def main(argv):
    del argv
    return run_entry_point("export_tfhub", run)


if __name__ == "__main__":
    start(define_flags, main)
