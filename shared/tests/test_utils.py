"""Seeding, device choice and input validation."""

import numpy as np
import pytest

from icml25_core import check_array, check_choice, check_scalar, seed_everything, select_device


def test_seed_everything_is_reproducible():
    g1, g2 = seed_everything(3), seed_everything(3)
    assert np.array_equal(g1.random(5), g2.random(5))
    seed_everything(4)
    x = np.random.random(3)  # noqa: NPY002 - global state is what is being tested
    seed_everything(4)
    assert np.array_equal(x, np.random.random(3))  # noqa: NPY002
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        seed_everything(-1)


def test_select_device():
    assert select_device("cpu") == "cpu"
    assert select_device() in ("cuda", "mps", "cpu")
    with pytest.raises(ValueError, match="preference must be one of"):
        select_device("tpu")


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


def test_track_yields_every_item_in_order():
    from icml25_core import track

    assert list(track(range(5), "counting")) == [0, 1, 2, 3, 4]
    assert list(track(iter("ab"), "letters")) == ["a", "b"]


def test_run_markdown_python(tmp_path):
    from icml25_core import run_markdown_python

    md = tmp_path / "README.md"
    md.write_text(
        "text\n```python\nx = 2\n```\nmore\n```python\ny = x * 21\n```\n```bash\nexit 1\n```\n"
    )
    assert run_markdown_python(md)["y"] == 42
    (tmp_path / "empty.md").write_text("no code")
    with pytest.raises(ValueError, match="has no"):
        run_markdown_python(tmp_path / "empty.md")


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
