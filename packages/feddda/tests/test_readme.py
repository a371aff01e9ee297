"""The README's quick starts run as written (tiny random CLIP, no download)."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_readme_quick_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    assert scope["logits"].shape == (12, 6)
    assert set(scope["shared"]) == {
        "prompt.global_ctx",
        "shared_adapter.down.weight",
        "shared_adapter.up.weight",
    }
    assert {"accuracy-client-0", "accuracy-client-1"} <= set(scope["result"]["evaluate"]["1"])
