"""Applies a rename table to a set of named arrays, strictly.

A table is a sequence of rules `(pattern, template[, transform])`: the first pattern that
fully matches a source name gives the target name; `transform` names the rule's one shape
change (`TRANSFORMS`). Nothing else is reshaped: an array whose shape still differs from its
target is reported. Every target variable must be assigned exactly once: missing, unexpected,
duplicated or misshaped variables stop the conversion with the full list (`MatchReport`)
before anything is assigned.
"""

import dataclasses
import re

import numpy as np

from albert_tf.storage.report import CheckpointMismatchError, MatchReport


class ConversionError(CheckpointMismatchError):
    """A conversion that would not assign every target variable exactly once with its
    shape (a CheckpointMismatchError, hence a ValueError)."""


class _NotApplicable(Exception):
    """A transform does not apply to the array's shape (reported as a shape mismatch)."""


def _transpose(array, target_shape):
    if array.ndim != 2:
        raise _NotApplicable(f"transpose needs a 2-D array, got {list(array.shape)}")
    return array.T


def _merge_last_two(array, target_shape):
    if array.ndim < 2:
        raise _NotApplicable(f"merge_heads needs at least 2 axes, got {list(array.shape)}")
    return array.reshape(array.shape[:-2] + (array.shape[-2] * array.shape[-1],))


def _split_last(array, target_shape):
    if target_shape is None or len(target_shape) < 2:
        raise _NotApplicable("split_heads takes the head axes from a target of at least 2 axes")
    heads, size = target_shape[-2:]
    if array.ndim < 1 or array.shape[:-1] != tuple(target_shape[:-2]) or array.shape[-1] != heads * size:
        raise _NotApplicable(f"split_heads cannot split {list(array.shape)} into {list(target_shape)}")
    return array.reshape(array.shape[:-1] + (heads, size))


def _merge_first_two(array, target_shape):
    if array.ndim < 2:
        raise _NotApplicable(f"merge_heads_first needs at least 2 axes, got {list(array.shape)}")
    return array.reshape((array.shape[0] * array.shape[1],) + array.shape[2:])


def _split_first(array, target_shape):
    if target_shape is None or len(target_shape) < 2:
        raise _NotApplicable("split_heads_first takes the head axes from a target of at least 2 axes")
    heads, size = target_shape[:2]
    if array.ndim < 1 or array.shape[1:] != tuple(target_shape[2:]) or array.shape[0] != heads * size:
        raise _NotApplicable(f"split_heads_first cannot split {list(array.shape)} into {list(target_shape)}")
    return array.reshape((heads, size) + array.shape[1:])


# name -> (fn(array, target_shape or None) -> array, the name of its inverse); the splits take
# the head count and size N, D from the target's shape
TRANSFORMS = {
    "transpose": (_transpose, "transpose"),  # [out, in] <-> [in, out]: torch Linear against Keras kernels
    # [..., N, D] -> [..., N*D]: keras-hub per-head query/key/value kernels [H, N, D], biases [N, D]
    "merge_heads": (_merge_last_two, "split_heads"),
    "split_heads": (_split_last, "merge_heads"),
    # [N, D, ...] -> [N*D, ...]: keras-hub attention output kernel [N, D, H] -> [H, H]
    "merge_heads_first": (_merge_first_two, "split_heads_first"),
    "split_heads_first": (_split_first, "merge_heads_first"),
}


def check_transform(name):
    """Returns `name` when it is None or a known transform; raises ValueError otherwise."""
    if name is not None and name not in TRANSFORMS:
        raise ValueError(f"unknown transform {name!r} in the rename table (known: {', '.join(sorted(TRANSFORMS))}).")
    return name


def inverse_transform(name):
    """The transform undoing `name` (None for None)."""
    return None if check_transform(name) is None else TRANSFORMS[name][1]


@dataclasses.dataclass(frozen=True)
class Renamed:
    """One source array on its way to a target: where it came from and its rule's transform."""

    source_name: str
    array: object
    transform: str = None


def _compile(table):
    compiled = []
    for rule in table:
        transform = check_transform(rule[2] if len(rule) > 2 else None)
        compiled.append((re.compile(rule[0]), rule[1], transform))
    return compiled


def _rename(source, table, skip=()):
    compiled = _compile(table)
    skipped = [re.compile(p) for p in skip]
    out, unmatched, duplicated = {}, [], []
    for name in sorted(source):
        if any(s.fullmatch(name) for s in skipped):
            continue
        for pattern, template, transform in compiled:
            if pattern.fullmatch(name):
                target = pattern.sub(template, name)
                if target in out:
                    duplicated.append(f"{out[target].source_name} and {name} -> {target}")
                out[target] = Renamed(name, source[name], transform)
                break
        else:
            unmatched.append(name)
    if duplicated:
        raise ConversionError("target variables assigned twice (the rename table maps two sources to one name):\n  "
                              + "\n  ".join(duplicated))
    return out, unmatched


