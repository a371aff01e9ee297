"""The README's quick start runs as written (tiny random Mixtral, no download)."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_readme_quick_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert scope["calibration"].shape == (8, 32)
    assert (tmp_path / "mixtral-w4" / "quant_config.json").is_file()
    assert scope["log"]["expert_counts"]  # the quick start asked for the log
