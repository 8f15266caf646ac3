"""create_pretraining_data on one machine: text files -> globally shuffled, sharded TFRecords.

    options = WriterOptions(instance=InstanceOptions(max_seq_length=128), dupe_factor=5)
    summary = write_pretraining_data(["corpus.txt"], ["out/train.tfrecord"], "spm.model", options)

Documents are read as a stream, cut into chunks, turned into keyed records
(`document_records`, as the Beam pipeline does) in this process or in worker processes, sorted
by their shuffle keys in bounded memory (`shuffle.KeySort`) and written to the shards: the same
bytes for any `num_workers` and chunk size, and the Beam pipeline's. Outputs appear only when
everything succeeded. docs/pretraining_data.md.
"""

import contextlib
import dataclasses
import itertools
import multiprocessing
import os
import queue
import re
import secrets
import sys
import tempfile
import time
import traceback

from albert_tf.data import document_pool
from albert_tf.data.document_pool import sample_documents
from albert_tf.data.document_records import Counts, DocumentRecords
from albert_tf.data.documents import BadLines, document_key, read_documents
from albert_tf.data.files import InputError
from albert_tf.data.instances import InstanceOptions, MaskingStats
from albert_tf.data.shuffle import KeySort, write_shards
from albert_tf.data.summary import describe_data, summary_path_for
from albert_tf.data.tokenization import SentencePieceTokenizer
from albert_tf.storage import atomic, integrity, outputs, provenance
from albert_tf.storage import files as file_layer

STDERR = object()  # a default stream: sys.stderr as it is when the progress starts, not at import
# how the work is run: none of these changes a record (the summary's "execution", not its "settings")
EXECUTION = ("num_workers", "shuffle_buffer_size", "documents_per_chunk", "temp_dir")


@dataclasses.dataclass(frozen=True)
class WriterOptions:
    """Settings of create_pretraining_data besides the file names: `instance` (InstanceOptions),
    the rest as the command's flags of the same names (num_workers 0 or 1: in this process).
    None of `EXECUTION` changes the output."""

    instance: InstanceOptions = dataclasses.field(default_factory=InstanceOptions)
    do_lower_case: bool = True
    dupe_factor: int = 40
    random_seed: int = 12345
    num_workers: int = 1
    shuffle_buffer_size: int = 100_000
    documents_per_chunk: int = 500
    strict_utf8: bool = False
    random_document_pool: int = 50_000
    temp_dir: str = ""

    @property
    def draws_random_documents(self):
        """Whether instances take B from random documents (NSP negatives)."""
        return self.instance.random_next_sentence or self.instance.legacy_single_chunk_random_next

    def validate(self):
        """InputError naming the flag for a value out of range."""
        try:
            self.instance.validate()
        except ValueError as e:
            raise InputError(str(e)) from None
        if self.dupe_factor < 1:
            raise InputError(f"--dupe_factor must be at least 1, got {self.dupe_factor}.")
        if self.shuffle_buffer_size < 1 or self.documents_per_chunk < 1:
            raise InputError("--shuffle_buffer_size and --documents_per_chunk must be positive.")
        if self.random_document_pool < 2:
            raise InputError(f"--random_document_pool must be at least 2, got {self.random_document_pool} (0, "
                             "the work chunk's documents, is gone since 0.3: negatives come from a sample of the "
                             "whole input).")
        if self.temp_dir and (file_layer.is_url(self.temp_dir) or not file_layer.isdir(self.temp_dir)):
            raise InputError(f"--temp_dir={self.temp_dir}: not a local directory; give an existing local "
                             "directory (or none: the system's temporary directory).")

    def settings(self):
        """Flat dict of every setting that shapes the records, for the summary."""
        flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "instance" and f.name not in EXECUTION}
        flat.update(dataclasses.asdict(self.instance))
        return flat

    def execution(self):
        """The settings of how the work ran (none changes a record)."""
        return {name: getattr(self, name) for name in EXECUTION}


