"""The real public data beside the project (`../shared/data/real`, its SOURCES.md says what
each file is): official SQuAD/GLUE/RACE dev files and the release's 30k SentencePiece model.

`real_path("squad/dev-v1.1.json")` gives the file's path. Where the folder is missing, the
test is skipped on a developer's machine and fails under CI=true (CI has it beside the
checkout). Never copy any of it into the project.
"""

import os

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
REAL = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "real"))
SPM_30K = "albert/30k-clean.model"


def real_path(relative):
    """The path of `relative` under ../shared/data/real; skips (fails under CI=true) when missing."""
    path = os.path.join(REAL, relative)
    if not os.path.exists(path):
        message = f"real data {path} is missing (see ../shared/data/real/SOURCES.md)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
