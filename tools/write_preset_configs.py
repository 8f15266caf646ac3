"""Writes configs/<preset>.json for every AlbertConfig preset.

    python tools/write_preset_configs.py [--output_dir=configs]
"""

import os

from absl import flags

from albert_tf import cli


def define_flags():
    flags.DEFINE_string("output_dir", "configs", "Where to write the preset JSON files.")


def write_presets(output_dir):
    """Writes OUTPUT_DIR/<preset>.json (atomically, AlbertConfig.to_json_file); returns the paths."""
    from albert_tf.modeling.config import PRESETS, AlbertConfig

    paths = []
    for name in sorted(PRESETS):
        path = os.path.join(output_dir, f"{name}.json")
        AlbertConfig.from_preset(name).to_json_file(path)
        paths.append(path)
    return paths


def run(f):
    for path in write_presets(f.output_dir):
        print(f"wrote {path}")
    return 0


def entry():
    cli.main("write_preset_configs", define_flags, run)


if __name__ == "__main__":
    entry()
