"""Where methods keep artefacts they build once and reuse (trained models, tokenizers).

:func:`build_once` makes such an artefact an atomic, lock-protected cache entry: it is built
in a temporary folder beside its final place and renamed into place only when the build
finished, so an interrupted build leaves nothing that passes for complete, and a second
process asking for the same entry waits for the first instead of building it twice.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

_COMPLETE = ".icml25-complete"
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def cache_dir(*parts: str) -> Path:
    """``$ICML25_CACHE/<parts>`` (default ``~/.cache/icml25/<parts>``), created if missing.

    Only artefacts the package itself produced go here; they are re-created when absent,
    so the folder may be deleted at any time.
    """
    root = Path(os.environ.get("ICML25_CACHE") or Path.home() / ".cache" / "icml25")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_once(
    name: str, builder: Callable[[Path], Any], *, timeout: float = -1, package: str = ""
) -> Path:
    """The cache folder ``name``, built by ``builder`` the first time it is asked for.

    Parameters
    ----------
    name : str
        The entry's folder name: letters, digits, ``.``, ``_`` and ``-``. Put every setting
        the artefact depends on into it (or a hash of them), so a changed setting is a new
        entry rather than a stale one.
    builder : callable
        ``builder(folder)`` writes the artefact into the empty, temporary ``folder``; its
        return value is ignored. If it raises, the temporary folder is removed and nothing
        is cached.
    timeout : float
        Seconds to wait for another process building the same entry; negative waits
        forever. Past it, ``filelock.Timeout`` is raised.
    package : str
        Sub-folder of the cache root, usually the distribution name (``"moequant"``).

    Returns
    -------
    pathlib.Path
        The complete entry, ``cache_dir(package) / name``.

    Notes
    -----
    A folder counts as complete only when it holds the marker that the rename step
    writes; a folder without it (a build from before this helper, or a copy made by hand)
    is removed and built again.
    """
    if not isinstance(name, str) or not _PART.fullmatch(name):
        raise ValueError(
            f"name must be a folder name of letters, digits, '.', '_' and '-', got {name!r}"
        )
    if package and not _PART.fullmatch(package):
        raise ValueError(f"package must be a plain folder name, got {package!r}")
    parent = cache_dir(package) if package else cache_dir()
    final = parent / name
    if (final / _COMPLETE).is_file():
        return final
    with FileLock(str(parent / f".{name}.lock"), timeout=timeout):
        if (final / _COMPLETE).is_file():  # built by another process while we waited
            return final
        if final.exists():
            shutil.rmtree(final)  # incomplete: not written by this helper
        for stale in parent.glob(f".{name}.building-*"):  # builds killed before the rename
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.building-", dir=parent))
        try:
            builder(tmp)
            (tmp / _COMPLETE).write_text("complete\n")
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final
