"""Where methods keep artefacts they build once and reuse (trained models, tokenizers)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$ICML25_CACHE/<parts>`` (default ``~/.cache/icml25/<parts>``), created if missing.

    Only artefacts the package itself produced go here; they are re-created when absent,
    so the folder may be deleted at any time.
    """
    root = Path(os.environ.get("ICML25_CACHE") or Path.home() / ".cache" / "icml25")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
