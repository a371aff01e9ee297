"""The README's quick start runs as written."""

import re
from pathlib import Path


def test_quick_start_runs(capsys):
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), scope)
    assert scope["model"].embedding1_.shape == (80, 2)
    assert "(80, 2)" in capsys.readouterr().out
