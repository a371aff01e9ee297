"""The README's quick start runs as written."""

from pathlib import Path

import numpy as np

from icml25_core import run_markdown_python


def test_quick_start_runs():
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    proba = scope["proba"]
    assert proba.shape == (len(scope["X_test"]), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert scope["clf"].score(scope["X_test"], scope["y_test"]) > 0.9
