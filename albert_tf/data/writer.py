"""Streaming create_pretraining_data: text files -> shuffled, sharded TFRecords.

    options = WriterOptions(instance=InstanceOptions(max_seq_length=128), dupe_factor=5)
    summary = write_pretraining_data(["corpus.txt"], ["out/train.tfrecord"], "spm.model", options)

Memory stays bounded whatever the corpus size: documents are read as a stream
(`read_documents`), cut into work chunks of `documents_per_chunk` documents
(`document_chunks`), turned into serialized instances (`ChunkWorker`, in this process or
in worker processes with at most 2 chunks per worker in flight: `chunk_records`), and
written through a bounded shuffle buffer to the output shards round-robin
(`ShuffledShards`).

Determinism: chunk c draws from `random.Random(f"{random_seed}:{c}")` only, and the main
process consumes chunks in order and shuffles with its own seeded RNG, so the same
inputs and options give byte-identical files for any `num_workers`.

NSP negatives (only with random_next_sentence or the legacy single-chunk mode) take B from
a random document of the whole input, as the release does: a first pass draws a seeded
uniform sample of at most `random_document_pool` documents (all of them for a smaller
input), which every worker draws from (`albert_tf.data.document_pool`); 0 draws from the
work chunk instead (the behaviour before; on an input in source order a chunk's documents
are mostly of one package, so its negatives read like the true next segment).

Ids (pad, [CLS], [SEP], [MASK], the ordinary range) come from the SentencePiece model
(`SpecialTokens`). Outputs appear only when everything succeeded
(`albert_tf.storage.atomic`); the JSON summary goes beside them as
`summary_<name>.json` (`albert_tf.data.summary`).
"""

import contextlib
import dataclasses
import multiprocessing
import queue
import random
import sys
import time
import traceback

from albert_tf.data import document_pool
from albert_tf.data.document_pool import InputDocuments, sample_documents
from albert_tf.data.example_codec import ExampleEncoder
from albert_tf.data.files import InputError
from albert_tf.data.instances import InstanceMaker, InstanceOptions, MaskingStats, num_to_predict
from albert_tf.data.summary import describe_data, summary_path_for
from albert_tf.data.tokenization import SentencePieceTokenizer
from albert_tf.storage import atomic, outputs, provenance
from albert_tf.storage import files as file_layer

STDERR = object()  # a default stream: sys.stderr as it is when the progress starts, not at import


@dataclasses.dataclass(frozen=True)
class WriterOptions:
    """Settings of create_pretraining_data besides the file names.

    Attributes:
        instance: `InstanceOptions` (sequence length, masking, sentence order).
        do_lower_case, dupe_factor, random_seed: as the release's flags.
        num_workers: processes creating instances (0 or 1: in this process); the output
            does not depend on it.
        shuffle_buffer_size: instances held for shuffling before writing.
        documents_per_chunk: documents per unit of work.
        random_document_pool: the most documents held for NSP negatives, a uniform sample
            of the whole input (`albert_tf.data.document_pool`); 0: the work chunk's
            documents instead. Unused without NSP negatives.
        strict_utf8: a non-UTF-8 line is an error instead of being skipped and counted.
    """

    instance: InstanceOptions = dataclasses.field(default_factory=InstanceOptions)
    do_lower_case: bool = True
    dupe_factor: int = 40
    random_seed: int = 12345
    num_workers: int = 1
    shuffle_buffer_size: int = 100_000
    documents_per_chunk: int = 500
    strict_utf8: bool = False
    random_document_pool: int = 50_000

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
        if self.random_document_pool < 0 or self.random_document_pool == 1:
            raise InputError(f"--random_document_pool must be 0 (the work chunk's documents) or at least 2, "
                             f"got {self.random_document_pool}.")

    def settings(self):
        """Flat dict of every setting, for the summary."""
        flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "instance"}
        flat.update(dataclasses.asdict(self.instance))
        return flat


