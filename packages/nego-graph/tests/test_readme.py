"""The README's quick start runs as written."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_quick_start_runs():
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert 0.0 <= scope["trainer"].accuracy(scope["test"]) <= 1.0
    assert scope["trainer"].explain(scope["data"].test[0]).ndim == 1
