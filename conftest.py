"""Workspace-wide pytest set-up: with pytest-xdist, every worker gets its share of the
cores for BLAS/OpenMP (torch, numpy) instead of all of them, which would oversubscribe the
machine N times over. Set here, before any test module imports torch."""

import os

_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    _share = str(max(1, (os.cpu_count() or 1) // _workers))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, _share)
