#!/usr/bin/env bash
# Creates benchmarks/.peers-venv: the Hugging Face transformers (PyTorch, CPU) peer of
# benchmarks/memory_bench.py (its hf cells), kept apart from albert_tf's own environment (it is never a
# dependency of albert_tf or of its tests).
#
#     bash benchmarks/make_peers_venv.sh            # then: python benchmarks/memory_bench.py
#     PYTHON=python3.11 VENV=/elsewhere bash benchmarks/make_peers_venv.sh
#
# torch 2.13.0 is the CPU wheel this machine keeps on disk (pip takes it there; another
# torch release would download a CUDA build of several GB). transformers and sentencepiece
# come from PyPI.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3.11}"
VENV="${VENV:-$HERE/.peers-venv}"
TORCH="${TORCH:-torch==2.13.0}"
TRANSFORMERS="${TRANSFORMERS:-transformers==5.23.0}"

if ! command -v "$PYTHON" >/dev/null; then
    echo "make_peers_venv.sh: $PYTHON not found; set PYTHON=/path/to/python3.11" >&2
    exit 2
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "$TORCH"
"$VENV/bin/python" -m pip install --quiet "$TRANSFORMERS" sentencepiece protobuf  # protobuf: reading the .model
"$VENV/bin/python" - <<'PY'
import sys, torch, transformers, sentencepiece
print(f"peers venv ready: {sys.prefix}: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"sentencepiece {sentencepiece.__version__}")
PY
