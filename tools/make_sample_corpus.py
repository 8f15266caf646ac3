"""Writes the built-in sample corpus: real English prose from installed Python docstrings.

    python tools/make_sample_corpus.py --output_file=data/sample_corpus.txt [--size_mb=1.5]

One sentence per line, a blank line between documents (one document per docstring), the
format of create_pretraining_data; byte-identical for a given Python and
requirements.txt (`albert_tf.data.sample_corpus`). The file is written when new, replaced
when this tool made it (its marker), and refused otherwise (exit status 2) before any
work (albert_tf.storage.outputs).
"""

import sys

from absl import flags

from albert_tf import cli
from albert_tf.data.sample_corpus import write_corpus  # noqa: F401  (tests/conftest.py imports it from here)
from albert_tf.storage import outputs


def define_flags(flag_values):
    flags.DEFINE_string("output_file", "data/sample_corpus.txt", "Where to write the corpus.", flag_values=flag_values)
    flags.DEFINE_float("size_mb", 1.5, "Stop after this many megabytes of text (at least 1).", flag_values=flag_values)


def run(f):
    output_file, size_mb = f.output_file, f.size_mb
    if size_mb < 1:
        raise ValueError(f"--size_mb must be at least 1, got {size_mb}.")
    outputs.check([outputs.Output("--output_file", output_file, outputs.GENERATED_DATA)])  # before any work
    with outputs.replacing_file(output_file, outputs.GENERATED_DATA, "--output_file"):
        documents, sentences, written = write_corpus(output_file, size_mb)
    print(f"wrote {output_file}: {documents} documents, {sentences} sentences, {written / 1e6:.2f} MB")
    if written < 1_000_000:
        raise ValueError(f"the installed Python files gave {written / 1e6:.2f} MB of prose, less than 1 MB.")
    return 0


def main(argv=None):
    """`make_sample_corpus ARGV` in this process: returns its exit status
    (albert_tf.cli.main: its own flags, the process's state put back; not undone:
    cli.IRREVERSIBLE).

    Args:
        argv: the arguments, without the program name (default sys.argv[1:]).
    """
    return cli.main("make_sample_corpus", define_flags, run, argv)


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
