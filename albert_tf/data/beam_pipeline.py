"""create_pretraining_data as an Apache Beam pipeline (`--runner`): the same records, past one machine.

    summary = run_pipeline(["gs://b/text/*.txt" expanded], ["gs://b/data/train.tfrecord-00000-of-00100", ...],
                           "gs://b/spm.model", WriterOptions(...), PipelineSettings("DataflowRunner", 0,
                           ["--project=p", "--region=r", "--temp_location=gs://b/tmp"]))

Input files -> their documents (one file per task) -> each document's keyed records
(`document_records`, as the local writer) -> grouped by shard (`key % shards`) -> each shard
sorted and written to a temporary name beside its output; this process then renames the
shards into place and writes the summary: the local writer's output, byte for byte. A write a
worker cannot make for space is removed and noted, not raised (`space.reported`): the command
ends with `DiskFull`, without the runner's text. Only this module imports apache_beam.
Runners, memory, clusters: docs/pretraining_data.md.
"""

import argparse
import contextlib
import dataclasses
import io
import json
import time
import typing

from albert_tf import extras
from albert_tf.data.document_records import Counts, DocumentRecords
from albert_tf.data.document_pool import pool_rank
from albert_tf.data.documents import BadLines, document_key, file_documents
from albert_tf.data.files import InputError
from albert_tf.data.instances import MaskingStats
from albert_tf.data.shuffle import shard_of
from albert_tf.data.tfrecord_file import frame
from albert_tf.storage import space

RUNNERS = ("DirectRunner", "FlinkRunner", "SparkRunner", "DataflowRunner")
# Beam counters named "QUOTA:PATH" (QUOTA 1 or 0): a write a worker could not make for space (`_note_disk_full`)
DISK_FULL = "albert_tf.disk_full"


@dataclasses.dataclass(frozen=True)
class PipelineSettings:
    """How the pipeline runs.

    Attributes:
        runner: one of RUNNERS.
        num_workers: DirectRunner's worker processes (at least 1); other runners size
            their workers through their own options.
        options: Beam's pipeline options as flags (["--key=value", ...]).
    """

    runner: str
    num_workers: int = 1
    options: tuple = ()


def parse_pipeline_options(text, runner, num_workers):
    """`--beam_pipeline_options` ("key=value,key=value", as `tfds build` takes them) ->
    PipelineSettings, checked against Beam's own options: an unknown key, a value Beam
    rejects, or a `runner` / `direct_num_workers` that contradicts `--runner` /
    `--num_workers` raise InputError naming the flag. Imports apache_beam."""
    if runner not in RUNNERS:
        raise InputError(f"--runner={runner}: not a runner this command knows; use one of {', '.join(RUNNERS)}.")
    PipelineOptions = extras.require("apache_beam.options.pipeline_options", f"--runner={runner}").PipelineOptions
    flags = []
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise InputError(f"--beam_pipeline_options: {item!r} is not key=value (comma-separated pairs, e.g. "
                             "project=my-project,region=us-central1).")
        flags.append(f"--{key.strip().lstrip('-')}={value.strip()}")
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for cls in _option_classes(PipelineOptions):
        cls._add_argparse_args(parser)  # Beam's own options, as PipelineOptions.get_all_options reads them
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            known, unknown = parser.parse_known_args(flags)
    except (argparse.ArgumentError, SystemExit, ValueError) as e:
        raise InputError(f"--beam_pipeline_options: Beam rejects {', '.join(flags)} ({e}).") from None
    if unknown:
        raise InputError(f"--beam_pipeline_options: Beam has no option {', '.join(unknown)}; see `python -m "
                         "apache_beam.examples.wordcount --help` for its options.")
    named = {f.split("=", 1)[0][2:] for f in flags}  # the options given (Beam's have defaults)
    given = getattr(known, "runner", None) if "runner" in named else None
    if given and given != runner:
        raise InputError(f"--beam_pipeline_options: runner={given} contradicts --runner={runner}; give the runner "
                         "once, in --runner.")
    workers = getattr(known, "direct_num_workers", None) if "direct_num_workers" in named else None
    if runner == "DirectRunner":
        if num_workers < 1:
            raise InputError(f"--num_workers={num_workers}: DirectRunner needs at least 1 worker.")
        if workers not in (None, 0, num_workers):
            raise InputError(f"--beam_pipeline_options: direct_num_workers={workers} contradicts "
                             f"--num_workers={num_workers}; give the count once, in --num_workers.")
    elif workers:
        raise InputError(f"--beam_pipeline_options: direct_num_workers is DirectRunner's, not {runner}'s.")
    return PipelineSettings(runner, num_workers, tuple(f for f in flags if not f.startswith("--runner=")))