def rename(source, table, skip=()):
    """Renames `source` (name -> array) through `table` (module docstring), dropping the
    names `skip`'s patterns match; transforms are applied later (`match_shapes`,
    `apply_transforms`). Returns {target name: Renamed}. Raises ConversionError listing
    the names no rule matches and targets hit twice; ValueError for an unknown transform."""
    out, unmatched = _rename(source, table, skip)
    if unmatched:
        raise ConversionError("source variables no rule maps:\n  " + "\n  ".join(unmatched))
    return out


def _apply(renamed, target_shape):
    """(array after the rule's transform, None) or (the untouched array, why not)."""
    array = np.asarray(renamed.array)
    if renamed.transform is None:
        return array, None
    try:
        return TRANSFORMS[renamed.transform][0](array, target_shape), None
    except _NotApplicable as e:
        return array, str(e)


def apply_transforms(renamed):
    """dict target -> array after each rule's transform, for targets without a model to
    check against (e.g. writing the release's TF1 names).

    Raises:
        ConversionError: a transform does not apply (e.g. a split without target shape).
    """
    values, problems = {}, []
    for target, item in sorted(renamed.items()):
        array, why = _apply(item, None)
        if why:
            problems.append(f"{item.source_name} {list(np.shape(item.array))} -> {target}: {why}")
        values[target] = array
    if problems:
        raise ConversionError("transforms that do not apply:\n  " + "\n  ".join(problems))
    return values


def match_shapes(renamed, target_shapes, source="the source", unmatched=None):
    """Applies each rule's named transform and checks names and shapes against the target;
    the report (`MatchReport`) is followed by where each difference comes from.

    `renamed`: `rename`'s output; `target_shapes`: {target name: shape}; `source` names what
    was read; `unmatched`: {name: array} no rule maps (reported as not in the model).
    Returns {target name: array of the target's shape}; ConversionError listing missing,
    unexpected and misshaped variables.
    """
    target_shapes = {t: tuple(int(d) for d in s) for t, s in target_shapes.items()}
    values, found, why_not, details = {}, {}, {}, []
    for target, item in renamed.items():
        array, why = _apply(item, target_shapes.get(target))
        values[target], found[target] = array, array.shape
        if why:
            why_not[target] = why
    for name, array in (unmatched or {}).items():
        found[name] = np.shape(array)
    report = MatchReport.compare(target_shapes, found, source)
    if report.ok:
        return values
    for name in report.unexpected:
        if name in renamed:
            item = renamed[name]
            details.append(f"{item.source_name} {list(np.shape(item.array))} -> {name}: the model has no such variable")
        else:
            details.append(f"{name}: no rule of the rename table maps it")
    for name, got, want in report.mismatched:
        item = renamed[name]
        step = f"transform {item.transform}" if item.transform else "no transform"
        line = (f"{item.source_name} {list(np.shape(item.array))}, {step} -> {list(got)}; "
                f"target {name} {list(want)}")
        details.append(line + (f" ({why_not[name]})" if name in why_not else ""))
    message = report.format()
    if details:
        message += "\n  where the differences come from:\n    " + "\n    ".join(details)
    raise ConversionError(message)


def model_variables(model):
    """Keras variable path -> variable (each variable once)."""
    return variables_by_path(model.weights)


def variables_by_path(weights):
    """Keras variable path -> variable of a list of variables (each once)."""
    variables = {}
    for v in weights:
        variables.setdefault(v.path, v)
    return variables


def convert_arrays(source, table, target_shapes, skip=(), label="the source"):
    """Renames `source` through `table`, applies the named transforms and checks the
    result against `target_shapes`; returns dict target name -> array.

    Raises:
        ConversionError: everything that does not match, in one report.
    """
    renamed, unmatched = _rename(source, table, skip)
    return match_shapes(renamed, target_shapes, label, {n: source[n] for n in unmatched})


def assign_to_model(model, source, table, skip=(), label="the source"):
    """Renames, transforms, checks, then assigns `source` arrays to `model`'s variables
    (by Keras path). Nothing is assigned unless everything matches."""
    return assign_to_variables(model.weights, source, table, skip, label)


def assign_to_variables(weights, source, table, skip=(), label="the source"):
    """`assign_to_model` for a list of variables (e.g. one head of a model)."""
    variables = variables_by_path(weights)
    values = convert_arrays(source, table, {p: v.shape for p, v in variables.items()}, skip, label)
    for path, value in values.items():
        variables[path].assign(np.asarray(value).astype(variables[path].dtype))
    return sorted(values)
