"""The README's quick start runs as written."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_quick_start_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the example saves a model in the working directory
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert scope["samples"].shape == (3, 64, 2)
    assert scope["again"].step_ == scope["model"].step_
    assert "(3, 64, 2)" in capsys.readouterr().out
