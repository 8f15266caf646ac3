"""Damaged TFRecord files: an input file or feature cache cut short or with changed bytes is
named (`DamagedFileError`, a ValueError: exit status 2). TensorFlow reads a TFRecord file cut
short as if it ended at its last whole record, and reports changed bytes as a DataLossError
that names no file.

    record_check.check_inputs(paths)   # before reading: local files cut short (and any not the size
                                       # albert_tf wrote) are named
    record_check.watch(paths)          # the input files a tf.data pipeline reads
    record_check.raise_if_damaged(e)   # on TensorFlow's DataLossError: the damaged file named
    record_check.damage(path)          # what is wrong with one file (every checksum), or None

Why so: docs/damaged_files.md.
"""

import concurrent.futures
import struct

from albert_tf.data.tfrecord_file import masked_crc32c, read_records
from albert_tf.storage import files
from albert_tf.storage.integrity import DamagedFileError, changed_size
from albert_tf.storage.outputs import PRETRAINING_DATA

# the TFRecord files the input pipelines of this process read (`watch`)
_WATCHED = {}
FIX = "Write the file again (or restore it from a copy), or leave it out of the input."


def cut_short(path):
    """What is wrong with the framing of TFRecord file `path` (a record that runs past its
    end, a record length whose checksum does not match), naming it, or None. Reads each
    record's 12-byte header only."""
    size = files.getsize(path)
    offset = 0
    with files.open(path, "rb") as f:
        while offset < size:
            head = f.read(12)
            if len(head) < 12 or masked_crc32c(head[:8]) != struct.unpack("<I", head[8:])[0]:
                what = "cut short inside a record's header" if len(head) < 12 else "a record's length changed"
                return f"{path}: {what} (at byte {offset} of {size})"
            offset += 12 + struct.unpack("<Q", head[:8])[0] + 4
            if offset > size:
                return f"{path}: cut short: its last record ends at byte {offset}, the file at {size}"
            f.seek(offset)
    return None


def _before_reading(path):
    """What is wrong with TFRecord input `path` before it is read, or None: a local file's
    framing (`cut_short`), then (a file on a store too) a size other than albert_tf's marker
    recorded when it wrote the file (storage.integrity.changed_size)."""
    return (None if files.is_url(path) else cut_short(path)) or changed_size(path, PRETRAINING_DATA)


def check_inputs(paths):
    """DamagedFileError naming each TFRecord file of `paths` that is cut short: a local file's
    framing is walked, a file on a store is not read ahead (that would read it whole), and
    either is compared with the size albert_tf's marker recorded, where it has one (files
    looked at 16 at a time)."""
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        found = [what for what in pool.map(_before_reading, paths) if what]
    if found:
        raise DamagedFileError(f"damaged input: {'; '.join(found)}. {FIX}")


def watch(paths):
    """Notes `paths` as TFRecord files an input pipeline reads, for `raise_if_damaged`."""
    _WATCHED.update(dict.fromkeys(paths))


def damage(path):
    """What is wrong with TFRecord file `path` (every record's checksums), naming it, or None
    when every record is whole."""
    try:
        with files.open(path, "rb") as f:
            for _ in read_records(f, source=path):
                pass
    except ValueError as e:
        return f"{e} (the file is cut short, changed, or no TFRecord file)"
    return None


def raise_if_damaged(error):
    """On TensorFlow's DataLossError (`error`) while input was read: DamagedFileError naming
    each watched file that is damaged; nothing for another error or when none is."""
    import tensorflow as tf

    if not isinstance(error, tf.errors.DataLossError):
        return
    found = [what for what in (damage(path) for path in _WATCHED) if what]
    if found:
        raise DamagedFileError(f"damaged input: {'; '.join(found)}. {FIX}") from None
