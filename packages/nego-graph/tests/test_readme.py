"""The README's quick start runs as written."""

from pathlib import Path

from icml25_core import run_markdown_python


def test_quick_start_runs():
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    graph = scope["data"].test[0]
    importance = scope["trainer"].explain(graph)
    assert importance.shape == (graph.edge_index.shape[1],)
    assert float(importance.min()) >= 0.0 and float(importance.max()) <= 1.0
    assert len(scope["trainer"].history_["epoch"]) >= 1