# --- work --------------------------------------------------------------------------------
def document_chunks(documents, size):
    """Groups a stream of documents into lists of `size` (the last may be shorter)."""
    documents = iter(documents)
    return iter(lambda: list(itertools.islice(documents, size)), [])


def _worker_process(spm_model_file, options, pool_entries, tasks, results):
    """Body of a worker process: one DocumentRecords answers (index, texts) tasks until None."""
    index = None
    try:
        worker = DocumentRecords(spm_model_file, options, pool_entries)
        for index, texts in iter(tasks.get, None):
            results.put((index, worker.chunk_records(texts), None))
    except BaseException:  # noqa: BLE001 - reported to the main process, which raises
        results.put((index, None, traceback.format_exc()))


def _records_in_workers(chunks, spm_model_file, options, pool_entries):
    """`chunk_records` with `options.num_workers` spawned processes (results as they come)."""
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    processes = [context.Process(target=_worker_process,
                                 args=(spm_model_file, options, pool_entries, tasks, results),
                                 daemon=True) for _ in range(options.num_workers)]
    for p in processes:
        p.start()
    in_flight, finished = 0, False

    def next_result():
        while True:
            try:
                index, payload, error = results.get(timeout=1.0)
            except queue.Empty:
                dead = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"a create_pretraining_data worker process died (exit code {dead[0]}); "
                                       "out of memory? Lower --num_workers or --documents_per_chunk.") from None
                continue
            if error is not None:
                raise RuntimeError(f"create_pretraining_data worker failed on chunk {index}:\n{error}")
            return payload

    try:
        for index, texts in enumerate(chunks):
            tasks.put((index, texts))
            in_flight += 1
            while in_flight >= 2 * options.num_workers:
                yield next_result()
                in_flight -= 1
        while in_flight:
            yield next_result()
            in_flight -= 1
        finished = True
    finally:
        if finished:
            for _ in processes:
                tasks.put(None)
            for p in processes:
                p.join(timeout=10)
        for p in processes:
            if p.is_alive():
                p.terminate()
                p.join()
        tasks.cancel_join_thread()


def chunk_records(chunks, spm_model_file, options, pool_entries=None):
    """Yields (keyed records, Counts) per chunk of documents: in this process (num_workers
    0 or 1) or in `options.num_workers` processes (at most 2 chunks each in flight; they
    never import TensorFlow), in no set order. `pool_entries`: as `DocumentRecords`'."""
    if options.num_workers <= 1:
        worker = DocumentRecords(spm_model_file, options, pool_entries)
        for texts in chunks:
            yield worker.chunk_records(texts)
    else:
        yield from _records_in_workers(chunks, spm_model_file, options, pool_entries)


def read_pool(input_files, options):
    """The first pass for NSP negatives: the pool's entries (document_pool.sample_documents), or None."""
    if not options.draws_random_documents:
        return None
    documents = read_documents(input_files, BadLines(options.strict_utf8))
    keyed = ((document_key(sentences), sentences) for sentences in documents)
    return sample_documents(keyed, options.random_document_pool, options.random_seed)[0]


# --- output ------------------------------------------------------------------------------
class Progress:
    """Prints documents, instances, rate and ETA every `every` seconds."""

    def __init__(self, total_bytes, stream=STDERR, every=5.0):
        self.total_bytes = max(total_bytes, 1)
        self.bytes_read = 0
        self.stream = sys.stderr if stream is STDERR else stream
        self.every = every
        self.start = self.last = time.time()

    def maybe_print(self, documents, instances, force=False):
        now = time.time()
        if self.stream is None or (not force and now - self.last < self.every):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        done = min(self.bytes_read / self.total_bytes, 1.0)
        eta = elapsed * (1 - done) / done if done > 0 else float("nan")
        print(f"create_pretraining_data: {documents:,} documents, {instances:,} instances "
              f"({instances / elapsed:,.0f}/s), {100 * done:.0f}% read, ETA {eta:,.0f}s",
              file=self.stream, flush=True)

    def writing(self, instances, spilled):
        if self.stream is not None:
            how = "from the shuffle's spill files" if spilled else "from memory"
            print(f"create_pretraining_data: writing {instances:,} instances in shuffled order ({how})",
                  file=self.stream, flush=True)


