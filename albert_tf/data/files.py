"""The one way input file names are expanded: comma-separated files or globs -> files,
through the file layer (local paths without TensorFlow, URLs through tf.io.gfile).

    expand_input_files("data/a.txt,data/shard-*")        # ['data/a.txt', 'data/shard-00000', ...]
    expand_input_files(["x.tfrecord"], flag="--eval_input_file")
"""

import os

from albert_tf.storage import files as file_layer


class InputError(ValueError):
    """Bad input or flags; the message names the flag and the file, pattern or line."""


def split_patterns(patterns):
    """"a, b*" or ["a", "b*"] -> ["a", "b*"] (blank entries dropped)."""
    if isinstance(patterns, (str, os.PathLike)):
        patterns = os.fspath(patterns).split(",")
    return [os.fspath(p).strip() for p in patterns if os.fspath(p).strip()]


def expand_input_files(patterns, flag="--input_file"):
    """Comma-separated files or globs (or a list of them) -> the files, each pattern's
    matches sorted, patterns in the order given.

    Raises InputError (a ValueError) naming `flag` and the pattern or file when: no
    pattern is given; a pattern matches nothing; a match is a directory; two patterns
    match the same file (it would be read twice); every file is empty.
    """
    names = split_patterns(patterns)
    if not names:
        raise InputError(f"{flag} is empty: name one or more files or globs.")
    files, matched_by = [], {}
    for store in {file_layer.store(p): p for p in names[::-1] if file_layer.is_url(p)}.values():
        file_layer.check_reachable(store, flag)  # an unreachable store: refused within files.PROBE_SECONDS
    for pattern in names:
        matches = file_layer.glob(pattern)
        if not matches:
            raise InputError(f"{flag}: {pattern!r} matches no file.")
        for path in matches:
            if file_layer.isdir(path):
                raise InputError(f"{flag}: {path!r} is a directory; name the files in it (e.g. {path}/*).")
            if path in matched_by:
                raise InputError(f"{flag}: {path!r} is matched by both {matched_by[path]!r} and {pattern!r}; "
                                 "name each file once.")
            matched_by[path] = pattern
            files.append(path)
    if all(file_layer.getsize(f) == 0 for f in files):
        raise InputError(f"{flag}: {', '.join(files)} {'is' if len(files) == 1 else 'are'} empty.")
    return files
