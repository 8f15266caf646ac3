"""Converts ALBERT weights between the original TF1 release, Hugging Face, keras-hub and albert_tf.

    python -m albert_tf.convert --from=tf1 --to=albert_tf --input=albert_base/model.ckpt-best \
        --albert_config_file=albert_base/albert_config.json --output=converted/albert_base
    python -m albert_tf.convert --from=hf --to=albert_tf --input=hf/albert-base-v2 --output=converted/base
    python -m albert_tf.convert --from=keras_hub --to=albert_tf --input=keras_hub_preset_dir --output=...
    python -m albert_tf.convert --from=albert_tf --to=tf1 --input=runs/base --output=release_format/

Nothing is written unless every target variable is assigned exactly once with its shape;
otherwise the full list of missing, unexpected and misshaped variables is printed (exit 2).
The tool then prints pooled_output of a fixed id sequence for comparison with the source.
"""

import os
import sys

from absl import app, flags


def define_flags():
    flags.DEFINE_enum("from", None, ["tf1", "hf", "keras_hub", "albert_tf"], "Source format.")
    flags.DEFINE_enum("to", "albert_tf", ["albert_tf", "tf1"], "Target format.")
    flags.DEFINE_string("input", None, "Source checkpoint, model directory or weights file.")
    flags.DEFINE_string("output", None, "Output directory.")
    flags.DEFINE_string("albert_config_file", None, "albert_config.json (needed where the source carries no config).")


def main(argv):
    del argv
    f = flags.FLAGS
    source = f["from"].value
    try:
        if not source or not f.input or not f.output:
            raise ValueError("--from, --input and --output are required.")
        from albert_tf.convert.api import FIXED_IDS, convert, fixed_output
        from albert_tf.modeling.config import AlbertConfig

        config = AlbertConfig.from_json_file(f.albert_config_file) if f.albert_config_file else None
        model, output = convert(source, f.to, f.input, f.output, config)
    except ValueError as e:  # ConversionError is a ValueError
        print(f"convert: error: {e}", file=sys.stderr)
        return 2
    kind = type(model).__name__
    values = ", ".join(f"{v:+.6f}" for v in fixed_output(model)[:5])
    print(f"converted {f.input} ({source}) -> {output} ({f.to}) as {kind}, {model.count_params():,} parameters")
    print(f"pooled_output[:5] for ids {list(FIXED_IDS)}: [{values}]")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    define_flags()
    app.run(main)
