"""Device choice, the build-once cache and input validation."""

import os
import subprocess
import sys

import numpy as np
import pytest

from icml25_core import (
    as_generator,
    build_once,
    check_array,
    check_choice,
    check_scalar,
    select_device,
)
from icml25_core.environment import environment


def test_select_device():
    assert select_device("cpu") == "cpu"
    assert select_device() in ("cuda", "mps", "cpu")
    assert select_device("auto") == select_device(None) == select_device()
    with pytest.raises(ValueError, match="preference must be 'auto' or one of"):
        select_device("tpu")
    with pytest.raises(TypeError, match=r"preference must be a device name.*'cuda:7'"):
        select_device(7)


def test_select_device_reads_the_environment(monkeypatch):
    monkeypatch.setenv("ICML25_DEVICE", "cpu")
    assert select_device("auto") == "cpu"
    monkeypatch.setenv("ICML25_DEVICE", "tpu")
    with pytest.raises(ValueError, match="got 'tpu'"):
        select_device("auto")


def _write(folder):
    (folder / "weights.txt").write_text("trained")


def test_build_once_builds_once_and_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML25_CACHE", str(tmp_path))
    calls = []

    def builder(folder):
        calls.append(folder)
        assert not any(folder.iterdir()), "the builder gets an empty folder"
        _write(folder)

    path = build_once("model-a", builder, package="pkg")
    assert path == tmp_path / "pkg" / "model-a"
    assert (path / "weights.txt").read_text() == "trained"
    assert calls[0] != path, "the builder writes into a temporary folder, not the final one"
    assert build_once("model-a", builder, package="pkg") == path
    assert len(calls) == 1


def test_build_once_interrupted_build_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML25_CACHE", str(tmp_path))

    def half(folder):
        (folder / "part").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_once("model-b", half)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == []
    (tmp_path / ".model-b.building-killed").mkdir()  # a build killed before its cleanup
    # a folder that some older, non-atomic writer left behind is not taken as complete
    (tmp_path / "model-b").mkdir()
    (tmp_path / "model-b" / "part").write_text("half")
    path = build_once("model-b", _write)
    assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == ["weights.txt"]
    assert not list(tmp_path.glob(".model-b.building-*")), "stale build folders are removed"


_KILLED_BUILD = """
import sys, time
from pathlib import Path
from icml25_core import build_once

def builder(folder):
    (folder / "part").write_text("half")
    Path(sys.argv[1]).write_text("building")  # the parent kills us now
    time.sleep(600)

build_once("model-k", builder)
"""


def test_build_once_killed_mid_build_is_rebuilt_by_the_next_process(tmp_path, monkeypatch):
    from icml25_core.testing import kill_when_marked

    cache = tmp_path / "c"
    env = {**os.environ, "ICML25_CACHE": str(cache)}
    kill_when_marked(_KILLED_BUILD, tmp_path / "mark", str(tmp_path / "mark"), env=env)
    assert not (cache / "model-k").exists(), "a killed build must not look complete"
    assert list(cache.glob(".model-k.building-*")), "the killed build's folder is left behind"
    monkeypatch.setenv("ICML25_CACHE", str(cache))
    path = build_once("model-k", _write, timeout=30)  # the dead process's lock is free
    assert (path / "weights.txt").read_text() == "trained"
    assert not list(cache.glob(".model-k.building-*")), "the stale build folder is removed"


_SLOW_BUILD = """
import sys, time
from pathlib import Path
from icml25_core import build_once

def builder(folder):
    with open(sys.argv[1], "a") as fh:
        fh.write("built\\n")
    time.sleep(1.0)
    (folder / "weights.txt").write_text("trained")

print(build_once("m", builder))
"""


def test_build_once_second_process_waits_instead_of_building(tmp_path):
    log = tmp_path / "log.txt"
    env = {**os.environ, "ICML25_CACHE": str(tmp_path / "c")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SLOW_BUILD, str(log)], env=env, stdout=subprocess.PIPE
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0].decode().strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] == str(tmp_path / "c" / "m")
    assert log.read_text() == "built\n", "exactly one process built the entry"


