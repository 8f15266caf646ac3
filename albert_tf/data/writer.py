"""Streaming create_pretraining_data: text files -> shuffled, sharded TFRecords.

Memory stays bounded whatever the corpus size: documents are read as a stream, cut
into work chunks of `documents_per_chunk` documents, turned into serialized instances
by worker processes (at most 2 chunks per worker in flight), and written through a
bounded shuffle buffer to the output shards round-robin.

Determinism: chunk c draws from `random.Random(f"{random_seed}:{c}")` only, and the main
process consumes chunks in order and shuffles with its own seeded RNG, so the same
inputs and flags give byte-identical files for any `num_workers`. NSP negatives (only
with random_next_sentence or the legacy single-chunk mode) come from the same chunk.

Outputs are written under temporary names and renamed only when everything succeeded;
a JSON summary is written beside the outputs as `summary_<name>.json` (a name no shard
glob such as `train.tfrecord-*` matches).
"""

import glob
import json
import multiprocessing
import os
import random
import sys
import time

from albert_tf.data.example_codec import ExampleEncoder
from albert_tf.data.instances import InstanceMaker, InstanceOptions, MaskingStats, num_to_predict
from albert_tf.data.tokenization import SentencePieceTokenizer


class InputError(ValueError):
    """Bad input or flags; the message names the file, line or flag."""


# --- input -------------------------------------------------------------------------------
def expand_input_files(patterns):
    """Comma-separated files or globs -> files; InputError for nothing, a directory, empty."""
    files = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise InputError(f"--input_file: {pattern!r} matches no file.")
        for path in matches:
            if os.path.isdir(path):
                raise InputError(f"--input_file: {path!r} is a directory; name the text files in it.")
            files.append(path)
    if not files:
        raise InputError("--input_file is empty.")
    if all(os.path.getsize(f) == 0 for f in files):
        raise InputError(f"--input_file: {', '.join(files)} {'is' if len(files) == 1 else 'are'} empty.")
    return files


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
        with open(path, "rb") as f:
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


def _chunks(documents, size):
    chunk = []
    for document in documents:
        chunk.append(document)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# --- work (runs in worker processes) -----------------------------------------------------
_state = {}


def _init_worker(spm_model_file, do_lower_case, options):
    tokenizer = SentencePieceTokenizer(spm_model_file, do_lower_case=do_lower_case)
    _state["tokenizer"] = tokenizer
    _state["maker"] = InstanceMaker(
        options, tokenizer.vocab_size, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id,
        tokenizer.word_start, first_normal_id=5,
    )
    _state["encoder"] = ExampleEncoder(options.max_seq_length, options.max_predictions_per_seq,
                                       max_id=tokenizer.vocab_size)


def _process_chunk(task):
    """(chunk_index, documents, random_seed, dupe_factor) -> (records, counters)."""
    chunk_index, texts, random_seed, dupe_factor = task
    tokenizer, maker, encoder = _state["tokenizer"], _state["maker"], _state["encoder"]
    options = maker.options
    documents = []
    for text in texts:
        segments = [ids for ids in tokenizer.encode_batch(text) if ids]
        if segments:
            documents.append(segments)
    rng = random.Random(f"{random_seed}:{chunk_index}")
    stats = MaskingStats.empty(options.ngram)
    records, tokens, positives, expected = [], 0, 0, 0
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            for instance in maker.from_document(documents, index, rng, stats):
                records.append(encoder.encode(instance))
                n = len(instance.input_ids)
                tokens += n
                positives += instance.next_sentence_label
                expected += num_to_predict(n, options.max_predictions_per_seq, options.masked_lm_prob)
    counters = {"documents": len(texts), "instances": len(records), "tokens": tokens,
                "label_1": positives, "expected_predictions": expected, "stats": stats}
    return records, counters


# --- orchestration -----------------------------------------------------------------------
class Progress:
    """Prints documents, instances, rate and ETA every `every` seconds."""

    def __init__(self, total_bytes, stream=sys.stderr, every=5.0):
        self.total_bytes = max(total_bytes, 1)
        self.bytes_read = 0
        self.stream = stream
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


def summary_path_for(output_file):
    """`dir/train.tfrecord` -> `dir/summary_train.tfrecord.json`: beside the output, but
    not matched by globs over the outputs."""
    directory, name = os.path.split(os.path.abspath(output_file))
    return os.path.join(directory, f"summary_{name}.json")


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
        parent = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise InputError(f"--output_file: {path!r} is a directory.")
        os.makedirs(parent, exist_ok=True)
    return outputs


