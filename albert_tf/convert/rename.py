"""Applies a rename table (regex -> template) to a set of named arrays, strictly.

Every target variable must be assigned exactly once: missing, unexpected, duplicated or
wrongly shaped variables stop the conversion with the full list, before anything is
assigned or written.
"""

import re

import numpy as np


class ConversionError(ValueError):
    """A conversion that would not assign every target variable exactly once."""


def rename(source, table, skip=()):
    """Renames `source` arrays through `table`.

    Args:
        source: dict name -> array.
        table: sequence of `(pattern, template)` or `(pattern, template, transform)`; the
            first pattern that fully matches a name gives the target name
            `re.sub(pattern, template, name)`; transform "transpose" transposes the array
            (torch Linear weights are [out, in]).
        skip: patterns of source names to drop silently (optimizer slots, global_step).

    Returns:
        dict target name -> (source name, array).

    Raises:
        ConversionError: listing source names no rule matches and targets hit twice.
    """
    compiled = [(re.compile(rule[0]), rule[1], rule[2] if len(rule) > 2 else None) for rule in table]
    skipped = [re.compile(p) for p in skip]
    out, unmatched, duplicated = {}, [], []
    for name in sorted(source):
        if any(s.fullmatch(name) for s in skipped):
            continue
        for pattern, template, transform in compiled:
            if pattern.fullmatch(name):
                target = pattern.sub(template, name)
                if target in out:
                    duplicated.append(f"{out[target][0]} and {name} -> {target}")
                array = source[name]
                if transform == "transpose":
                    array = np.asarray(array).T
                elif transform is not None:
                    raise ValueError(f"unknown transform {transform!r} in the rename table")
                out[target] = (name, array)
                break
        else:
            unmatched.append(name)
    problems = []
    if unmatched:
        problems.append("source variables no rule maps:\n  " + "\n  ".join(unmatched))
    if duplicated:
        problems.append("target variables assigned twice:\n  " + "\n  ".join(duplicated))
    if problems:
        raise ConversionError("\n".join(problems))
    return out


def match_shapes(renamed, target_shapes):
    """Checks names and shapes against the target; reshapes when only the layout differs.

    A source array is reshaped (C order) to the target shape when both hold the same
    number of values, e.g. keras-hub's per-head query kernel [H, N, D] -> [H, H].

    Args:
        renamed: output of `rename`.
        target_shapes: dict target name -> shape tuple.

    Returns:
        dict target name -> np.ndarray of the target's shape.

    Raises:
        ConversionError: listing missing, unexpected and wrongly shaped variables.
    """
    missing = sorted(set(target_shapes) - set(renamed))
    unexpected = sorted(f"{renamed[t][0]} -> {t}" for t in set(renamed) - set(target_shapes))
    wrong, values = [], {}
    for target in sorted(set(renamed) & set(target_shapes)):
        source_name, array = renamed[target]
        array = np.asarray(array)
        shape = tuple(int(d) for d in target_shapes[target])
        if array.shape != shape:
            if array.size != int(np.prod(shape)):
                wrong.append(f"{source_name} {array.shape} -> {target} {shape}")
                continue
            array = array.reshape(shape)
        values[target] = array
    problems = []
    if missing:
        problems.append("target variables with no source:\n  " + "\n  ".join(missing))
    if unexpected:
        problems.append("source variables with no target:\n  " + "\n  ".join(unexpected))
    if wrong:
        problems.append("shape mismatches:\n  " + "\n  ".join(wrong))
    if problems:
        raise ConversionError("\n".join(problems))
    return values


def model_variables(model):
    """Keras variable path -> variable (each variable once)."""
    variables = {}
    for v in model.weights:
        variables.setdefault(v.path, v)
    return variables


def assign_to_model(model, source, table, skip=()):
    """Renames, checks, then assigns `source` arrays to `model`'s variables (by path)."""
    variables = model_variables(model)
    values = match_shapes(rename(source, table, skip), {p: v.shape for p, v in variables.items()})
    for path, value in values.items():
        variables[path].assign(value.astype(variables[path].dtype))
    return sorted(values)
