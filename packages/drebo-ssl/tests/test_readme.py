"""The README's quick start runs as written."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_quick_start_runs(capsys):
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert scope["result"].X.shape == (25, 2)
    assert scope["x"].shape == (1, 2)
    assert "best" in capsys.readouterr().out
