"""Writing files so that a kill never leaves a torn one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def json_default(obj: Any) -> Any:
    """``json.dumps`` fallback for NumPy scalars and arrays and paths."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def write_json_atomic(path: str | os.PathLike, data: Any, *, overwrite: bool = True) -> Path:
    """Write ``data`` as JSON to ``path`` through a temporary file in the same folder and a
    rename, so a kill leaves either the old file or the new one, never a torn one.

    Parameters
    ----------
    path : path
        The file; its folder is created if missing.
    data : JSON-serialisable
        NumPy values and paths are converted (:func:`json_default`).
    overwrite : bool
        With ``False`` an existing ``path`` raises ``FileExistsError``.
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, default=json_default)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
