#!/usr/bin/env bash
# The JAX pretraining-step benchmark (benchmarks/jax_train_step_bench.py) on a GPU machine that
# has Python 3.12 and JAX but no TensorFlow and no network (benchmarks/README.md, "The training
# step on JAX").
#
#   bash benchmarks/jax_gpu_run.sh wheels          # here: Keras, keras-hub and their pure-Python
#                                                  # deps as Python 3.12 wheels, 16 MB, into
#                                                  # benchmarks/wheels_py312/ (git-ignored)
#   bash benchmarks/jax_gpu_run.sh run [FLAGS...]  # there: installs them beside the machine's
#                                                  # JAX (no dependencies resolved) and runs the
#                                                  # bench; results in $OUT/jax_train_step
#                                                  # (or results/bench_jax_train_step)
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=benchmarks/wheels_py312
PINS=(keras==3.15.1 keras-hub==0.32.0 absl-py==2.5.1 namex==0.1.0 optree==0.20.0 rich==15.0.0
      markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 h5py==3.16.0 packaging==26.4 regex==2026.11.19
      typing-extensions==4.15.0 tokenizers==0.23.3)

case "${1:-}" in
  wheels)
    mkdir -p "$WHEELS"
    python3 -m pip download --quiet --no-deps --python-version 3.12 --only-binary=:all: -d "$WHEELS" "${PINS[@]}"
    ls "$WHEELS"
    ;;
  run)
    shift
    PY=${PYTHON:-python3}
    SITE=$(mktemp -d)
    "$PY" -m pip install --quiet --no-deps --no-index --target "$SITE" "$WHEELS"/*.whl
    OUTPUT=${OUT:+$OUT/jax_train_step}
    export KERAS_BACKEND=jax PYTHONPATH="$SITE:$PWD"
    "$PY" -c 'import jax; print("jax", jax.__version__, jax.devices())'
    "$PY" benchmarks/jax_train_step_bench.py --output_dir="${OUTPUT:-results/bench_jax_train_step}" "$@"
    ;;
  *)
    echo "usage: bash benchmarks/jax_gpu_run.sh wheels | run [bench flags]" >&2
    exit 2
    ;;
esac
