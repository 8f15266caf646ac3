"""Creates ALBERT pretraining TFRecords (masked LM + sentence order) from plain text.

    albert-create-pretraining-data --input_file=corpus.txt \
        --output_file=out/train.tfrecord --spm_model_file=spm.model \
        --max_seq_length=128 --dupe_factor=5 --num_workers=2
    (or python -m albert_tf.create_pretraining_data, or python tools/create_pretraining_data.py)

Flags keep the original release's names and defaults; added: --num_workers,
--num_output_shards, --shuffle_buffer_size, --documents_per_chunk, --random_document_pool,
--strict_utf8, --legacy_single_chunk_random_next, --temp_dir, and --runner with
--beam_pipeline_options (an Apache Beam pipeline, albert_tf.data.beam_pipeline: the same
records; without --runner Beam is not imported). NSP negatives (--random_next_sentence)
come from a random document of the whole input, as in the release
(`albert_tf.data.document_pool`). Output: the release's eight features, with the ids of
the SentencePiece model, and summary_OUTPUT.json beside them (special token ids and
masking settings included: `albert_tf.data.summary.read_data_summary`; "made_by": this
command, its flags as given, albert_tf's version and source state, TensorFlow/Keras and the
device, albert_tf.storage.provenance). Exit status 2 on
bad input, with nothing written; also for an output file that exists and is not
albert_tf's own pretraining data (an earlier run's files are replaced, a user's never).
"""

import dataclasses
import sys

from albert_tf import entry_points, option_flags
from albert_tf.storage.options import Command, LowerCase, ModelFiles, OutputFile, option
from albert_tf.tasks.options import PretrainingOptions, PretrainingRunOptions, ReleaseTpuFlags, RunOptions


@dataclasses.dataclass(kw_only=True)
class CreatePretrainingDataOptions:
    """create_pretraining_data's own flags (the rest are the fields it shares: RECORD). The
    command builds albert_tf.data.writer.WriterOptions and its InstanceOptions from them by
    field name (option_flags.build)."""

    # --- the original release's flags (names and defaults) ---
    input_file_mode: str = option("r", "The release's file mode flag; input is always read as bytes and decoded as "
                                       "UTF-8.")
    do_whole_word_mask: bool = option(True, "Whether to use whole word masking rather than per-piece masking.")
    do_permutation: bool = option(False, "Whether to do the permutation training (not used by the released models; "
                                         "refused).")
    favor_shorter_ngram: bool = option(True, "Whether to set higher probabilities for sampling shorter ngrams.")
    random_next_sentence: bool = option(False, "Whether to use the sentence that's right before the current sentence "
                                               "as the negative sample for next sentence prediction, rather than "
                                               "using sentences from other random documents (True: BERT's NSP "
                                               "pairs).")
    ngram: int = option(3, "Maximum number of ngrams to mask.")
    dupe_factor: int = option(40, "Number of times to duplicate the input data (with different masks).")
    masked_lm_prob: float = option(0.15, "Masked LM probability.")
    short_seq_prob: float = option(0.1, "Probability of creating sequences which are shorter than the maximum "
                                        "length.")
    # --- added ---
    num_workers: int = option(1, "Processes creating instances; the output does not depend on it.")
    num_output_shards: int = option(1, "Split a single --output_file into NAME-0000i-of-0000N shards.")
    documents_per_chunk: int = option(500, "Documents per unit of work.")
    random_document_pool: int = option(50_000, "With NSP negatives (--random_next_sentence or "
                                               "--legacy_single_chunk_random_next): the most documents held to draw "
                                               "the random document from, read in a first pass: every input "
                                               "document, or a uniform sample of this many of a larger input "
                                               "(memory: this many documents' text per worker).")
    temp_dir: str = option("", "A local directory for the shuffle's spill files, used when the instances exceed "
                               "--shuffle_buffer_size (a new directory inside, removed after; about the output's "
                               "size). Default: the system's temporary directory ($TMPDIR).")
    runner: str = option("", "Run as an Apache Beam pipeline on this runner: DirectRunner (this machine, "
                             "--num_workers processes), FlinkRunner, SparkRunner or DataflowRunner "
                             "(docs/pretraining_data.md). Default: the local writer. The output is the same.")
    beam_pipeline_options: str = option("", "With --runner: Beam's pipeline options as comma-separated key=value "
                                            "pairs, e.g. project=p,region=us-central1,temp_location=gs://b/tmp,"
                                            "setup_file=./setup.py.")
    strict_utf8: bool = option(False, "Stop at the first non-UTF-8 line instead of skipping and counting it.")
    legacy_single_chunk_random_next: bool = option(False, "Reproduce the release: a chunk of one segment gets B from "
                                                          "a random other document, labelled 1 (an NSP negative "
                                                          "inside SOP data).")