def create_pretraining_data(
    input_files,
    output_files,
    spm_model_file,
    options,
    do_lower_case=True,
    dupe_factor=40,
    random_seed=12345,
    num_workers=1,
    shuffle_buffer_size=100_000,
    documents_per_chunk=500,
    strict_utf8=False,
    progress_stream=sys.stderr,
    summary_file=None,
):
    """Writes the TFRecords and their summary; returns the summary dict.

    Args:
        input_files: list of text files (one sentence per line, blank line between documents).
        output_files: list of TFRecord paths; instances go round-robin after shuffling.
        spm_model_file: SentencePiece model with [CLS], [SEP], [MASK].
        options: `InstanceOptions`.
        do_lower_case, dupe_factor, random_seed: as the release's flags.
        num_workers: processes creating instances (0 or 1: in this process).
        shuffle_buffer_size: instances held for shuffling before writing.
        documents_per_chunk: documents per unit of work (and NSP negative pool).
        strict_utf8: a non-UTF-8 line is an error instead of being skipped and counted.
        progress_stream: where progress lines go (None: silent).
        summary_file: where the JSON summary goes (default `summary_path_for(output_files[0])`).

    Raises:
        InputError: bad input or settings; nothing is left on disk.
    """
    try:
        options.validate()
    except ValueError as e:
        raise InputError(str(e)) from None
    if dupe_factor < 1:
        raise InputError(f"--dupe_factor must be at least 1, got {dupe_factor}.")
    if shuffle_buffer_size < 1 or documents_per_chunk < 1:
        raise InputError("--shuffle_buffer_size and --documents_per_chunk must be positive.")
    try:
        SentencePieceTokenizer(spm_model_file, do_lower_case)  # fail fast, clearly
    except ValueError as e:
        raise InputError(str(e)) from None

    import tensorflow as tf  # only the writer needs it: workers stay TensorFlow-free

    start = time.time()
    progress = Progress(sum(os.path.getsize(f) for f in input_files), progress_stream)
    bad_lines = BadLines(strict_utf8)
    tmp_paths = [f"{p}.tmp-{os.getpid()}" for p in output_files]
    writers = [tf.io.TFRecordWriter(p) for p in tmp_paths]
    per_file = [0] * len(output_files)
    totals = {"documents": 0, "instances": 0, "tokens": 0, "label_1": 0, "expected_predictions": 0}
    stats = MaskingStats.empty(options.ngram)
    shuffle_rng = random.Random(f"{random_seed}:shuffle")
    buffer, written = [], 0

    def write(record):
        nonlocal written
        shard = written % len(writers)
        writers[shard].write(record)
        per_file[shard] += 1
        written += 1

    def consume(records, counters):
        for key in totals:
            totals[key] += counters[key]
        stats.add(counters["stats"])
        for record in records:
            if len(buffer) < shuffle_buffer_size:
                buffer.append(record)
                continue
            j = shuffle_rng.randrange(len(buffer))
            buffer[j], record = record, buffer[j]
            write(record)
        progress.maybe_print(totals["documents"], totals["instances"])

    tasks = (
        (index, chunk, random_seed, dupe_factor)
        for index, chunk in enumerate(_chunks(read_documents(input_files, bad_lines, progress), documents_per_chunk))
    )
    init_args = (spm_model_file, do_lower_case, options)
    try:
        if num_workers <= 1:
            _init_worker(*init_args)
            for task in tasks:
                consume(*_process_chunk(task))
        else:
            context = multiprocessing.get_context("spawn")
            with context.Pool(num_workers, initializer=_init_worker, initargs=init_args) as pool:
                pending = []
                for task in tasks:
                    pending.append(pool.apply_async(_process_chunk, (task,)))
                    while len(pending) >= 2 * num_workers:
                        consume(*pending.pop(0).get())
                for result in pending:
                    consume(*result.get())
        shuffle_rng.shuffle(buffer)
        for record in buffer:
            write(record)
        buffer.clear()
        for w in writers:
            w.close()
        if totals["instances"] == 0:
            raise InputError(
                f"--input_file: {', '.join(input_files)} gave no instances (no document with at least "
                "two tokens of valid text).")
        for tmp, final in zip(tmp_paths, output_files):
            os.replace(tmp, final)
    except BaseException:
        for w in writers:
            w.close()
        for tmp in tmp_paths:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise

    elapsed = time.time() - start
    progress.maybe_print(totals["documents"], totals["instances"], force=True)
    summary = _summary(totals, stats, per_file, output_files, input_files, bad_lines, elapsed, options,
                       dict(do_lower_case=do_lower_case, dupe_factor=dupe_factor, random_seed=random_seed,
                            num_workers=num_workers, shuffle_buffer_size=shuffle_buffer_size,
                            documents_per_chunk=documents_per_chunk, spm_model_file=spm_model_file))
    summary_path = summary_file or summary_path_for(output_files[0])
    tmp = summary_path + f".tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, summary_path)
    summary["summary_file"] = summary_path
    return summary


def _share(part, whole):
    return part / whole if whole else 0.0


def _summary(totals, stats, per_file, output_files, input_files, bad_lines, elapsed, options, settings):
    n = totals["instances"]
    drawn = sum(stats.ngram_drawn)
    applied = sum(stats.ngram_applied)
    return {
        "instances": n,
        "documents": totals["documents"],
        "tokens": totals["tokens"],
        "masked_lm_predictions": stats.masked,
        "masked_share": _share(stats.masked, totals["tokens"]),
        "mean_predictions_per_instance": _share(stats.masked, n),
        "expected_predictions_per_instance": _share(totals["expected_predictions"], n),
        "sentence_order_label_1_share": _share(totals["label_1"], n),
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
        "settings": dict(settings, **{k: getattr(options, k) for k in options.__dataclass_fields__}),
    }
