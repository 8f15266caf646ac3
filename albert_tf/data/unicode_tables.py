"""The Unicode tables of the one text normalisation for the running Python: those of its
unicodedata's Unicode version (albert_tf/data/unicode_VERSION.py, written by
tools/make_unicode_tables.py on a Python of that version).

albert_tf.data.tokenization (Python) and albert_tf.export.normalization (the graph) read them
from here. Python's `preprocess_text` normalises with its own unicodedata, so the graph takes
the tables of the same Unicode version: the two agree on every code point on each Python (3.11:
Unicode 14.0.0, 3.12: 15.0.0, 3.13: 15.1.0). Only characters a newer Unicode added or changed
normalise otherwise on another Python, in its data and its exports alike.
"""

import sys
import unicodedata

from albert_tf.data import unicode_14_0_0, unicode_15_0_0, unicode_15_1_0

_BY_VERSION = {tables.UNICODE_VERSION: tables for tables in (unicode_14_0_0, unicode_15_0_0, unicode_15_1_0)}
if unicodedata.unidata_version not in _BY_VERSION:
    raise ImportError(f"albert_tf has no Unicode tables for Python {sys.version.split()[0]}'s unicodedata "
                      f"{unicodedata.unidata_version} (it has {', '.join(_BY_VERSION)}): run "
                      "python tools/make_unicode_tables.py on it and import the file it writes here")
_TABLES = _BY_VERSION[unicodedata.unidata_version]

UNICODE_VERSION = _TABLES.UNICODE_VERSION
COMBINING = _TABLES.COMBINING
DECOMPOSED = _TABLES.DECOMPOSED
LOWER = _TABLES.LOWER
CASE_IGNORABLE = _TABLES.CASE_IGNORABLE
CASED = _TABLES.CASED
BLANK = _TABLES.BLANK
DIGIT = _TABLES.DIGIT
