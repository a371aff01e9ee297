"""The README's quick start runs as written (tiny random pipeline, no download)."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_readme_quick_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert scope["video"].shape == (40, 64, 64, 3)
    assert scope["video"].min() >= 0 and scope["video"].max() <= 1
    assert (tmp_path / "mimicmotion.gif").stat().st_size > 0