def _option_classes(base):
    found, todo = [], [base]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _beam_options(settings):
    """(runner, PipelineOptions) for beam.Pipeline."""
    from apache_beam.options.pipeline_options import PipelineOptions

    if settings.runner == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        options = PipelineOptions(list(settings.options), direct_num_workers=settings.num_workers,
                                  direct_running_mode="multi_processing")
        return FnApiRunner(), options
    return settings.runner, PipelineOptions(list(settings.options), runner=settings.runner)


# --- the pipeline's steps (each pickled to the workers) ------------------------------------
def _counts_from_dict(values):
    """`dataclasses.asdict(counts)` read back."""
    return Counts(**dict(values, stats=MaskingStats(**values["stats"])))


def build(pipeline, input_files, temporaries, parts_file, spm_model_file, model_bytes, options):
    """Adds the pipeline's steps to `pipeline` (a beam.Pipeline)."""
    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    num_shards = len(temporaries)

    class ReadFile(beam.DoFn):
        def process(self, element):
            index, path = element
            bad = BadLines(False)  # --strict_utf8: the run fails after the pipeline (run_pipeline)
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                for sentences in file_documents(f, path, bad, index):
                    yield document_key(sentences), tuple(sentences)
            if bad.count:
                yield beam.pvalue.TaggedOutput("bad", bad)

    class MakeRecords(beam.DoFn):
        def setup(self):
            self.maker = None

        def process(self, document, pool_entries=None):
            if self.maker is None:
                self.maker = DocumentRecords(spm_model_file, options, pool_entries, model_bytes)
            key, sentences = document
            counts = self.maker.empty_counts()
            for shuffle_key, record in self.maker.records(key, sentences, counts):
                # the key as 8 big-endian bytes (Beam's int coder is signed): the same order
                yield shard_of(shuffle_key, num_shards), (shuffle_key.to_bytes(8, "big"), record)
            yield beam.pvalue.TaggedOutput("counts", counts)

    class Merge(beam.CombineFn):
        """Merges values with `add(total, value)` (which returns total) into `empty()`."""

        def __init__(self, empty, add, output):
            self.empty, self.add, self.output = empty, add, output

        def create_accumulator(self):
            return self.empty()

        def add_input(self, accumulator, value):
            return self.add(accumulator, value)

        def merge_accumulators(self, accumulators):
            total = self.empty()
            for a in accumulators:
                self.add(total, a)
            return total

        def extract_output(self, accumulator):
            return self.output(accumulator)

    def write_shard(element):
        shard, keyed = element
        keyed = sorted(keyed)
        with (space.reported(temporaries[shard], _note_disk_full),
              FileSystems.create(temporaries[shard], compression_type=CompressionTypes.UNCOMPRESSED) as f):
            for _, record in keyed:
                f.write(frame(record))
        return shard, len(keyed)

    def write_parts(_, counts, bad, shards):
        with (space.reported(parts_file, _note_disk_full),
              FileSystems.create(parts_file, mime_type="application/json",
                                 compression_type=CompressionTypes.UNCOMPRESSED) as f):
            f.write(json.dumps({"counts": counts, "bad_lines": bad, "shards": dict(shards)}).encode("utf-8"))

    read = (pipeline
            | "InputFiles" >> beam.Create(list(enumerate(input_files)))
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadDocuments" >> beam.ParDo(ReadFile()).with_outputs("bad", main="documents"))
    documents = read.documents | "SpreadDocuments" >> beam.Reshuffle()
    side = {}
    if options.draws_random_documents:
        pool = (documents
                | "Rank" >> beam.Map(lambda d: (pool_rank(options.random_seed, d[0]), d[0], d[1]))
                | "Pool" >> beam.combiners.Top.Smallest(options.random_document_pool)
                | "PoolEntries" >> beam.Map(lambda ranked: [(key, sentences) for _, key, sentences in ranked]))
        side["pool_entries"] = beam.pvalue.AsSingleton(pool)
    made = documents | "MakeRecords" >> (beam.ParDo(MakeRecords(), **side)
                                         .with_output_types(typing.Tuple[int, typing.Tuple[bytes, bytes]])
                                         .with_outputs("counts", main="records"))
    shards = (made.records
              | "ByShard" >> beam.GroupByKey()
              | "WriteShards" >> beam.Map(write_shard)
              | "ShardCounts" >> beam.combiners.ToList())
    counts = made.counts | "SumCounts" >> beam.CombineGlobally(Merge(
        lambda: Counts(stats=MaskingStats.empty(options.instance.ngram)), Counts.add, dataclasses.asdict))
    bad = read.bad | "BadLines" >> beam.CombineGlobally(Merge(
        lambda: BadLines(False), BadLines.merge,
        lambda total: {"count": total.count, "examples": [list(e) for e in total.examples]}))
    (pipeline
     | "Once" >> beam.Create([None])
     | "WriteParts" >> beam.Map(write_parts, counts=beam.pvalue.AsSingleton(counts),
                                bad=beam.pvalue.AsSingleton(bad), shards=beam.pvalue.AsSingleton(shards)))


def _note_disk_full(path, quota):
    """In a worker: the write to `path` failed for space (`space.reported`; raised, the runner would
    print its traceback and wrap it in its own text)."""
    from apache_beam.metrics import Metrics

    Metrics.counter(DISK_FULL, f"{int(quota)}:{path}").inc()


def _raise_if_disk_full(result):
    """DiskFull for the first write the workers of the pipeline's `result` noted (`_note_disk_full`)."""
    from apache_beam.metrics.metric import MetricsFilter

    for counter in result.metrics().query(MetricsFilter().with_namespace(DISK_FULL))["counters"]:
        quota, _, path = counter.key.metric.name.partition(":")
        raise space.DiskFull(path, quota == "1")


def run_pipeline(input_files, output_files, spm_model_file, options, settings, progress_stream=None,
                 summary_file=None, made_by=None):
    """Writes the TFRecords and their summary with Beam; returns the summary dict (plus
    "summary_file"), the local writer's (albert_tf.data.writer.write_pretraining_data,
    same arguments but `settings`: `PipelineSettings`) but for "execution"."""
    import apache_beam as beam

    from albert_tf.data import writer
    from albert_tf.data.summary import summary_path_for
    from albert_tf.storage import atomic, files, integrity, outputs
    from albert_tf.storage.json_files import read_json

    options.validate()
    special_tokens = writer.special_tokens_of(spm_model_file, options)
    model_bytes = files.read_bytes(spm_model_file)
    summary_path = summary_file or summary_path_for(output_files[0])
    start = time.time()
    temporaries = [atomic.temporary_name(p) for p in output_files]
    parts_file = atomic.temporary_name(summary_path, "parts")
    if progress_stream is not None:
        print(f"create_pretraining_data: running the Beam pipeline on {settings.runner}"
              + (f" with {settings.num_workers} workers" if settings.runner == "DirectRunner" else ""),
              file=progress_stream, flush=True)
    with writer.marked_outputs([*output_files, summary_path]):
        try:
            for path in output_files:
                files.makedirs(files.dirname(files.abspath(path)))
            runner, beam_options = _beam_options(settings)
            with beam.Pipeline(runner=runner, options=beam_options) as pipeline:
                build(pipeline, input_files, temporaries, parts_file, spm_model_file, model_bytes, options)
            _raise_if_disk_full(pipeline.result)
            parts = read_json(parts_file, "the Beam pipeline's counts", "run the command again")
            totals = _counts_from_dict(parts["counts"])
            bad_lines = BadLines(False)
            bad_lines.count = parts["bad_lines"]["count"]
            bad_lines.examples = [tuple(e) for e in parts["bad_lines"]["examples"]]
            if options.strict_utf8 and bad_lines.count:
                raise InputError(f"{bad_lines.where[0]}: not valid UTF-8 ({bad_lines.count} such lines); fix the "
                                 "file or drop --strict_utf8 to skip such lines.")
            writer.check_instances(totals, input_files)
            per_file = [parts["shards"].get(str(i), 0) for i in range(len(output_files))]
            integrity.forget_sizes(output_files, outputs.PRETRAINING_DATA)
            for temporary, path, count in zip(temporaries, output_files, per_file):
                if count:
                    files.rename(temporary, path)
                else:
                    atomic.write_bytes(path, b"")
        finally:
            for path in [*temporaries, parts_file]:
                files.remove(path)
        summary = writer.make_summary(totals, per_file, output_files, input_files, bad_lines, time.time() - start,
                                      options, spm_model_file, special_tokens, made_by,
                                      runner=settings.runner)
        summary["execution"]["beam_pipeline_options"] = list(settings.options)
        atomic.write_json(summary_path, summary)
    return dict(summary, summary_file=summary_path)
