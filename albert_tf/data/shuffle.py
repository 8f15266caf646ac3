"""The global shuffle: records sorted by their random 64-bit keys, in bounded memory
(docs/pretraining_data.md). The output is the records in ascending (key, record) order, record
i going to shard `key % num_shards`. `KeySort` holds at most `limit` records in memory; past
that it spills them to bucket files by the key's top bits and reads them back in key order.
Pure Python.

    sort = KeySort(limit=100_000, directory="/tmp/albert_tf_shuffle-1234")
    for key, record in keyed_records:
        sort.add(key, record)
    for key, record in sort.items():
        ...
"""

import itertools
import struct

from albert_tf.data.tfrecord_file import frame
from albert_tf.storage import files, space

_HEAD = struct.Struct("<QI")  # spilled: key, length, then the record
BUCKET_BITS = 8


def shard_of(key, num_shards):
    """The output shard of a record of shuffle key `key`."""
    return key % num_shards


class KeySort:
    """Records sorted by (key, record), at most `limit` of them in memory.

    Args:
        limit: records held in memory (at least 1).
        directory: where spilled buckets go; made on the first spill, removed by
            `items()` when it is done (or by `close()`). Nothing else is written there.
    """

    def __init__(self, limit, directory):
        self.limit = limit
        self.directory = directory
        self.buffer = []
        self.counts = {}  # spilled bucket path -> records in it
        self.spilled = False

    def add(self, key, record):
        self.buffer.append((key, record))
        if len(self.buffer) >= self.limit:
            self._spill(self.buffer, self.directory, 0)
            self.buffer = []

    def _spill(self, items, directory, depth):
        files.makedirs(directory)
        self.spilled = True
        shift = 64 - BUCKET_BITS * (depth + 1)
        parts = {}
        for key, record in items:
            parts.setdefault((key >> shift) & 0xFF, []).append(_HEAD.pack(key, len(record)) + record)
        for bucket, blobs in parts.items():
            path = files.join(directory, f"{bucket:02x}")
            with space.naming(path), files.open(path, "ab") as f:
                f.write(b"".join(blobs))
            self.counts[path] = self.counts.get(path, 0) + len(blobs)

    @staticmethod
    def _read(path):
        with files.open(path, "rb") as f:
            while head := f.read(_HEAD.size):
                key, length = _HEAD.unpack(head)
                yield key, f.read(length)

    def _drain(self, directory, depth):
        for bucket in range(1 << BUCKET_BITS):
            path = files.join(directory, f"{bucket:02x}")
            count = self.counts.pop(path, 0)
            if not count:
                continue
            if count > self.limit and depth < 64 // BUCKET_BITS - 1:  # split again, `limit` at a time
                below, items = path + ".d", self._read(path)
                while batch := list(itertools.islice(items, self.limit)):
                    self._spill(batch, below, depth + 1)
                files.remove(path)
                yield from self._drain(below, depth + 1)
                files.remove(below)
            else:
                items = sorted(self._read(path))
                files.remove(path)
                yield from items

    def items(self):
        """Yields every (key, record) added, in ascending order (once)."""
        buffer, self.buffer = self.buffer, []
        if not self.spilled:
            buffer.sort()
            yield from buffer
            return
        if buffer:
            self._spill(buffer, self.directory, 0)
        del buffer
        try:
            yield from self._drain(self.directory, 0)
        finally:
            self.close()

    def close(self):
        """Removes the spill directory (nothing when nothing was spilled)."""
        if self.spilled:
            files.remove(self.directory)


def write_shards(items, handles):
    """Writes sorted (key, record) `items` as TFRecords, each to `handles[shard_of(key)]`
    (open binary files); returns the records per shard."""
    per_file = [0] * len(handles)
    n = len(handles)
    for key, record in items:
        shard = key % n
        handles[shard].write(frame(record))
        per_file[shard] += 1
    return per_file
