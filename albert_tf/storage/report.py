"""The checkpoint-matching report: what a source (checkpoint, converted file) has against
what a model expects, by variable name. Every init_checkpoint loader and every converter
builds one and raises it when it is not clean.

    report = MatchReport.compare(expected={name: shape}, found={name: shape},
                                 source="--init_checkpoint=runs/base/ckpt-100")
    report.raise_if_mismatched()       # CheckpointMismatchError listing every difference

Pure Python: no TensorFlow, so entry points can import and catch the error early.
"""

import dataclasses


class CheckpointMismatchError(ValueError):
    """A checkpoint or converted file does not match the model; the message lists every
    missing, unexpected and mis-shaped variable by name."""


def _shape(s):
    return tuple(int(d) for d in s)


@dataclasses.dataclass(frozen=True)
class MatchReport:
    """Missing, unexpected and mis-shaped variables of `source` against a model.

    Attributes:
        source: what was read (a flag and path), named in the message.
        missing: names the model has and the source lacks.
        unexpected: names the source has and the model lacks.
        mismatched: (name, source shape, model shape) for names in both.
        matched: how many names agree in name and shape.
    """

    source: str
    missing: tuple = ()
    unexpected: tuple = ()
    mismatched: tuple = ()
    matched: int = 0

    @classmethod
    def compare(cls, expected, found, source, ignore_unexpected=()):
        """Builds the report from {name: shape} of the model (`expected`) and of the source
        (`found`). Names in `ignore_unexpected` (e.g. optimizer slots) are not reported."""
        expected = {n: _shape(s) for n, s in expected.items()}
        found = {n: _shape(s) for n, s in found.items()}
        missing = tuple(sorted(set(expected) - set(found)))
        unexpected = tuple(sorted(n for n in set(found) - set(expected) if n not in set(ignore_unexpected)))
        mismatched = tuple(sorted((n, found[n], expected[n]) for n in set(found) & set(expected)
                                  if found[n] != expected[n]))
        matched = len(set(found) & set(expected)) - len(mismatched)
        return cls(source, missing, unexpected, mismatched, matched)

    @property
    def ok(self):
        return not (self.missing or self.unexpected or self.mismatched)

    def format(self, limit=None):
        """The report as text: one heading line, then one line per kind of difference."""
        def names(items):
            items = list(items)
            shown = items if limit is None else items[:limit]
            more = len(items) - len(shown)
            return ", ".join(shown) + (f", ... ({more} more)" if more > 0 else "")

        lines = [f"{self.source} does not match the model ({self.matched} variables match):" if not self.ok
                 else f"{self.source} matches the model ({self.matched} variables)."]
        if self.missing:
            lines.append(f"  missing from the source ({len(self.missing)}): {names(self.missing)}")
        if self.unexpected:
            lines.append(f"  not in the model ({len(self.unexpected)}): {names(self.unexpected)}")
        if self.mismatched:
            lines.append(f"  shape mismatches ({len(self.mismatched)}): "
                         + names(f"{n}: source {list(a)}, model {list(b)}" for n, a, b in self.mismatched))
        return "\n".join(lines)

    def raise_if_mismatched(self):
        """Raises CheckpointMismatchError with `format()` unless the report is clean."""
        if not self.ok:
            raise CheckpointMismatchError(self.format())
        return self
