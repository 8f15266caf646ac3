"""The length buckets' widths and their flag's help: what the entry points need before any
work, without TensorFlow (albert_tf.data.buckets batches by them).

    bucket_widths(128, "16,32,64")      # (16, 32, 64, 128)
    bucket_widths(128, "none")          # (128,): every batch at max_seq_length, as the release
"""

DEFAULT_BUCKETS = "16,32,64,128,256,384,512"
_HELP = ("Batches are padded only to the smallest of these widths (and --max_seq_length) that holds their longest "
         "input; `none` pads every batch to --max_seq_length (the release). ")
_BATCHES = "Training batches are drawn one bucket at a time, so a training run sees other batches than with `none`."
FLAG_HELP = (_HELP + "On the same batch the outputs and the training loss are the same either way (float32 "
             "rounding). " + _BATCHES)
SQUAD_V1_FLAG_HELP = _HELP + (
    "On the same batch the outputs are the same either way (float32 rounding), the v1 head's training loss is not: "
    "its start and end softmax run over every position of the batch, padding included (as in the release), so with "
    "buckets the padding past the batch's width drops out of them and the loss is lower than with `none` "
    "(predictions are the same). ") + _BATCHES


def bucket_widths(max_seq_length, buckets=DEFAULT_BUCKETS):
    """The widths a batch may be padded to: those of `buckets` below max_seq_length, then
    max_seq_length itself.

    Args:
        max_seq_length: int T.
        buckets: a comma list of positive ints ("16,32,64"), a sequence of ints, or
            "none" / "" / None for no bucketing (every batch at T, as the release).
    Returns:
        tuple of ints, increasing, ending with T.
    Raises:
        ValueError: a value that is not a positive integer (named).
    """
    if buckets is None or (isinstance(buckets, str) and buckets.strip().lower() in ("", "none", "off")):
        return (int(max_seq_length),)
    items = buckets.split(",") if isinstance(buckets, str) else list(buckets)
    widths = set()
    for item in items:
        try:
            value = int(str(item).strip())
        except ValueError:
            value = 0
        if value <= 0:
            raise ValueError(f"--length_buckets: {item!r} is not a positive integer (give e.g. {DEFAULT_BUCKETS}, "
                             "or none).")
        if value < max_seq_length:
            widths.add(value)
    return tuple(sorted(widths)) + (int(max_seq_length),)
