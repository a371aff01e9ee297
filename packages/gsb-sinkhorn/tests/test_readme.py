"""The README's quick start runs as written."""

import re
from pathlib import Path

import numpy as np


def test_quick_start_runs():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has a python quick start"
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), scope)
    np.testing.assert_allclose(scope["P"].sum(0), scope["b"], rtol=1e-8)
    np.testing.assert_allclose(scope["Q"].sum(1), 30 * scope["a"], rtol=1e-8)
    assert scope["A"].shape == (4, 4)
    np.testing.assert_allclose(scope["Z"].sum(1), [10, 20, 5], rtol=1e-8)
