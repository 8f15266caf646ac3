"""The documents of create_pretraining_data's input, and the key that names each one.

Input: text files, one sentence per line, a blank line (or a file's end) between documents;
a line that is not valid UTF-8 is skipped and counted (`BadLines`), or is an error with
`strict`. A document's key is its content (`document_key`), which seeds every random draw
of its instances (docs/pretraining_data.md). Pure Python (no TensorFlow).
"""

import hashlib

from albert_tf.data.files import InputError

BAD_LINE_EXAMPLES = 20  # the summary's examples of skipped lines, the first by (file, line)


def document_key(sentences):
    """The key of a document (a sequence of sentence strings): 32 hex digits of the SHA-256
    of its UTF-8 sentences joined by newlines."""
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()[:32]


class BadLines:
    """Non-UTF-8 lines: counted, the first few kept as (file index, line, "file:line")."""

    def __init__(self, strict):
        self.strict = strict
        self.count = 0
        self.examples = []

    def add(self, path, line_number, error, file_index=0):
        where = f"{path}:{line_number}"
        if self.strict:
            raise InputError(f"{where}: not valid UTF-8 ({error.reason} at byte {error.start}); "
                             "fix the file or drop --strict_utf8 to skip such lines.")
        self.count += 1
        if len(self.examples) < BAD_LINE_EXAMPLES:
            self.examples.append((file_index, line_number, where))

    def merge(self, other):
        """Adds `other`'s counts and keeps the first examples of both by (file, line)."""
        self.count += other.count
        self.examples = sorted(self.examples + other.examples)[:BAD_LINE_EXAMPLES]
        return self

    @property
    def where(self):
        """The examples as "file:line" strings, in input order."""
        return [where for _, _, where in sorted(self.examples)]


def file_documents(f, path, bad_lines, file_index=0, progress=None):
    """Yields the documents (lists of sentence strings) of open binary file `f` (`path`
    names it in errors; `file_index`: its place in the input, for the examples' order)."""
    document = []
    for line_number, raw in enumerate(f, 1):
        if progress is not None:
            progress.bytes_read += len(raw)
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            bad_lines.add(path, line_number, e, file_index)
            continue
        if line:
            document.append(line)
        elif document:
            yield document
            document = []
    if document:
        yield document


def read_documents(paths, bad_lines, progress=None):
    """Yields the documents of every file of `paths` in turn (through the file layer)."""
    from albert_tf.storage import files

    for index, path in enumerate(paths):
        with files.open(path, "rb") as f:
            yield from file_documents(f, path, bad_lines, index, progress)
