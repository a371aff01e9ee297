"""The conformance kit's own parts (the kit itself runs in every package's tests)."""

import pytest

from icml25_core.testing import QUICK_START_MARKER, _own_docstring, quick_start_blocks


def test_only_marked_blocks_are_the_quick_start():
    text = (
        "intro\n```python\nnot_marked = 1\n```\n"
        f"{QUICK_START_MARKER}\n```python\nx = 2\n```\n"
        "prose\n```bash\nexit 1\n```\n"
        f"{QUICK_START_MARKER}\n```python\n    y = x * 21\n```\n"
    )
    assert quick_start_blocks(text) == ["x = 2\n", "y = x * 21\n"]
    assert quick_start_blocks("no code") == []


def test_docstrings_that_count():
    from dataclasses import dataclass

    @dataclass
    class Bare:
        x: int

    @dataclass
    class Documented:
        """Has one."""

        x: int

    def f():
        pass

    assert _own_docstring(Bare) == ""
    assert _own_docstring(Documented) == "Has one."
    assert _own_docstring(f) == ""
    assert _own_docstring(3) == "n/a"  # constants cannot carry docstrings


@pytest.mark.parametrize("argv", [[], ["other"], ["quick-start"]])
def test_command_line_usage(argv, capsys):
    from icml25_core.testing import _main

    assert _main(argv) == 2
    assert "usage" in capsys.readouterr().err
