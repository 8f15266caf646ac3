"""Runs several invocations of one albert_tf entry point in one Python process, each as
`python -m MODULE ARGS...` would (the same flag parsing and cli.run_entry_point exit
convention), so error-path tests pay for one TensorFlow import instead of one per case.

    python tests/entry_point_cases.py MODULE NAME CASES.json RESULTS.json
    python tests/entry_point_cases.py - - CASES.json RESULTS.json

CASES.json: a list of argument lists (with MODULE and NAME "-": of [MODULE, NAME, ARGS...]
lists, several entry points in one process). RESULTS.json: a list of {"returncode", "stdout",
"stderr"} (what the entry point printed; an exception that escaped it is a traceback in
stderr and returncode 1, as the interpreter would report it).
"""

import contextlib
import importlib
import inspect
import io
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def run_case(module, name, args):
    from absl import flags

    from albert_tf import cli

    takes_values = bool(inspect.signature(module.define_flags).parameters)
    if takes_values:
        values = flags.FlagValues()
        module.define_flags(values)
    else:
        values = flags.FLAGS
        values.unparse_flags()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.parse_flags(name, [name] + list(args), values)
        except SystemExit as e:  # a flag that cannot be parsed: cli.main exits with this status
            status = e.code
        else:
            try:
                status = cli.run_entry_point(name, module.run, values)
            except BaseException:  # noqa: BLE001 (reported as the interpreter would)
                traceback.print_exc()
                status = 1
    return {"returncode": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main():
    module_name, name, cases_file, results_file = sys.argv[1:5]
    with open(cases_file, encoding="utf-8") as f:
        cases = json.load(f)
    if module_name == "-":  # several entry points: each case is [MODULE, NAME, ARGS...]
        results = []
        for module_name, name, *args in cases:
            module = importlib.import_module(module_name)
            assert inspect.signature(module.define_flags).parameters, f"{module_name} defines global FLAGS"
            results.append(run_case(module, name, args))
    else:
        module = importlib.import_module(module_name)
        if not inspect.signature(module.define_flags).parameters:
            module.define_flags()  # on the global FLAGS, once
        results = [run_case(module, name, args) for args in cases]
    with open(results_file, "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
