"""The Unicode tables of the one text normalisation for the running Python: those of its
unicodedata's Unicode version (albert_tf/data/unicode_VERSION.json, package data written by
tools/make_unicode_tables.py), read by albert_tf.data.tokenization (Python) and
albert_tf.export.normalization (the graph), so the two agree on every code point
(docs/export.md).

Sets are flat tuples of sorted [start, end) code point bounds (c is in the set when
bisect_right(bounds, c) is odd); LOWER is flat (first, last, step, delta) runs.
"""

import sys
import unicodedata

from albert_tf.storage.json_files import read_json
from albert_tf.storage import files

_FOLDER = files.dirname(files.abspath(__file__))
PATH = files.join(_FOLDER, f"unicode_{unicodedata.unidata_version.replace('.', '_')}.json")
if not files.isfile(PATH):
    _HAVE = sorted(files.basename(p)[len("unicode_"):-len(".json")].replace("_", ".")
                   for p in files.glob(files.join(_FOLDER, "unicode_*.json")))
    raise ImportError(f"albert_tf has no Unicode tables for Python {sys.version.split()[0]}'s unicodedata "
                      f"{unicodedata.unidata_version} (it has {', '.join(_HAVE)}): run "
                      "python tools/make_unicode_tables.py on it")
_TABLES = read_json(PATH, f"the Unicode {unicodedata.unidata_version} tables of tools/make_unicode_tables.py",
                    "run python tools/make_unicode_tables.py")

UNICODE_VERSION = _TABLES["UNICODE_VERSION"]
COMBINING = tuple(_TABLES["COMBINING"])
DECOMPOSED = tuple(_TABLES["DECOMPOSED"])
LOWER = tuple(_TABLES["LOWER"])
CASE_IGNORABLE = tuple(_TABLES["CASE_IGNORABLE"])
CASED = tuple(_TABLES["CASED"])
BLANK = tuple(_TABLES["BLANK"])
DIGIT = tuple(_TABLES["DIGIT"])
