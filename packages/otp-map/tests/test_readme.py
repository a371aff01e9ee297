"""The README's quick start runs as written."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_quick_start_runs(capsys):
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert scope["samples"].shape == (64, 3, 2)
    assert scope["again"].step_ == scope["model"].step_
    assert "(64, 3, 2)" in capsys.readouterr().out