# --- input -------------------------------------------------------------------------------
class BadLines:
    """Non-UTF-8 lines: counted, the first few kept as file:line."""

    def __init__(self, strict):
        self.strict = strict
        self.count = 0
        self.examples = []

    def add(self, path, line_number, error):
        where = f"{path}:{line_number}"
        if self.strict:
            raise InputError(f"{where}: not valid UTF-8 ({error.reason} at byte {error.start}); "
                             "fix the file or drop --strict_utf8 to skip such lines.")
        self.count += 1
        if len(self.examples) < 20:
            self.examples.append(where)


def read_documents(files, bad_lines, progress=None):
    """Yields documents (lists of sentence strings): blank lines and file ends split them."""
    for path in files:
        document = []
        with file_layer.open(path, "rb") as f:
            for line_number, raw in enumerate(f, 1):
                if progress is not None:
                    progress.bytes_read += len(raw)
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    bad_lines.add(path, line_number, e)
                    continue
                if line:
                    document.append(line)
                elif document:
                    yield document
                    document = []
        if document:
            yield document


def document_chunks(documents, size):
    """Groups a stream of documents into lists of `size` (the last may be shorter)."""
    chunk = []
    for document in documents:
        chunk.append(document)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# --- work --------------------------------------------------------------------------------
@dataclasses.dataclass
class Counts:
    """What a chunk (or the whole run) produced, for the summary."""

    documents: int = 0
    instances: int = 0
    tokens: int = 0
    label_1: int = 0
    expected_predictions: int = 0
    stats: MaskingStats = None

    def add(self, other):
        for f in ("documents", "instances", "tokens", "label_1", "expected_predictions"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.stats.add(other.stats)


class ChunkWorker:
    """Turns a chunk of documents (lists of sentence strings) into serialized Examples.

    Args:
        spm_model_file: the SentencePiece model.
        options: `WriterOptions`.
        pool_entries: the input-wide pool of NSP negatives (`document_pool.sample_documents`'
            entries), or None: each chunk's own documents.
    """

    def __init__(self, spm_model_file, options, pool_entries=None):
        self.options = options
        self.tokenizer = SentencePieceTokenizer(spm_model_file, do_lower_case=options.do_lower_case)
        self.pool = None if pool_entries is None else InputDocuments(pool_entries, self.tokenizer.encode_batch)
        tokens = self.tokenizer.special_tokens
        self.maker = InstanceMaker(options.instance, tokens, self.tokenizer.word_start)
        self.encoder = ExampleEncoder(options.instance.max_seq_length, options.instance.max_predictions_per_seq,
                                      pad_id=tokens.pad_id, max_id=tokens.vocab_size)

    def records(self, chunk_index, texts):
        """-> (list of serialized Examples, Counts) of chunk `chunk_index`."""
        o = self.options.instance
        documents, keys = [], []  # keys: input positions (those of the pool's entries)
        first = chunk_index * self.options.documents_per_chunk
        for position, text in enumerate(texts):
            segments = [ids for ids in self.tokenizer.encode_batch(text) if ids]
            if segments:
                documents.append(segments)
                keys.append(first + position)
        rng = random.Random(f"{self.options.random_seed}:{chunk_index}")
        counts = Counts(documents=len(texts), stats=MaskingStats.empty(o.ngram))
        records = []
        for _ in range(self.options.dupe_factor):
            for index in range(len(documents)):
                key = None if self.pool is None else keys[index]
                for instance in self.maker.from_document(documents, index, rng, counts.stats, self.pool, key):
                    records.append(self.encoder.encode(instance))
                    n = len(instance.input_ids)
                    counts.tokens += n
                    counts.label_1 += instance.next_sentence_label
                    counts.expected_predictions += num_to_predict(n, o.max_predictions_per_seq, o.masked_lm_prob)
        counts.instances = len(records)
        return records, counts


def _worker_process(spm_model_file, options, pool_entries, tasks, results):
    """Body of a worker process: one ChunkWorker answers (index, texts) tasks until None."""
    index = None
    try:
        worker = ChunkWorker(spm_model_file, options, pool_entries)
        for index, texts in iter(tasks.get, None):
            results.put((index, worker.records(index, texts), None))
    except BaseException:  # noqa: BLE001 - reported to the main process, which raises
        results.put((index, None, traceback.format_exc()))


def _records_in_workers(chunks, spm_model_file, options, pool_entries):
    """`chunk_records` with `options.num_workers` spawned processes (results in order)."""
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    processes = [context.Process(target=_worker_process,
                                 args=(spm_model_file, options, pool_entries, tasks, results),
                                 daemon=True) for _ in range(options.num_workers)]
    for p in processes:
        p.start()
    done, sent, next_index, finished = {}, 0, 0, False

    def next_result():
        while next_index not in done:
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
            done[index] = payload
        return done.pop(next_index)

    try:
        for index, texts in enumerate(chunks):
            tasks.put((index, texts))
            sent += 1
            while sent - next_index >= 2 * options.num_workers:
                yield next_result()
                next_index += 1
        while next_index < sent:
            yield next_result()
            next_index += 1
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
    """Yields (records, Counts) per chunk of documents, in chunk order: in this process
    (num_workers 0 or 1) or in `options.num_workers` processes (at most 2 chunks each in
    flight; they never import TensorFlow). `pool_entries`: as `ChunkWorker`'s."""
    if options.num_workers <= 1:
        worker = ChunkWorker(spm_model_file, options, pool_entries)
        for index, texts in enumerate(chunks):
            yield worker.records(index, texts)
    else:
        yield from _records_in_workers(chunks, spm_model_file, options, pool_entries)


# --- output ------------------------------------------------------------------------------
class ShuffledShards:
    """A bounded shuffle buffer in front of TFRecord writers used round-robin.

    Records enter a buffer of `buffer_size`; once it is full each new record replaces a
    random one, which is written. `finish` shuffles and writes the rest.
    """

    def __init__(self, paths, buffer_size, rng):
        import tensorflow as tf  # only the writer needs it: workers stay TensorFlow-free

        self.writers = [tf.io.TFRecordWriter(p) for p in paths]
        self.per_file = [0] * len(paths)
        self.buffer_size = buffer_size
        self.rng = rng
        self.buffer = []
        self.written = 0

    def _write(self, record):
        shard = self.written % len(self.writers)
        self.writers[shard].write(record)
        self.per_file[shard] += 1
        self.written += 1

    def add(self, record):
        if len(self.buffer) < self.buffer_size:
            self.buffer.append(record)
            return
        j = self.rng.randrange(len(self.buffer))
        self.buffer[j], record = record, self.buffer[j]
        self._write(record)

    def finish(self):
        self.rng.shuffle(self.buffer)
        for record in self.buffer:
            self._write(record)
        self.buffer.clear()

    def close(self):
        for w in self.writers:
            w.close()


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


def output_paths(output_file, num_output_shards=1):
    """Comma list of outputs, or one output split into NAME-00000-of-0000N shards."""
    outputs = [p.strip() for p in output_file.split(",") if p.strip()]
    if not outputs:
        raise InputError("--output_file is empty.")
    if num_output_shards < 1:
        raise InputError(f"--num_output_shards must be at least 1, got {num_output_shards}.")
    if num_output_shards > 1:
        if len(outputs) != 1:
            raise InputError("--num_output_shards needs a single --output_file name.")
        outputs = [f"{outputs[0]}-{i:05d}-of-{num_output_shards:05d}" for i in range(num_output_shards)]
    for path in outputs:
        if file_layer.isdir(path):
            raise InputError(f"--output_file: {path!r} is a directory.")
    return outputs


def write_pretraining_data(input_files, output_files, spm_model_file, options, progress_stream=STDERR,
                           summary_file=None, made_by=None):
    """Writes the TFRecords and their summary; returns the summary dict (plus
    "summary_file", where it was written).

    Args:
        input_files: list of text files (one sentence per line, blank line between documents).
        output_files: list of TFRecord paths; instances go round-robin after shuffling.
        spm_model_file: SentencePiece model with <pad>, <unk>, [CLS], [SEP], [MASK].
        options: `WriterOptions`.
        progress_stream: where progress lines go (default: sys.stderr as it is at the
            call; None: silent).
        summary_file: where the JSON summary goes (default `summary_path_for(output_files[0])`).
        made_by: what made the files (albert_tf.storage.provenance.record: the command, its
            flags as given, versions, source state, device), the summary's "made_by"
            (stamped when written); None leaves it out.

    Raises:
        InputError: bad input or settings; no output is left on disk.
        OutputRefused: an output (or the summary) exists and is not albert_tf's own
            pretraining data (albert_tf.storage.outputs); nothing is written.
    """
    options.validate()
    try:
        special_tokens = SentencePieceTokenizer(spm_model_file, options.do_lower_case).special_tokens
    except ValueError as e:  # fail fast, clearly
        raise InputError(str(e)) from None

    start = time.time()
    pool_entries = pool_total = None
    if options.draws_random_documents and options.random_document_pool:
        # a first pass: the whole input's documents (a uniform sample past the bound) for NSP negatives
        pool_entries, pool_total = sample_documents(read_documents(input_files, BadLines(options.strict_utf8)),
                                                    options.random_document_pool, f"{options.random_seed}:pool")
    progress = Progress(sum(file_layer.getsize(f) for f in input_files), progress_stream)
    bad_lines = BadLines(options.strict_utf8)
    totals = Counts(stats=MaskingStats.empty(options.instance.ngram))
    chunks = document_chunks(read_documents(input_files, bad_lines, progress), options.documents_per_chunk)
    summary_path = summary_file or summary_path_for(output_files[0])
    with contextlib.ExitStack() as marked:
        # only new paths or albert_tf's own pretraining data are written (storage.outputs)
        for path in [*output_files, summary_path]:
            marked.enter_context(outputs.replacing_file(path, outputs.PRETRAINING_DATA, "--output_file"))
        with contextlib.ExitStack() as stack:
            temporaries = [stack.enter_context(atomic.output_path(p)) for p in output_files]
            shards = ShuffledShards(temporaries, options.shuffle_buffer_size,
                                    random.Random(f"{options.random_seed}:shuffle"))
            stack.callback(shards.close)  # closed before the renames (and before removal on errors)
            for records, counts in chunk_records(chunks, spm_model_file, options, pool_entries):
                totals.add(counts)
                for record in records:
                    shards.add(record)
                progress.maybe_print(totals.documents, totals.instances)
            shards.finish()
            if totals.instances == 0:
                raise InputError(
                    f"--input_file: {', '.join(input_files)} gave no instances (no document with at least "
                    "two tokens of valid text).")
        elapsed = time.time() - start
        progress.maybe_print(totals.documents, totals.instances, force=True)
        summary = summarize(totals, shards.per_file, output_files, input_files, bad_lines, elapsed,
                            dict(options.settings(), spm_model_file=spm_model_file))
        summary.update(describe_data(special_tokens, options.instance, spm_model_file))
        if options.draws_random_documents:
            summary["random_next_documents_from"] = document_pool.describe(pool_entries, pool_total)
        if made_by is not None:
            summary["made_by"] = provenance.stamp(made_by)
        atomic.write_json(summary_path, summary)
    return dict(summary, summary_file=summary_path)


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
        "non_utf8_line_examples": bad_lines.examples,
        "seconds": round(elapsed, 3),
        "instances_per_second": round(_share(n, elapsed), 1),
        "input_files": input_files,
        "output_files": {p: c for p, c in zip(output_files, per_file)},
        "settings": settings,
    }
