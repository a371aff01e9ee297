"""The ask/tell machinery every optimiser here shares: bounds, pool, history, best point.

``bounds`` is shaped ``(2, d)``, lower row then upper row, as in BoTorch. Internally points
live in the unit cube; :meth:`AskTellOptimizer.ask` returns them in the original units.
Minimisation by default; ``maximize=True`` flips the sign internally and reports values in
the user's sense.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from icml25_core import as_float_array, check_array, check_memory, check_scalar

from .labels import quantile_labels


def check_bounds(bounds: Any) -> np.ndarray:
    """``bounds`` as a float ``(2, d)`` array with lower < upper, else ``ValueError``."""
    b = check_array(np.asarray(bounds, dtype=float), "bounds", ndim=2)
    if b.shape[0] != 2:
        raise ValueError(
            f"bounds must be shaped (2, d): lower row then upper row (BoTorch layout), "
            f"got shape {b.shape}"
        )
    bad = np.flatnonzero(b[0] >= b[1])
    if bad.size:
        raise ValueError(
            f"bounds must have lower < upper in every dimension; dimension(s) {bad.tolist()} "
            f"have lower {b[0, bad].tolist()} >= upper {b[1, bad].tolist()}"
        )
    return b


@dataclass
class OptimizeResult:
    """What :func:`~drebo_ssl.minimize` returns.

    Attributes
    ----------
    x_best : ndarray (d,)
        The best evaluated point (finite values only).
    best_value : float
        Its objective value (the best, in the user's sense: lowest, or highest with
        ``maximize``).
    X : ndarray (n, d)
        Every evaluated point, in order.
    y : ndarray (n,)
        Their values as returned by ``f`` (NaN for failed evaluations).
    best_so_far : ndarray (n,)
        Best finite value after each evaluation (NaN before the first finite one).
    asks : list of dict
        One record per :meth:`~AskTellOptimizer.ask`, in order: ``n`` (points asked),
        ``branch`` (what chose them: ``"random"`` before the model exists or for random
        search, ``"sure"`` a random pick among candidates with probability >= ``certain``,
        ``"optimizer"`` L-BFGS-B or the acquisition optimiser, ``"argmax"`` the best
        candidates or pool rows) and, for the density-ratio optimisers, ``n_sure`` (how
        many candidates were sure) and ``gamma`` (DRE-BO-SSL's unit-cube bandwidth).
    """

    x_best: np.ndarray
    best_value: float
    X: np.ndarray
    y: np.ndarray
    best_so_far: np.ndarray = field(repr=False)
    asks: list[dict[str, Any]] = field(default_factory=list, repr=False)


class AskTellOptimizer:
    """Base class: subclasses implement ``_suggest(n)``, returning ``(n, d)`` unit-cube
    points and a record of how they were chosen (a dict with ``branch``), and
    ``_suggest_pool(free, n)``, returning indices into ``free`` and the record."""

    def __init__(self, bounds, *, pool=None, maximize: bool = False, seed: int | None = None):
        self.bounds = check_bounds(bounds)
        self.dim = self.bounds.shape[1]
        self.maximize = bool(maximize)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        if pool is not None:
            pool = check_array(np.asarray(pool, dtype=float), "pool", ndim=2)
            if pool.shape[1] != self.dim:
                raise ValueError(
                    f"pool must have {self.dim} columns like bounds, got shape {pool.shape}"
                )
            outside = ~np.all((pool >= self.bounds[0]) & (pool <= self.bounds[1]), axis=1)
            if outside.any():
                raise ValueError(
                    f"pool rows {np.flatnonzero(outside)[:5].tolist()} lie outside the bounds"
                )
        self.pool = pool
        self.available_ = None if pool is None else np.ones(len(pool), dtype=bool)
        self.X_ = np.zeros((0, self.dim))
        self.y_ = np.zeros(0)
        self.asks_: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- coordinates
    def to_unit(self, X: np.ndarray) -> np.ndarray:
        return (X - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def from_unit(self, Z: np.ndarray) -> np.ndarray:
        return self.bounds[0] + Z * (self.bounds[1] - self.bounds[0])

    @property
    def losses_(self) -> np.ndarray:
        """Observed values in the minimisation sense (NaN kept)."""
        return -self.y_ if self.maximize else self.y_

    # ---------------------------------------------------------------- ask / tell
    def ask(self, n: int = 1) -> np.ndarray:
        """``n`` points to evaluate next, shaped ``(n, d)`` in the original units.

        In pool mode they are distinct pool rows never suggested before.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if self.pool is not None:
            free = np.flatnonzero(self.available_)
            if free.size < n:
                raise ValueError(f"the pool has {free.size} unevaluated points left, asked for {n}")
            chosen, info = self._suggest_pool(free, n)
            idx = free[chosen]
            self.available_[idx] = False
            self.asks_.append({"n": n, **info})
            return self.pool[idx].copy()
        Z, info = self._suggest(n)
        self.asks_.append({"n": n, **info})
        return self.from_unit(np.clip(Z, 0.0, 1.0))

    def tell(self, X, y) -> None:
        """Record evaluations: ``X`` (n, d) or (d,), ``y`` (n,) or a scalar; NaN allowed in y."""
        X = np.atleast_2d(as_float_array(X, "X", finite=False))
        y = np.atleast_1d(as_float_array(y, "y", finite=False)).ravel()
        if X.shape[1] != self.dim:
            raise ValueError(f"X must have {self.dim} columns, got shape {X.shape}")
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} values")
        check_array(X, "X")
        if np.isinf(y).any():
            raise ValueError("y must not contain inf; report a failed evaluation as NaN")
        if self.pool is not None:  # points told directly are taken out of the pool too
            for x in X:
                hit = np.flatnonzero(np.all(self.pool == x, axis=1))
                self.available_[hit] = False
        self.X_ = np.vstack([self.X_, X])
        self.y_ = np.concatenate([self.y_, y])

    def _random_unit(self, n: int) -> np.ndarray:
        return self.rng.random((n, self.dim))

    def _suggest(self, n: int) -> tuple[np.ndarray, dict[str, Any]]:
        return self._random_unit(n), {"branch": "random"}

    def _suggest_pool(self, free: np.ndarray, n: int) -> tuple[np.ndarray, dict[str, Any]]:
        return self.rng.choice(free.size, size=n, replace=False), {"branch": "random"}

    # ---------------------------------------------------------------- results
    def result(self) -> OptimizeResult:
        """The best point so far and the history."""
        losses = self.losses_
        if not np.isfinite(losses).any():
            raise ValueError("no finite objective value has been told yet")
        i = int(np.nanargmin(losses))
        best = np.fmin.accumulate(np.where(np.isfinite(losses), losses, np.inf))
        best = np.where(np.isinf(best), np.nan, best)
        return OptimizeResult(
            x_best=self.X_[i].copy(),
            best_value=float(self.y_[i]),
            X=self.X_.copy(),
            y=self.y_.copy(),
            best_so_far=-best if self.maximize else best,
            asks=[dict(a) for a in self.asks_],
        )

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot (history, pool flags, random state) for
        :meth:`load_state_dict`; settings are the constructor's."""
        return {
            "class": type(self).__name__,
            "X": self.X_.tolist(),
            "y": [None if np.isnan(v) else float(v) for v in self.y_],
            "available": None if self.available_ is None else self.available_.tolist(),
            "rng": self.rng.bit_generator.state,
            "asks": [dict(a) for a in self.asks_],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a JSON round trip is fine) into a same-settings optimiser."""
        if state.get("class") != type(self).__name__:
            raise ValueError(f"state is for {state.get('class')!r}, not {type(self).__name__}")
        state = json.loads(json.dumps(state))
        X = np.asarray(state["X"], dtype=float).reshape(-1, self.dim)
        self.X_ = X
        self.y_ = np.asarray([np.nan if v is None else v for v in state["y"]], dtype=float)
        if (state["available"] is None) != (self.pool is None):
            raise ValueError("state and optimiser disagree on pool mode")
        if self.pool is not None:
            if len(state["available"]) != len(self.pool):
                raise ValueError("state was saved with a pool of another size")
            self.available_ = np.asarray(state["available"], dtype=bool)
        self.rng.bit_generator.state = state["rng"]
        self.asks_ = [dict(a) for a in state.get("asks", [])]  # absent in 0.1 states


class DensityRatioOptimizer(AskTellOptimizer):
    """Shared part of the density-ratio optimisers (DRE-BO-SSL, BORE): the quantile labels
    and the acquisition maximiser's settings (``certain``: the probability at or above
    which a candidate counts as sure, ``None`` to always maximise)."""

    def __init__(
        self,
        bounds,
        *,
        zeta: float,
        n_candidates: int,
        n_starts: int,
        certain: float | None,
        pool=None,
        maximize: bool = False,
        seed: int | None = None,
    ):
        super().__init__(bounds, pool=pool, maximize=maximize, seed=seed)
        self.zeta = check_scalar(
            zeta, "zeta", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
        )
        self.n_candidates = check_scalar(n_candidates, "n_candidates", low=1, integer=True)
        self.n_starts = check_scalar(n_starts, "n_starts", low=1, integer=True)
        self.certain = (
            None if certain is None else check_scalar(certain, "certain", low=0.0, high=1.0)
        )
        # each suggestion holds the (n_candidates, d) float64 candidates and, inside the
        # classifier, about two working copies of them (distances to the labelled points)
        check_memory(
            3 * 8.0 * self.n_candidates * self.dim,
            "n_candidates",
            what=f"{self.n_candidates} candidates of {self.dim} dimensions in float64, with the "
            "classifier's working copies",
        )
        self.threshold_ = None

    def _labels(self) -> np.ndarray | None:
        """Quantile labels of the told points, or ``None`` before both classes exist."""
        finite = np.isfinite(self.losses_)
        if np.unique(self.losses_[finite]).size < 2:
            return None
        labels, self.threshold_ = quantile_labels(self.losses_, self.zeta, nan="bad")
        return labels if 0 < labels.sum() < labels.size else None


def run_loop(optimizer: AskTellOptimizer, f, n_init: int, n_iter: int) -> OptimizeResult:
    """``n_init`` random points, then ``n_iter`` suggestions, one at a time."""
    if isinstance(n_init, bool) or not isinstance(n_init, int) or n_init < 1:
        raise ValueError(f"n_init must be a positive integer, got {n_init!r}")
    if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 0:
        raise ValueError(f"n_iter must be a non-negative integer, got {n_iter!r}")
    if optimizer.pool is not None:
        free = np.flatnonzero(optimizer.available_)
        if free.size < n_init + n_iter:
            raise ValueError(
                f"the pool has {free.size} points, fewer than n_init + n_iter = {n_init + n_iter}"
            )
        idx = free[optimizer.rng.choice(free.size, size=n_init, replace=False)]
        optimizer.available_[idx] = False
        init = optimizer.pool[idx]
    else:
        init = optimizer.from_unit(optimizer.rng.random((n_init, optimizer.dim)))
    for x in init:
        optimizer.tell(x, _evaluate(f, x))
    for _ in range(n_iter):
        x = optimizer.ask(1)[0]
        optimizer.tell(x, _evaluate(f, x))
    return optimizer.result()


def _evaluate(f, x: np.ndarray) -> float:
    value = f(x.copy())
    try:
        value = float(np.asarray(value, dtype=float).reshape(()))
    except (TypeError, ValueError) as err:
        raise TypeError(f"f(x) must return one real number, got {value!r}") from err
    if np.isinf(value):
        raise ValueError(f"f(x) returned {value} at x={x.tolist()}; return NaN for a failure")
    return value