def output_paths(output_file, num_output_shards=1):
    """Comma list of outputs, or one output split into NAME-00000-of-0000N shards: names
    only, no file is looked at."""
    outputs = [p.strip() for p in output_file.split(",") if p.strip()]
    if not outputs:
        raise InputError("--output_file is empty.")
    if num_output_shards < 1:
        raise InputError(f"--num_output_shards must be at least 1, got {num_output_shards}.")
    if num_output_shards > 1:
        if len(outputs) != 1:
            raise InputError("--num_output_shards needs a single --output_file name.")
        outputs = [f"{outputs[0]}-{i:05d}-of-{num_output_shards:05d}" for i in range(num_output_shards)]
    return outputs


_SPILL = re.compile(r"^albert_tf_shuffle-(\d+)-[0-9a-f]{8}$")


def spill_directory(options):
    """A new directory name for the shuffle's spill files (made only when it spills). The spill
    directories that killed runs left there (their process is gone) are removed first."""
    parent = options.temp_dir or tempfile.gettempdir()
    for name in file_layer.listdir(parent) if file_layer.isdir(parent) else ():
        m = _SPILL.match(name)
        if m and not atomic.alive(int(m.group(1))):
            with contextlib.suppress(OSError):  # e.g. another user's
                atomic.remove_own(file_layer.join(parent, name))
    return file_layer.join(parent, f"albert_tf_shuffle-{os.getpid()}-{secrets.token_hex(4)}")


@contextlib.contextmanager
def marked_outputs(paths):
    """Around writing `paths` (the summary last): only new paths or albert_tf's own pretraining
    data are written (albert_tf.storage.outputs, naming --output_file), the summary's lock held
    for all of them (the command holds each named file's since its check); both paths write
    through it. Each TFRecord file's size goes into its marker once all are written."""
    with contextlib.ExitStack() as marked:
        for path in paths:
            marked.enter_context(outputs.replacing_file(path, outputs.PRETRAINING_DATA, "--output_file",
                                                        held=path == paths[-1]))
        with integrity.sizes_recorded(paths[:-1], outputs.PRETRAINING_DATA):
            yield


def special_tokens_of(spm_model_file, options):
    """The model's SpecialTokens, checked before any work (InputError naming the model)."""
    try:
        return SentencePieceTokenizer(spm_model_file, options.do_lower_case).special_tokens
    except ValueError as e:  # fail fast, clearly
        raise InputError(str(e)) from None


def check_instances(totals, input_files):
    """InputError when the input gave no instance."""
    if totals.instances == 0:
        raise InputError(f"--input_file: {', '.join(input_files)} gave no instances (no document with at least "
                         "two tokens of valid text).")


