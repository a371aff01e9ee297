"""Run the Python examples of a Markdown file (READMEs), so documentation stays true."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_BLOCK = re.compile(r"```python\n(.*?)```", flags=re.S)


def run_markdown_python(path: str | Path) -> dict[str, Any]:
    """Execute every fenced ``python`` block of a Markdown file, in order, in one namespace.

    Returns
    -------
    dict
        The namespace after the last block, for assertions on its variables.

    Raises
    ------
    ValueError
        If the file has no ``python`` block.
    """
    path = Path(path)
    blocks = _BLOCK.findall(path.read_text())
    if not blocks:
        raise ValueError(f"{path} has no ```python block")
    scope: dict[str, Any] = {"__name__": "__readme__"}
    for block in blocks:
        exec(compile(block, str(path), "exec"), scope)
    return scope
