"""Loads albert_tf's SavedModels as a model server has them, with tensorflow and tensorflow_text
alone, and checks that every signature answers what it answered where it was written.

    python tests/serving_check.py DIRECTORY

DIRECTORY holds the exports and reference.json (tests/serving_exports.py writes both). For each
export: its signatures are the ones listed; each call of a signature on the recorded inputs
gives outputs of the recorded names, dtypes and shapes, strings and integers equal, floats
within RTOL/ATOL; each recorded bad request fails with an InvalidArgumentError naming the
recorded word. (Floats within RTOL and ATOL, relative and absolute: the recorded numbers come
from the machine that wrote them, and another CPU's kernels may round otherwise.) Then the
imports: every top-level module this process holds at the end was already in sys.modules right
after the imports below (measured there: what `import tensorflow` and `import tensorflow_text`
load themselves) or is in Python's standard library, and albert_tf never is. TensorFlow 2.20
and 2.21 import Keras themselves, and Keras whatever it finds installed (jax, scipy, matplotlib
in the suite's venvs): that is the baseline; loading and calling the exports may add nothing to
it. Prints one line per export; exit status 1 and every difference on stderr when something
differs.

Imports: json, sys, numpy, tensorflow and tensorflow_text only.
"""

import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text

IMPORTED_BY_TENSORFLOW = {name.partition(".")[0] for name in sys.modules}
RTOL, ATOL = 1e-5, 1e-5


def decode(record):
    """reference.json's {"dtype", "shape", "value"} -> a numpy array (strings as bytes)."""
    if record["dtype"] == "string":
        value = np.array([bytes.fromhex(v) for v in record["value"]], object)
    else:
        value = np.array(record["value"], record["dtype"])
    return value.reshape(record["shape"])


def compare(where, actual, expected, problems):
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        problems.append(f"{where}: shape {actual.shape}, expected {expected.shape}")
    elif expected.dtype == object or expected.dtype.kind in "iub":
        if actual.dtype != expected.dtype or not np.array_equal(actual, expected):
            problems.append(f"{where}: {actual.tolist()!r} ({actual.dtype}), expected {expected.tolist()!r} "
                            f"({expected.dtype})")
    elif actual.dtype != expected.dtype or not np.allclose(actual, expected, rtol=RTOL, atol=ATOL):
        worst = float(np.max(np.abs(actual.astype("float64") - expected))) if actual.dtype == expected.dtype else None
        problems.append(f"{where}: {actual.dtype} differs from the {expected.dtype} expected (largest difference "
                        f"{worst})")


def check(directory):
    """Every difference found (strings); prints a line per export checked."""
    with open(f"{directory}/reference.json", encoding="utf-8") as f:
        reference = json.load(f)
    problems, loaded = [], {}
    for name, export in reference["exports"].items():
        loaded[name] = model = tf.saved_model.load(f"{directory}/{name}")
        if sorted(model.signatures) != export["signatures"]:
            problems.append(f"{name}: signatures {sorted(model.signatures)}, expected {export['signatures']}")
            continue
        for signature, call in export["calls"].items():
            inputs = {k: tf.constant(decode(v)) for k, v in call["inputs"].items()}
            outputs = model.signatures[signature](**inputs)
            if sorted(outputs) != sorted(call["outputs"]):
                problems.append(f"{name}.{signature}: outputs {sorted(outputs)}, expected {sorted(call['outputs'])}")
                continue
            for key, expected in call["outputs"].items():
                compare(f"{name}.{signature}[{key!r}]", outputs[key].numpy(), decode(expected), problems)
        print(f"{name}: {', '.join(export['signatures'])}: {len(export['calls'])} checked")
    for bad in reference["errors"]:
        where = f"{bad['export']}.{bad['signature']} (a request that must fail)"
        try:
            loaded[bad["export"]].signatures[bad["signature"]](
                **{k: tf.constant(decode(v)) for k, v in bad["inputs"].items()})
            problems.append(f"{where}: answered")
        except tf.errors.InvalidArgumentError as e:
            if bad["error"] not in e.message:
                problems.append(f"{where}: the error does not name {bad['error']!r}: {e.message[:300]}")
    added = sorted({name.partition(".")[0] for name in sys.modules} - IMPORTED_BY_TENSORFLOW
                   - set(sys.stdlib_module_names))
    if added or "albert_tf" in sys.modules:
        problems.append(f"imported besides tensorflow, tensorflow_text and the standard library: {added}")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(argv[1])
    written = json.load(open(f"{argv[1]}/reference.json", encoding="utf-8"))["written_with"]
    print(f"written with tensorflow {written['tensorflow']}, tensorflow-text {written['tensorflow_text']}; loaded "
          f"with tensorflow {tf.__version__}, tensorflow-text {tensorflow_text.__version__}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
