#!/usr/bin/env bash
# One command for a GPU: the real-GPU tests, the suite with the simulator off, the benchmark
# against PyTorch/CuPy and the demos, under benchmarks/results/<date>-<device>/ (resumable).
# `--smoke`: every step in its smallest form on Numba's simulator. Options: gpu_run.py --help.
# The interpreter: $PYTHON, else the repository's .venv, else python3.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi
exec "$PYTHON" "$root/benchmarks/gpu_run.py" "$@"
