#!/usr/bin/env bash
# Each method package alone (ci/isolated_one.sh): a fresh venv with only its wheel and the
# core wheel (plus their PyPI dependencies); import it, run `icml25 info` and the README
# quick start there, so an undeclared dependency fails here. Two packages at a time
# (ISOLATED_JOBS), each with its share of the cores for BLAS/OpenMP, as the test workers
# (conftest.py). Needs ci/build.sh first; fails if any package fails.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ISOLATED_JOBS:-2}
share=$(($(nproc) / jobs))
share=$((share > 0 ? share : 1))
for var in OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS NUMBA_NUM_THREADS; do
    export "$var=${!var:-$share}"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ls -d packages/*/ | xargs -P "$jobs" -I{} bash ci/isolated_one.sh {} "$work"