def write_pretraining_data(input_files, output_files, spm_model_file, options, progress_stream=STDERR,
                           summary_file=None, made_by=None):
    """Writes the TFRecords and their summary; returns the summary dict (plus
    "summary_file", where it was written).

    Args:
        input_files: list of text files (one sentence per line, blank line between documents).
        output_files: list of TFRecord paths; the record of shuffle key k goes to
            output_files[k % len(output_files)], in key order.
        spm_model_file, options (`WriterOptions`): as the command's.
        progress_stream: where progress lines go (default: sys.stderr; None: silent).
        summary_file: where the JSON summary goes (default `summary_path_for(output_files[0])`).
        made_by: a provenance.record, the summary's "made_by" (None leaves it out).

    Raises:
        InputError: bad input or settings; no output is left on disk.
        OutputRefused: an output (or the summary) exists and is not albert_tf's own
            pretraining data (albert_tf.storage.outputs); nothing is written.
    """
    options.validate()
    special_tokens = special_tokens_of(spm_model_file, options)
    start = time.time()
    pool_entries = read_pool(input_files, options)
    progress = Progress(sum(file_layer.getsize(f) for f in input_files), progress_stream)
    bad_lines = BadLines(options.strict_utf8)
    totals = Counts(stats=MaskingStats.empty(options.instance.ngram))
    chunks = document_chunks(read_documents(input_files, bad_lines, progress), options.documents_per_chunk)
    summary_path = summary_file or summary_path_for(output_files[0])
    with marked_outputs([*output_files, summary_path]):
        with contextlib.ExitStack() as stack:
            temporaries = [stack.enter_context(atomic.output_path(p)) for p in output_files]
            sort = KeySort(options.shuffle_buffer_size, spill_directory(options))
            stack.callback(sort.close)
            for keyed, counts in chunk_records(chunks, spm_model_file, options, pool_entries):
                totals.add(counts)
                for key, record in keyed:
                    sort.add(key, record)
                progress.maybe_print(totals.documents, totals.instances)
            check_instances(totals, input_files)
            progress.maybe_print(totals.documents, totals.instances, force=True)
            progress.writing(totals.instances, sort.spilled)
            with contextlib.ExitStack() as handles:
                shards = [handles.enter_context(file_layer.open(t, "wb")) for t in temporaries]
                per_file = write_shards(sort.items(), shards)
            integrity.forget_sizes(output_files, outputs.PRETRAINING_DATA)  # the shards take their names next
        elapsed = time.time() - start
        summary = make_summary(totals, per_file, output_files, input_files, bad_lines, elapsed, options,
                               spm_model_file, special_tokens, made_by)
        atomic.write_json(summary_path, summary)
    return dict(summary, summary_file=summary_path)


def make_summary(totals, per_file, output_files, input_files, bad_lines, elapsed, options, spm_model_file,
                 special_tokens, made_by, runner=None):
    """The summary dict of a run (either path): counts, settings, ids, provenance."""
    summary = summarize(totals, per_file, output_files, input_files, bad_lines, elapsed,
                        dict(options.settings(), spm_model_file=spm_model_file))
    summary["execution"] = dict(options.execution(), runner=runner)
    summary.update(describe_data(special_tokens, options.instance, spm_model_file))
    if options.draws_random_documents:
        kept = min(options.random_document_pool, totals.documents)
        summary["random_next_documents_from"] = document_pool.describe(kept, totals.documents)
    if made_by is not None:
        summary["made_by"] = provenance.stamp(made_by)
    return summary


def _share(part, whole):
    return part / whole if whole else 0.0


def summarize(totals, per_file, output_files, input_files, bad_lines, elapsed, settings):
    """The summary's counts and shares (`describe_data` adds the ids and masking settings)."""
    n, stats = totals.instances, totals.stats
    drawn = sum(stats.ngram_drawn)
    applied = sum(stats.ngram_applied)
    return {
        "instances": n,
        "documents": totals.documents,
        "tokens": totals.tokens,
        "masked_lm_predictions": stats.masked,
        "masked_share": _share(stats.masked, totals.tokens),
        "mean_predictions_per_instance": _share(stats.masked, n),
        "expected_predictions_per_instance": _share(totals.expected_predictions, n),
        "sentence_order_label_1_share": _share(totals.label_1, n),
        "replacement_shares": {
            "mask": _share(stats.replaced_by_mask, stats.masked),
            "kept": _share(stats.kept, stats.masked),
            "random": _share(stats.replaced_random, stats.masked),
        },
        "ngram_drawn_shares": {str(k): _share(v, drawn) for k, v in enumerate(stats.ngram_drawn) if k},
        "ngram_applied_shares": {str(k): _share(v, applied) for k, v in enumerate(stats.ngram_applied) if k},
        "non_utf8_lines_skipped": bad_lines.count,
        "non_utf8_line_examples": bad_lines.where,
        "seconds": round(elapsed, 3),
        "instances_per_second": round(_share(n, elapsed), 1),
        "input_files": input_files,
        "output_files": {p: c for p, c in zip(output_files, per_file)},
        "settings": settings,
    }
