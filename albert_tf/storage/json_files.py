"""The one JSON reader: every JSON and JSON-lines file albert_tf reads comes through here,
and every problem with one is worded alike, naming the file (line and column), what it
should be and what to do ("c.json:3:2: not valid JSON (...): oops; expected an
albert_config.json (...): fix or replace the file."):

    config = read_json(path, "an albert_config.json (the model's settings)")
    for number, record in read_json_lines("out/metrics.jsonl", "a metrics.jsonl record"): ...

Every file holds JSON objects (dicts); ".gz" is read gzip-compressed, a URL through the file
layer. The error is `JsonFileError` (a ValueError: exit status 2), or the room's own `error`.
"""

import gzip
import json
import os

from albert_tf.storage import files

FIX = "fix or replace the file"


class JsonFileError(ValueError):
    """A JSON file that is missing, not JSON or not an object; the message names the file."""


def _text(path, what, error):
    if not files.isfile(path):
        raise error(f"{path}: no such file (it does not exist or is not a file); expected {what}.")
    data = files.read_bytes(path)
    if path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise error(f"{path}: not a gzip file ({e}); expected {what}, gzip-compressed: {FIX}.") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start}); save the file as UTF-8.") \
            from None


def _excerpt(line, column):
    """The text around `column` (1-based) of `line`, at most 80 characters."""
    start = max(0, column - 61)
    end = column + 19
    piece = line[start:end].strip()
    return ("..." if start else "") + piece + ("..." if end < len(line.rstrip()) else "")


def _parse(text, where, line, what, fix, error):
    """json.loads(text); `where` is "path" (a whole file) or "path:N" (line N of one)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        lines = text.split("\n")
        excerpt = _excerpt(lines[e.lineno - 1], e.colno) if 0 < e.lineno <= len(lines) else ""
        place = f"{where}:{e.colno}" if line else f"{where}:{e.lineno}:{e.colno}"
        raise error(f"{place}: not valid JSON ({e.msg})" + (f": {excerpt}" if excerpt else "")
                    + f"; expected {what}: {fix}.") from None
    if not isinstance(value, dict):
        found = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
            type(value), "null")
        raise error(f"{where}: a JSON {found}, not an object; expected {what}: {fix}.")
    return value


def read_json(path, what="a JSON object", fix=FIX, error=JsonFileError):
    """The JSON object (a dict) in file `path`; `what` the file should be and `fix` what to
    do, for the messages. Raises `error`: no such file, not UTF-8, empty, not JSON (line and
    column), not an object."""
    path = os.fspath(path)
    text = _text(path, what, error)
    if not text.strip():
        raise error(f"{path}: the file is empty; expected {what}: {fix}.")
    return _parse(text, path, None, what, fix, error)


def read_json_lines(path, what="a JSON object", fix=FIX, error=JsonFileError):
    """[(line number, object)] of JSON-lines file `path`: one JSON object a line, blank
    lines skipped ([] for a file of none). Arguments and errors as `read_json`'s, `what`
    being what one line should be; a line's error names `path:line:column`."""
    path = os.fspath(path)
    lines = _text(path, what, error).split("\n")
    return [(number, _parse(line, f"{path}:{number}", number, what, fix, error))
            for number, line in enumerate(lines, 1) if line.strip()]
