"""Writes configs/<preset>.json for every AlbertConfig preset.

    python tools/write_preset_configs.py [--output_dir=configs]

Each file is written when new, replaced when this tool made it (its marker
`.<preset>.json.albert_tf_output.json`, committed beside the shipped configs), and refused
otherwise (exit status 2) before anything is written (albert_tf.storage.outputs).
"""

import os

from albert_tf.storage.options import Command, RunDirectory

from albert_tf import entry_points, option_flags
RECORD = Command("write_preset_configs", ((RunDirectory, None),), defaults={"output_dir": "configs"})


def define_flags(flag_values):
    """--output_dir: where to write the preset JSON files."""
    option_flags.define_command(flag_values, RECORD)


def write_presets(output_dir, flag="--output_dir"):
    """Writes OUTPUT_DIR/<preset>.json (atomically, AlbertConfig.to_json_file) under the
    output rule (outputs.OutputRefused, before any is written, for a file this tool did not
    make); returns the paths."""
    from albert_tf.modeling.config import PRESETS, AlbertConfig
    from albert_tf.storage import outputs

    paths = [os.path.join(output_dir, f"{name}.json") for name in sorted(PRESETS)]
    outputs.check([outputs.Output(flag, path, outputs.CONFIG) for path in paths])
    for name, path in zip(sorted(PRESETS), paths):
        with outputs.replacing_file(path, outputs.CONFIG, flag):
            AlbertConfig.from_preset(name).to_json_file(path)
    return paths


def run(f):
    for path in write_presets(f.output_dir):
        print(f"wrote {path}")
    return 0


main, entry = entry_points.command("write_preset_configs", define_flags, run)


if __name__ == "__main__":
    entry()