# the command's one options record: the release's flags first, then albert_tf's
RECORD = Command("create_pretraining_data", (
    (PretrainingRunOptions, ("input_file",)), (OutputFile, None), (ReleaseTpuFlags, ("vocab_file",)),
    (ModelFiles, ("spm_model_file",)), (LowerCase, None), (RunOptions, ("max_seq_length", "random_seed")),
    (PretrainingOptions, ("max_predictions_per_seq",)), (CreatePretrainingDataOptions, None),
    (PretrainingOptions, ("shuffle_buffer_size",))), defaults={"shuffle_buffer_size": 100_000})


def define_flags(flag_values=None):
    """Defines this tool's flags (only when run, so the module can be imported), in
    `flag_values` (default: the global FLAGS), from its options record (RECORD)."""
    option_flags.define_command(flag_values, RECORD)


def run(f):
    """Checks the flags, writes the data, prints where it went; returns the summary dict."""
    from albert_tf.data.writer import write_pretraining_data

    options, pipeline, (inputs, outputs, summary_file) = check_options(f)
    from albert_tf.storage import provenance

    made_by = provenance.record("create_pretraining_data", option_flags.given_flags(f))
    if pipeline is None:
        summary = write_pretraining_data(inputs, outputs, f.spm_model_file, options, progress_stream=sys.stderr,
                                         summary_file=summary_file, made_by=made_by)
    else:
        from albert_tf.data.beam_pipeline import run_pipeline

        summary = run_pipeline(inputs, outputs, f.spm_model_file, options, pipeline, progress_stream=sys.stderr,
                               summary_file=summary_file, made_by=made_by)
    report(summary)
    return 0


def check_options(f):
    """Every check of the command, before any work: the flags (positive ones, required ones,
    the values' ranges, the Beam runner and its options: InputError or ValueError naming
    the flag) and the paths (check_paths). Returns (WriterOptions, PipelineSettings or None
    (the local writer), (input files, output files, summary file))."""
    from albert_tf.data.files import InputError
    from albert_tf.data.instances import InstanceOptions
    from albert_tf.data.writer import WriterOptions

    found = option_flags.values(f, RECORD)
    if not f.input_file or not f.output_file:
        raise InputError("--input_file and --output_file are required.")
    if not f.spm_model_file:
        if f.vocab_file:
            raise InputError("--vocab_file alone (a WordPiece vocabulary) is not supported: ALBERT uses "
                             "SentencePiece; pass --spm_model_file (tools/train_sentencepiece.py makes one).")
        raise InputError("--spm_model_file is required (tools/train_sentencepiece.py makes one).")
    if f.do_permutation:
        raise InputError("--do_permutation is not supported: the released ALBERT models were trained "
                         "without it; leave it False.")
    options = option_flags.build(WriterOptions, found, instance=option_flags.build(InstanceOptions, found))
    options.validate()
    pipeline = None
    if f.runner:
        from albert_tf.data.beam_pipeline import parse_pipeline_options

        pipeline = parse_pipeline_options(f.beam_pipeline_options, f.runner, f.num_workers)
    elif f.beam_pipeline_options:
        raise InputError("--beam_pipeline_options needs --runner (e.g. --runner=DataflowRunner); without it the "
                         "local writer runs.")
    return options, pipeline, check_paths(f)


def check_paths(f):
    """Every output file (and the summary beside the first) is new or albert_tf's own
    pretraining data, and none is an input (albert_tf.storage.outputs); raises
    OutputRefused naming --output_file; takes their locks (the shards of one
    --num_output_shards name share the summary's). Returns (input files, output files,
    summary file)."""
    from albert_tf.data.files import expand_input_files
    from albert_tf.data.summary import summary_path_for
    from albert_tf.data.writer import output_paths
    from albert_tf.storage import outputs

    inputs = expand_input_files(f.input_file)
    files = output_paths(f.output_file, f.num_output_shards)
    summary_file = summary_path_for(f.output_file.split(",")[0].strip())
    outputs.check([*(outputs.Output("--output_file", p, outputs.PRETRAINING_DATA, held=f.num_output_shards == 1)
                     for p in files), outputs.Output("--output_file", summary_file, outputs.PRETRAINING_DATA)],
                  [*(outputs.Input("--input_file", p) for p in inputs),
                   outputs.Input("--spm_model_file", f.spm_model_file), outputs.Input("--vocab_file", f.vocab_file)])
    return inputs, files, summary_file


def report(summary, stream=None, errors=None):
    """Prints what was written (to stdout), and the skipped non-UTF-8 lines (to stderr)."""
    stream, errors = stream or sys.stdout, errors or sys.stderr
    print(f"wrote {summary['instances']:,} instances to {', '.join(summary['output_files'])} in "
          f"{summary['seconds']:.1f}s ({summary['instances_per_second']:,.0f}/s); "
          f"summary: {summary['summary_file']}", file=stream)
    if summary["non_utf8_lines_skipped"]:
        print(f"skipped {summary['non_utf8_lines_skipped']} non-UTF-8 lines, e.g. "
              f"{', '.join(summary['non_utf8_line_examples'][:5])}", file=errors)


main, entry = entry_points.command("create_pretraining_data", define_flags, run)


if __name__ == "__main__":
    entry()
