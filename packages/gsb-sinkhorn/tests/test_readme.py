"""The README's quick start runs as written."""

from pathlib import Path

import numpy as np

from icml25_core import run_markdown_python


def test_quick_start_runs():
    scope = run_markdown_python(Path(__file__).resolve().parents[1] / "README.md")
    np.testing.assert_allclose(scope["P"].sum(0), scope["b"], rtol=1e-8)
    np.testing.assert_allclose(scope["Q"].sum(1), 30 * scope["a"], rtol=1e-8)
    assert scope["A"].shape == (4, 4)
    np.testing.assert_allclose(scope["Z"].sum(1), [10, 20, 5], rtol=1e-8)
