"""TFRecord files written and read without TensorFlow (the release's pretraining data format).

A record on disk is `uint64 length | uint32 masked_crc32c(length) | data | uint32
masked_crc32c(data)`, little-endian: the framing of `tf.io.TFRecordWriter`, byte for byte,
so TensorFlow reads these files like its own. The local writer and the Beam pipeline's
workers share it (neither imports TensorFlow).

    with files.open("out.tfrecord", "wb") as f:
        f.write(frame(serialized_example))
"""

import struct

import google_crc32c

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data):
    """TFRecord's masked CRC-32C of `data` (bytes)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record):
    """The bytes of one record (`record`: bytes) in a TFRecord file."""
    length = struct.pack("<Q", len(record))
    return b"".join((length, struct.pack("<I", masked_crc32c(length)), record,
                     struct.pack("<I", masked_crc32c(record))))


def read_records(f, source="a TFRecord file"):
    """Yields the records of open binary file `f`, their checksums verified (ValueError
    naming `source` on a truncated or corrupt file)."""
    while True:
        head = f.read(12)
        if not head:
            return
        if len(head) < 12:
            raise ValueError(f"{source}: truncated record header")
        (length,), (crc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
        if masked_crc32c(head[:8]) != crc:
            raise ValueError(f"{source}: corrupt record length")
        data = f.read(length + 4)
        if len(data) < length + 4:
            raise ValueError(f"{source}: truncated record")
        if masked_crc32c(data[:length]) != struct.unpack("<I", data[length:])[0]:
            raise ValueError(f"{source}: corrupt record")
        yield data[:length]
