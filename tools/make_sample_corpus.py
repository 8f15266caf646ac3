"""Writes the built-in sample corpus: real English prose from Python docstrings.

    python tools/make_sample_corpus.py --output_file=data/sample_corpus.txt [--size_mb=1.5]

One sentence per line, a blank line between documents (create_pretraining_data's format); the
fixed corpus, --size_mb, --source=installed and --output_format=entries: docs/sample_corpus.md.
The file is written when new, replaced when this tool made it, refused otherwise (exit status 2).
"""

import dataclasses

from albert_tf import entry_points, option_flags
from albert_tf.data import sample_corpus
from albert_tf.data.sample_corpus import write_corpus  # noqa: F401  (tests/conftest.py imports it from here)
from albert_tf.storage import outputs
from albert_tf.storage.options import Command, OutputFile, option


@dataclasses.dataclass(kw_only=True)
class SampleCorpusOptions:
    """make_sample_corpus's own flags (--output_file is the one several commands share)."""

    size_mb: float = option(1.5, "Stop after this many megabytes of text (at least 1; text output only).")
    source: str = option("fixed", "fixed: the corpus committed in the repository (the same on every interpreter); "
                                  "installed: this interpreter's standard library and installed packages.",
                         choices=sample_corpus.SOURCES)
    output_format: str = option("text", "text: one sentence per line (create_pretraining_data's input); entries: "
                                        "JSON lines of docstring entries (the task tools' --corpus_file).",
                                choices=("text", "entries"))


RECORD = Command("make_sample_corpus", ((OutputFile, None), (SampleCorpusOptions, None)),
                 defaults={"output_file": "data/sample_corpus.txt"})


def define_flags(flag_values):
    option_flags.define_command(flag_values, RECORD)


def check_options(f):
    """Every check of the tool, before any work: --size_mb (ValueError) and --output_file
    (albert_tf.storage.outputs)."""
    if f.size_mb < 1:
        raise ValueError(f"--size_mb must be at least 1, got {f.size_mb}.")
    if f.output_format == "text":
        sample_corpus.check_size(f.size_mb, f.source)
    outputs.check([outputs.Output("--output_file", f.output_file, outputs.GENERATED_DATA)])


def run(f):
    check_options(f)  # before any work
    output_file, size_mb, source = f.output_file, f.size_mb, f.source
    with outputs.replacing_file(output_file, outputs.GENERATED_DATA, "--output_file"):
        if f.output_format == "entries":
            entries = (sample_corpus.fixed_source_entries() if source == "installed"
                       else sample_corpus.iter_entries(min_sentences=1))
            count = sample_corpus.write_entries(output_file, entries)
            print(f"wrote {output_file}: {count} entries ({source})")
            return 0
        documents, sentences, written = write_corpus(output_file, size_mb, source)
    print(f"wrote {output_file}: {documents} documents, {sentences} sentences, {written / 1e6:.2f} MB")
    if written < 1_000_000:
        raise ValueError(f"the installed Python files gave {written / 1e6:.2f} MB of prose, less than 1 MB.")
    return 0


main, entry = entry_points.command("make_sample_corpus", define_flags, run)


if __name__ == "__main__":
    entry()
