"""Lazy public APIs, so that a package's entry point imports nothing heavy.

``icml25`` discovers methods by loading ``<package>._method:METHOD``, which first runs the
package's ``__init__.py``. A package whose ``__init__`` imported its solver would pull in
torch, POT or transformers just to be listed. Instead the ``__init__`` declares its public
names as ordinary imports under ``if TYPE_CHECKING:`` (what IDEs and type checkers read)
and hands the module to :func:`lazy_exports`, which imports each name's module on first
access (PEP 562)::

    from typing import TYPE_CHECKING

    from icml25_core.lazy import lazy_exports

    if TYPE_CHECKING:
        from .solver import sinkhorn

    __getattr__, __dir__ = lazy_exports(__name__, __file__)
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _type_checking_imports(source: str, filename: str) -> dict[str, tuple[str, str]]:
    """``public name -> (relative module, attribute)`` from the ``if TYPE_CHECKING:`` block."""
    exports: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source, filename=filename).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name)):
            continue
        if node.test.id != "TYPE_CHECKING":
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Pass):
                continue
            if not isinstance(stmt, ast.ImportFrom) or stmt.level != 1:
                raise TypeError(
                    f"{filename}: the TYPE_CHECKING block may only hold 'from .module import "
                    f"name' statements (line {stmt.lineno})"
                )
            for alias in stmt.names:
                exports[alias.asname or alias.name] = ("." + (stmt.module or ""), alias.name)
    return exports


def lazy_exports(
    package: str, init_file: str | Path
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module-level ``__getattr__`` and ``__dir__`` for a package's lazy public API.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    init_file : path
        The package's ``__file__``; its ``if TYPE_CHECKING:`` block of
        ``from .module import name`` statements lists what is exported, and from where.

    Returns
    -------
    (callable, callable)
        ``__getattr__(name)`` imports ``name``'s module on first access and caches the
        value in the package namespace; ``__dir__()`` lists the eager and lazy names.
    """
    path = Path(init_file)
    exports = _type_checking_imports(path.read_text(encoding="utf-8"), str(path))

    def __getattr__(name: str) -> Any:
        try:
            module_name, attr = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module_name, package), attr)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
