"""Checkpoint conversion: rename tables and named shape transforms kept as data."""

import json


def read_json(path):
    """The JSON object in the file `path`.

    Raises:
        ValueError: naming `path`, the line and column of a syntax error and that line's
            text, or saying the file does not hold a JSON object.
        OSError: the file cannot be read.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        line = lines[e.lineno - 1].strip() if 0 < e.lineno <= len(lines) else ""
        raise ValueError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
                         + (f": {line[:200]}" if line else "")) from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object ({{...}}), found {type(value).__name__}.")
    return value
