"""Benchmark problems: BoTorch's synthetic test functions as NumPy callables.

``PROBLEMS`` maps a name to a factory of :class:`Problem` (function, bounds ``(2, d)``,
known optimum). Any user callable ``f(x) -> float`` with its own bounds works as well.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Problem:
    """A function to minimise with its bounds (lower row, upper row) and optimal value."""

    name: str
    fn: Callable[[np.ndarray], float]
    bounds: np.ndarray
    optimum: float

    def __call__(self, x: np.ndarray) -> float:
        return self.fn(x)

    def regret(self, best_so_far: np.ndarray) -> np.ndarray:
        """Simple regret ``best_so_far - optimum`` (minimisation)."""
        return np.asarray(best_so_far, dtype=float) - self.optimum


def _from_botorch(name: str, cls_name: str, **kwargs) -> Problem:
    import torch
    from botorch import test_functions

    tf = getattr(test_functions, cls_name)(**kwargs)

    def fn(x: np.ndarray) -> float:
        with torch.no_grad():
            return float(tf(torch.as_tensor(np.asarray(x, float), dtype=torch.float64)[None])[0])

    return Problem(name, fn, tf.bounds.numpy().astype(float), float(tf.optimal_value))


PROBLEMS: dict[str, Callable[[], Problem]] = {
    "branin": lambda: _from_botorch("branin", "Branin"),
    "beale": lambda: _from_botorch("beale", "Beale"),
    "bukin6": lambda: _from_botorch("bukin6", "Bukin"),
    "six-hump-camel": lambda: _from_botorch("six-hump-camel", "SixHumpCamel"),
    "hartmann6": lambda: _from_botorch("hartmann6", "Hartmann", dim=6),
}


def get_problem(name: str) -> Problem:
    """The named problem; ``ValueError`` listing the names otherwise."""
    if name not in PROBLEMS:
        raise ValueError(f"name must be one of {sorted(PROBLEMS)}, got {name!r}")
    return PROBLEMS[name]()
