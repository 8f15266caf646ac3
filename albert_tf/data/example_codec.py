"""The release's pretraining TFRecord format, encoded without TensorFlow (the protobuf wire
format written directly; TensorFlow parses it like any serialized Example).

Eight features per tf.train.Example (T = max_seq_length, P = max_predictions_per_seq):
int64 input_ids[T], input_mask[T], segment_ids[T], token_boundary[T],
masked_lm_positions[P], masked_lm_ids[P], next_sentence_labels[1]; float
masked_lm_weights[P]. input_ids are padded with the model's pad id; every other
feature with 0 (masked_lm_ids too: their weight is 0).
"""

import struct

INT_FEATURES_T = ("input_ids", "input_mask", "segment_ids", "token_boundary")
INT_FEATURES_P = ("masked_lm_positions", "masked_lm_ids")
FEATURE_NAMES = INT_FEATURES_T + INT_FEATURES_P + ("masked_lm_weights", "next_sentence_labels")


def feature_lengths(max_seq_length, max_predictions_per_seq):
    """name -> (length, "int64" | "float32") for the eight features."""
    spec = {name: (max_seq_length, "int64") for name in INT_FEATURES_T}
    spec.update({name: (max_predictions_per_seq, "int64") for name in INT_FEATURES_P})
    spec["masked_lm_weights"] = (max_predictions_per_seq, "float32")
    spec["next_sentence_labels"] = (1, "int64")
    return spec


def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class ExampleEncoder:
    """Serializes padded instances; varints of ids below `max_id` come from a table.

    Args:
        max_seq_length, max_predictions_per_seq: T and P.
        pad_id: the id input_ids are padded with (`SpecialTokens.pad_id`).
        max_id: ids below it are encoded from a precomputed table (the vocabulary size).
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, pad_id, max_id=1 << 16):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.pad_id = pad_id
        self._table = [_varint(i) for i in range(max(max_id, max_seq_length) + 1)]
        self._keys = {name: _varint(len(name)) + name.encode() for name in FEATURE_NAMES}

    def _varints(self, values):
        table = self._table
        try:
            return b"".join([table[v] for v in values])
        except IndexError:
            return b"".join([_varint(v) for v in values])

    def _entry(self, name, feature):
        # map<string, Feature> entry: key (field 1), value (field 2)
        entry = b"\x0a" + self._keys[name] + b"\x12" + _varint(len(feature)) + feature
        return b"\x0a" + _varint(len(entry)) + entry

    def _int64(self, name, values):
        packed = self._varints(values)
        inner = b"\x0a" + _varint(len(packed)) + packed  # Int64List.value, packed
        return self._entry(name, b"\x1a" + _varint(len(inner)) + inner)  # Feature.int64_list

    def _float(self, name, values):
        packed = struct.pack(f"<{len(values)}f", *values)
        inner = b"\x0a" + _varint(len(packed)) + packed  # FloatList.value, packed
        return self._entry(name, b"\x12" + _varint(len(inner)) + inner)  # Feature.float_list

    def encode(self, instance):
        """An `Instance` -> serialized tf.train.Example bytes (padded to T and P)."""
        T, P = self.max_seq_length, self.max_predictions_per_seq
        n = len(instance.input_ids)
        pad_t = [0] * (T - n)
        m = len(instance.masked_lm_positions)
        pad_p = [0] * (P - m)
        features = b"".join((
            self._int64("input_ids", instance.input_ids + [self.pad_id] * (T - n)),
            self._int64("input_mask", [1] * n + pad_t),
            self._int64("segment_ids", instance.segment_ids + pad_t),
            self._int64("token_boundary", instance.token_boundary + pad_t),
            self._int64("masked_lm_positions", instance.masked_lm_positions + pad_p),
            self._int64("masked_lm_ids", instance.masked_lm_ids + pad_p),
            self._float("masked_lm_weights", [1.0] * m + [0.0] * (P - m)),
            self._int64("next_sentence_labels", [instance.next_sentence_label]),
        ))
        return b"\x0a" + _varint(len(features)) + features  # Example.features
