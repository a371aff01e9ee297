"""Reproducible randomness."""

from __future__ import annotations

import random
import sys

import numpy as np


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's, NumPy's legacy and (if already imported) torch's generators.

    Parameters
    ----------
    seed : int
        Non-negative integer seed.

    Returns
    -------
    numpy.random.Generator
        A fresh generator seeded with ``seed``; prefer passing it explicitly over relying
        on global state.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - legacy global state, for third-party code
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    return np.random.default_rng(seed)
