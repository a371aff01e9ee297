"""Workspace-wide pytest set-up.

* With pytest-xdist, every worker gets its share of the cores for BLAS/OpenMP (torch,
  numpy) instead of all of them, which would oversubscribe the machine N times over. Set
  here, before any test module imports torch; and restored after every test, since a test
  (or a library it calls) that raises torch's thread count makes the workers' OpenMP teams
  spin against each other at every barrier (seen: a suite several times slower than its
  parts).
* The longest test files start first (``ci/test_durations.json``, each file's time in
  the last measured CI run, written by ``ci/test_times.py --write``): xdist hands a whole
  file to a worker (``--dist=loadfile``), in collection order (``--no-loadscope-reorder``;
  its default order, most tests first, put the one-test claim files last, so one worker
  ran the last long claims while the other idled). Files not in the record count as
  :data:`UNMEASURED_S`. Only the order changes, never which tests run.
* Claim tests (``@pytest.mark.claim``) run inside :func:`icml25_core.pinned_numerics`:
  one thread for torch and for the BLAS pools, torch's deterministic algorithms, so their
  figures do not depend on the machine's core count or the number of xdist workers. What
  no setting removes, the CPU's own kernels, is why their margins rest on the spread over
  seeds and kernel paths in ``ci/claim_margins.md`` (issue 77). The run's header names
  the CPU, and a failed claim test's report repeats it.
"""

import json
import os
import sys
import warnings
from pathlib import Path

import pytest

DURATIONS = Path(__file__).parent / "ci" / "test_durations.json"
#: seconds assumed for a test file the record does not have yet
UNMEASURED_S = 5.0

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
    if request.node.get_closest_marker("claim") is not None:
        return  # pinned to one thread by pytest_runtest_protocol, which restores the count
    if _workers > 1 and torch is not None and torch.get_num_threads() != _share:
        found = torch.get_num_threads()
        torch.set_num_threads(_share)
        warnings.warn(
            f"{request.node.nodeid} left torch at {found} threads; reset to {_share}",
            RuntimeWarning,
            stacklevel=1,
        )


def pytest_report_header(config):
    from icml25_core import machine_line

    return f"machine: {machine_line()}; claim tests pinned to 1 thread, deterministic algorithms"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A claim test's setup (its module's experiment fixture), call and teardown run with
    pinned numerics."""
    if item.get_closest_marker("claim") is None:
        return (yield)
    from icml25_core import pinned_numerics

    with pinned_numerics(threads=1):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed claim test names the machine it failed on."""
    report = yield
    if report.failed and item.get_closest_marker("claim") is not None:
        from icml25_core import machine_line

        report.sections.append(("machine", machine_line()))
    return report


def pytest_collection_modifyitems(config, items):
    """Test files in decreasing recorded duration; tests keep their order within a file."""
    if not DURATIONS.is_file():
        return
    seconds = json.loads(DURATIONS.read_text())
    root = config.rootpath

    def file_of(item) -> str:
        return Path(item.path).relative_to(root).as_posix()

    first = {}
    for i, item in enumerate(items):
        first.setdefault(file_of(item), i)
    items.sort(key=lambda it: (-seconds.get(file_of(it), UNMEASURED_S), first[file_of(it)]))
