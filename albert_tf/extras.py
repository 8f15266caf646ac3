"""The optional parts of albert_tf: each module below comes with an extra of pyproject.toml,
and a function that needs it imports it here, so that without it the caller learns what to install:

    keras_hub = extras.require("keras_hub", "--from=keras_hub")

`require(module, purpose)` returns the imported module; when its top-level package is not
installed it raises MissingExtraError, an ImportError that is also a ValueError (so a command
exits 2 with `NAME: error: PURPOSE needs PACKAGE, which is not installed: pip install
'albert_tf[EXTRA]'.`). This module imports nothing of albert_tf (any room may use it).
"""

import importlib

# top-level module -> (its pip package, the extra of pyproject.toml that installs it)
EXTRAS = {
    "keras_hub": ("keras-hub", "convert"),
    "tokenizers": ("tokenizers", "convert"),
    "safetensors": ("safetensors", "convert"),
    "ai_edge_litert": ("ai-edge-litert", "litert"),
    "apache_beam": ("apache-beam", "beam"),
    "tensorflow_hub": ("tensorflow-hub", "hub"),
    "tf_keras": ("tf-keras", "hub"),
}


class MissingExtraError(ImportError, ValueError):
    """An optional package is not installed; the message names the extra that installs it."""


def require(module, purpose):
    """`import module` (dotted names too): the module, or MissingExtraError naming the extra
    of its top-level package (EXTRAS) when that package is missing. `purpose`: what needs
    it, as the user asked for it (a flag, a command)."""
    top = module.partition(".")[0]
    package, extra = EXTRAS[top]
    try:
        importlib.import_module(top)
    except ModuleNotFoundError as e:
        if e.name != top:
            raise  # a package it needs in turn is missing: its own message says which
        raise MissingExtraError(f"{purpose} needs {package}, which is not installed: "
                                f"pip install 'albert_tf[{extra}]'.", name=top) from None
    return importlib.import_module(module)
