"""Writes configs/<preset>.json for every AlbertConfig preset.

    python tools/write_preset_configs.py [--output_dir=configs]
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from absl import app, flags  # noqa: E402

from albert_tf.modeling.config import PRESETS, AlbertConfig  # noqa: E402


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_string("output_dir", "configs", "Where to write the preset JSON files.")



def main(argv):
    del argv
    os.makedirs(flags.FLAGS.output_dir, exist_ok=True)
    for name in sorted(PRESETS):
        path = os.path.join(flags.FLAGS.output_dir, f"{name}.json")
        AlbertConfig.from_preset(name).to_json_file(path)
        print(f"wrote {path}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
