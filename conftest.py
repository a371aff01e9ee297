"""Workspace-wide pytest set-up: with pytest-xdist, every worker gets its share of the
cores for BLAS/OpenMP (torch, numpy) instead of all of them, which would oversubscribe the
machine N times over. Set here, before any test module imports torch; and restored after
every test, since a test (or a library it calls) that raises torch's thread count makes the
workers' OpenMP teams spin against each other at every barrier (seen: a suite several
times slower than its parts)."""

import os
import sys
import warnings

import pytest

_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_share = max(1, (os.cpu_count() or 1) // _workers)
if _workers > 1:
    # numba too: its "omp" threading layer shares torch's libgomp, and scanpy's parallel
    # kernels set the OpenMP team to NUMBA_NUM_THREADS (default: every core) for torch too
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(_var, str(_share))


@pytest.fixture(autouse=True)
def _keep_the_thread_share(request):
    """After each test under xdist: torch back at the worker's share, with a warning naming
    the test that changed it."""
    yield
    torch = sys.modules.get("torch")
    if _workers > 1 and torch is not None and torch.get_num_threads() != _share:
        found = torch.get_num_threads()
        torch.set_num_threads(_share)
        warnings.warn(
            f"{request.node.nodeid} left torch at {found} threads; reset to {_share}",
            RuntimeWarning,
            stacklevel=1,
        )