def test_build_once_rejects_bad_names(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML25_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="name must be a folder name"):
        build_once("../escape", _write)


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (np.array([1.0, np.nan]), {}, "x must be finite"),
        (np.array([1.0, -1.0]), {"nonnegative": True}, "x must be non-negative"),
        (np.array([1.0, 0.0]), {"positive": True}, "x must be strictly positive"),
        (np.ones((2, 3)), {"ndim": 1}, "x must be 1-dimensional"),
        (np.ones((2, 3)), {"shape": (2, 4)}, r"x must have shape \(2, 4\), got \(2, 3\)"),
        (np.ones((2, 3)), {"shape": (None, 4)}, r"x must have shape \('any', 4\)"),
        (np.ones(0), {}, "x must not be empty"),
    ],
)
def test_check_array_errors(x, kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_array(x, "x", **kwargs)


def test_check_array_types():
    with pytest.raises(TypeError, match="x must be numeric"):
        check_array(np.array(["a"]), "x")
    x = np.ones(3)
    assert check_array(x, "x", shape=(3,), positive=True) is x


def test_check_array_torch():
    torch = pytest.importorskip("torch")
    t = torch.ones(3)
    assert check_array(t, "t", ndim=1) is t
    with pytest.raises(ValueError, match="t must be finite"):
        check_array(torch.tensor([1.0, float("inf")]), "t")


def test_check_scalar_and_choice():
    assert check_scalar(0.5, "reg", low=0.0, low_inclusive=False) == 0.5
    with pytest.raises(ValueError, match="reg must be > 0"):
        check_scalar(0.0, "reg", low=0.0, low_inclusive=False)
    with pytest.raises(ValueError, match="p must be <= 1"):
        check_scalar(2.0, "p", high=1.0)
    with pytest.raises(TypeError, match="k must be an integer"):
        check_scalar(1.5, "k", integer=True)
    with pytest.raises(TypeError, match="flag must be a real number"):
        check_scalar(True, "flag")
    with pytest.raises(ValueError, match="mode must be one of"):
        check_choice("x", "mode", ["a", "b"])


def test_as_generator_checks_the_seed():
    # same integer, same stream; a Generator is passed through so its stream continues
    assert as_generator(3).random() == np.random.default_rng(3).random()
    rng = np.random.default_rng(0)
    assert as_generator(rng) is rng
    assert isinstance(as_generator(None), np.random.Generator)
    assert as_generator(np.int64(5)).random() == np.random.default_rng(5).random()
    for bad in ("abc", 1.5, True, np.random.RandomState(0)):
        with pytest.raises(TypeError, match="rng must be None, a non-negative integer"):
            as_generator(bad, "rng")
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        as_generator(-1)


def test_track_yields_every_item_in_order():
    from icml25_core import track

    assert list(track(range(5), "counting")) == [0, 1, 2, 3, 4]
    assert list(track(iter("ab"), "letters")) == ["a", "b"]


def test_line_panels_draws_bands(tmp_path):
    from icml25_core import line_panels

    line = {"x": [1, 2, 3], "y": [3.0, 2.0, 1.0], "lo": [2.5, 1.5, 0.5], "hi": [3.5, 2.5, 1.5]}
    path = line_panels(
        {"a": [line, {"x": [1, 2], "y": [1, 1], "label": "flat"}]},
        tmp_path / "p.png",
        xlabel="x",
        ylabel="y",
        logy=True,
    )
    assert path.exists() and path.stat().st_size > 1000
    with pytest.raises(KeyError):
        line_panels(
            {"a": [{"x": [1], "lo": [0], "hi": [1]}]}, tmp_path / "q.png", xlabel="", ylabel=""
        )


def test_grouped_bars_draws_and_checks_lengths(tmp_path):
    from icml25_core import grouped_bars

    path = grouped_bars(
        {"a": [0.1, 0.5], "b": [0.3, 0.2]}, ["g1", "g2"], tmp_path / "bars.png", ylabel="acc"
    )
    assert path.stat().st_size > 0
    with pytest.raises(ValueError, match="one per group"):
        grouped_bars({"a": [0.1]}, ["g1", "g2"], tmp_path / "x.png", ylabel="acc")


def test_cache_dir_honours_the_environment(tmp_path, monkeypatch):
    from icml25_core import cache_dir

    monkeypatch.setenv("ICML25_CACHE", str(tmp_path))
    path = cache_dir("method", "model")
    assert path == tmp_path / "method" / "model" and path.is_dir()


def test_as_float_array_refuses_complex_and_accepts_array_likes():
    from icml25_core import as_float_array

    pd = pytest.importorskip("pandas")

    with pytest.raises(TypeError, match="X must be real, got complex"):
        as_float_array(np.array([1 + 2j, 3 + 0j]), "X")
    with pytest.raises(TypeError, match="X must be numeric"):
        as_float_array(["a", "b"], "X")
    with pytest.raises(ValueError, match="X must be finite"):
        as_float_array([1.0, np.nan], "X")
    frame = pd.DataFrame({"a": [1, 2], "b": [0.5, 1.5]})
    out = as_float_array(frame, "X", ndim=2)
    assert out.dtype == np.float64 and out.tolist() == [[1.0, 0.5], [2.0, 1.5]]
    with pytest.raises(TypeError, match="X must be real"):
        check_array(np.ones(3, dtype=complex), "X")


def test_available_memory_and_check_memory(monkeypatch):
    import icml25_core.validation as validation
    from icml25_core import available_memory, check_memory

    free = available_memory()
    assert free is None or free > 0
    check_memory(1024, "n")  # a kilobyte always fits
    monkeypatch.setattr(validation, "available_memory", lambda device="cpu": 2**30)
    check_memory(2**29, "batch_size")
    with pytest.raises(
        ValueError, match=r"batch_size: .* at least 2\.0 GiB \(the batch\), more than the 1\.0 GiB"
    ):
        check_memory(2**31, "batch_size", what="the batch")
    monkeypatch.setattr(validation, "available_memory", lambda device="cpu": None)
    check_memory(2**60, "n")  # unknown: nothing is checked


def test_environment_records_the_cpu_and_its_bf16_support():
    import torch

    env = environment("torch")
    assert isinstance(env["cpu"], str) and env["cpu"]
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["cpu_bf16"] in ("True", "False", "unknown")
    assert env["torch"] == torch.__version__


def test_pinned_numerics_fixes_the_threads_and_restores_them():
    import torch
    from threadpoolctl import threadpool_info

    from icml25_core import machine_line, pinned_numerics

    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(2)
    try:
        with pinned_numerics(threads=1):
            assert torch.get_num_threads() == 1
            assert torch.are_deterministic_algorithms_enabled()
            assert torch.is_deterministic_algorithms_warn_only_enabled()
            assert all(p["num_threads"] == 1 for p in threadpool_info())
            env = environment()
            assert (env["torch_threads"], env["deterministic"]) == ("1", "True")
            assert "1 thread(s)" in machine_line()
        assert torch.get_num_threads() == 2
        assert torch.are_deterministic_algorithms_enabled() == det
    finally:
        torch.set_num_threads(threads)
    assert environment()["cpu"] in machine_line()
    with (
        pytest.raises(ValueError, match="threads must be >= 1"),
        pinned_numerics(threads=0),
    ):
        pass


def test_one_thread_dot_does_not_depend_on_the_thread_count_it_replaces():
    # the reason for the pin: a dot product split over 2 threads adds in another order
    # (here 999,787.25 on 2 threads vs 999,786.81 on 1); pinned, the order is one
    import torch

    from icml25_core import pinned_numerics

    x = torch.randn(1_000_003, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    threads = torch.get_num_threads()
    sums = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            with pinned_numerics(threads=1):
                sums.append((x @ x).item())
    finally:
        torch.set_num_threads(threads)
    assert sums[0] == sums[1]
