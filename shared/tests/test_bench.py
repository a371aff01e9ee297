"""The benchmark harness."""

from pathlib import Path

import numpy as np
import pytest

from icml25_core import BenchReport, Comparison, Timing, compare, loglog_slope


def test_loglog_slope_of_power_law():
    sizes = [10, 100, 1000]
    assert loglog_slope(sizes, [3e-6 * s**2 for s in sizes]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least two sizes"):
        loglog_slope([10], [1.0])


def test_compare_interleaves_and_counts_calls():
    calls = []
    cands = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    comp = compare(cands, reference="a", repeats=3, warmup=1, memory=False)
    # warm-up a b c, then rotations a b c / b c a / c a b
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")
    assert all(len(t.times) == 3 for t in comp.timings.values())
    assert comp.ratio("a") == 1.0


def test_ratio_and_slopes_from_known_times():
    comps = [
        Comparison(
            f"n={n}",
            n,
            "ref",
            {"ref": Timing([n * 1.0]), "fast": Timing([n * 0.25, n * 0.25, 9.0 * n])},
        )
        for n in (10, 100)
    ]
    assert comps[0].ratio("fast") == pytest.approx(0.25)  # median ignores the outlier
    report = BenchReport("x", comps)
    assert report.slopes() == pytest.approx({"ref": 1.0, "fast": 1.0})
    d = report.to_dict()
    assert d["comparisons"][1]["timings"]["fast"]["ratio"] == pytest.approx(0.25)


def test_separate_sweeps_get_their_own_slopes():
    a = [Comparison(f"a{n}", n, "a", {"a": Timing([n**2])}) for n in (2, 4, 8)]
    b = [Comparison(f"b{n}", n, "b", {"b": Timing([3.0 * n])}) for n in (10, 100)]
    single = [Comparison("c", 5, "c", {"c": Timing([1.0])})]
    report = BenchReport("x", a + b + single)
    assert report.slopes() == pytest.approx({"a": 2.0, "b": 1.0})


def test_peak_memory_sees_numpy_allocations():
    comp = compare({"alloc": lambda: np.ones(2**20)}, reference="alloc", repeats=1, warmup=0)
    # the resident-set growth counts whole pages, and a few of the array's pages may have
    # been resident already (freed heap the allocator kept): 8 MiB less at most 10 %
    assert comp.timings["alloc"].peak_memory >= 0.9 * 8 * 2**20


def test_bad_reference():
    with pytest.raises(ValueError, match="reference must be one of"):
        compare({"a": lambda: None}, reference="b")


def test_peak_memory_sees_native_torch_allocations():
    torch = pytest.importorskip("torch")
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("resident-set high-water mark needs Linux /proc")

    def alloc():
        x = torch.ones(16 * 2**20 // 4)  # 16 MiB outside tracemalloc's view
        x.add_(1.0)

    comp = compare({"alloc": alloc}, reference="alloc", repeats=1, warmup=0)
    assert comp.timings["alloc"].peak_memory >= 15 * 2**20


def test_extra_from_a_mapping_the_candidates_fill_or_from_the_timings():
    seen: dict = {}

    def a():
        seen["a"] = {"iterations": 3.0}

    comp = compare({"a": a, "b": lambda: None}, reference="a", repeats=2, warmup=0, extra=seen)
    assert comp.extra == {"a": {"iterations": 3.0}}
    comp = compare(
        {"a": lambda: None},
        reference="a",
        repeats=2,
        warmup=0,
        extra=lambda timings: {n: {"calls": len(t.times)} for n, t in timings.items()},
    )
    assert comp.extra == {"a": {"calls": 2}}
    with pytest.raises(ValueError, match="which are not candidates"):
        compare({"a": lambda: None}, reference="a", repeats=1, extra={"c": {"x": 1.0}})


def test_peak_memory_is_taken_from_the_timed_runs():
    calls = []

    def alloc():
        calls.append(1)
        np.ones(2**20).sum()

    comp = compare({"alloc": alloc}, reference="alloc", repeats=2, warmup=0)
    expected_calls = 2 if Path("/proc/self/clear_refs").exists() else 3  # else one traced call
    assert len(calls) == expected_calls
    assert comp.timings["alloc"].peak_memory >= 0.9 * 8 * 2**20
