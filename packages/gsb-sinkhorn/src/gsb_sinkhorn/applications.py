"""Applications of the generalized bridge with zero cost: random graphs and tables.

With :math:`C = 0` the bridge is a maximum-entropy problem. The logistic divergence gives
the maximum-entropy distribution over bipartite graphs (0/1 matrices) with given expected
degrees, whose edges are independent with probabilities :math:`\\sigma(f_i + g_j)` (the
bipartite beta-model). The contingency divergence gives Barvinok's typical table: the
maximum-entropy distribution over non-negative integer tables with given expected margins
has independent geometric entries whose means form that table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml25_core import as_float_array, as_generator, check_scalar

from .solver import sinkhorn

__all__ = [
    "gale_ryser_feasible",
    "random_bipartite_graph",
    "random_contingency_table",
    "typical_table",
]


def _margins(row: Any, col: Any, row_name: str, col_name: str) -> tuple[np.ndarray, np.ndarray]:
    r = as_float_array(row, row_name, ndim=1, nonnegative=True)
    c = as_float_array(col, col_name, ndim=1, nonnegative=True)
    sr, sc = r.sum(), c.sum()
    if not np.isclose(sr, sc, rtol=1e-9, atol=0.0):
        raise ValueError(f"{row_name} and {col_name} must have equal sums, got {sr!r} and {sc!r}")
    if sr <= 0:
        raise ValueError(f"{row_name} must have a positive sum")
    return r, c


def gale_ryser_feasible(row_degrees: Any, col_degrees: Any) -> bool:
    r"""Whether some matrix with entries in [0, 1] has these row and column sums.

    The Gale–Ryser condition: with :math:`r^*` sorted decreasingly, for every :math:`k`,
    :math:`\sum_{i \le k} r^*_i \le \sum_j \min(c_j, k)`. For integer sequences it decides
    whether a bipartite graph (0/1 matrix) with exactly these degrees exists; for real
    sequences, whether expected degrees of a random bipartite graph can be these.
    """
    r, c = _margins(row_degrees, col_degrees, "row_degrees", "col_degrees")
    rs = np.sort(r)[::-1]
    cs = np.sort(c)
    k = np.arange(1, rs.size + 1, dtype=float)
    # sum_j min(c_j, k) = (sum of c_j below k) + k * #(c_j >= k)
    below = np.searchsorted(cs, k, side="left")
    csum = np.concatenate([[0.0], np.cumsum(cs)])
    capacity = csum[below] + k * (cs.size - below)
    slack = 1e-9 * max(r.sum(), 1.0)
    return bool(np.all(np.cumsum(rs) <= capacity + slack))


def _forced(r: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fix the rows and columns whose degree is 0 or full: their entries are forced.

    Returns the forced part of the probability matrix (NaN where free) and the boolean
    masks of free rows and columns.
    """
    n, m = r.size, c.size
    P = np.full((n, m), np.nan)
    r, c = r.copy(), c.copy()
    free_r, free_c = np.ones(n, bool), np.ones(m, bool)
    changed = True
    while changed:
        changed = False
        nr, nc = free_r.sum(), free_c.sum()
        for deg, free, other_free, full, axis in (
            (r, free_r, free_c, nc, 0),
            (c, free_c, free_r, nr, 1),
        ):
            zero = free & np.isclose(deg, 0.0, atol=1e-12)
            ones = free & np.isclose(deg, full, rtol=0, atol=1e-12) & ~zero
            for idx, val in ((np.flatnonzero(zero), 0.0), (np.flatnonzero(ones), 1.0)):
                if idx.size == 0:
                    continue
                changed = True
                if axis == 0:
                    P[np.ix_(idx, np.flatnonzero(other_free))] = val
                    c[other_free] -= val * idx.size
                else:
                    P[np.ix_(np.flatnonzero(other_free), idx)] = val
                    r[other_free] -= val * idx.size
                free[idx] = False
                deg[idx] = 0.0
            if changed:
                break
    return P, free_r, free_c


def random_bipartite_graph(
    row_degrees: Any,
    col_degrees: Any,
    seed: int | np.random.Generator | None = None,
    size: int | None = None,
    tol: float = 1e-9,
    max_iter: int = 10000,
    log: bool = False,
):
    r"""Sample bipartite graphs from the maximum-entropy model with given expected degrees.

    The edge probabilities :math:`p_{ij} = \sigma(f_i + g_j)` solve the logistic bridge with
    zero cost, :math:`\sum_j p_{ij} = r_i`, :math:`\sum_i p_{ij} = c_j`; edges are then
    drawn independently. Rows or columns with degree 0 or full are fixed first (their
    entries are forced), so isolated or complete nodes are handled exactly.

    Parameters
    ----------
    row_degrees : array-like, shape (n,)
        Expected degrees of the row nodes, in [0, m].
    col_degrees : array-like, shape (m,)
        Expected degrees of the column nodes, in [0, n]; same sum as ``row_degrees``.
    seed : int, Generator or None
        Randomness of the sampling.
    size : int, optional
        Number of independent graphs; ``None`` draws one. The model is solved once.
    tol, max_iter : float, int
        Passed to :func:`~gsb_sinkhorn.sinkhorn`.
    log : bool
        Also return ``probabilities`` (n, m) and the solver's log.

    Returns
    -------
    adjacency : numpy.ndarray of uint8, shape (n, m) or (size, n, m)
        Sampled biadjacency matrices; their degrees equal the given ones in expectation.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    ValueError
        If a degree is negative, exceeds the other side's size, the sums differ, or the
        sequence fails the Gale–Ryser condition (no such graph can exist).

    Examples
    --------
    >>> A = random_bipartite_graph([2, 1, 1], [1, 1, 1, 1], seed=0)
    >>> A.shape
    (3, 4)
    """
    r, c = _margins(row_degrees, col_degrees, "row_degrees", "col_degrees")
    if r.max() > c.size:
        raise ValueError(
            f"row_degrees must be at most the number of columns {c.size}, got max {float(r.max())!r}"
        )
    if c.max() > r.size:
        raise ValueError(
            f"col_degrees must be at most the number of rows {r.size}, got max {float(c.max())!r}"
        )
    if not gale_ryser_feasible(r, c):
        raise ValueError(
            "row_degrees and col_degrees fail the Gale-Ryser condition: no bipartite graph "
            "(no matrix with entries in [0, 1]) has these degrees"
        )
    P, free_r, free_c = _forced(r, c)
    solver_log: dict[str, Any] = {"n_iter": 0, "converged": True, "residuals": np.zeros(0)}
    if free_r.any() and free_c.any():
        fr, fc = np.flatnonzero(free_r), np.flatnonzero(free_c)
        forced_r = np.nansum(P[fr], axis=1)
        forced_c = np.nansum(P[:, fc], axis=0)
        sub_r, sub_c = r[fr] - forced_r, c[fc] - forced_c
        Q, solver_log = sinkhorn(
            sub_r,
            sub_c,
            np.zeros((fr.size, fc.size)),
            1.0,
            "logistic",
            stopThr=tol,
            numItermax=max_iter,
            log=True,
        )
        P[np.ix_(fr, fc)] = Q
    P = np.nan_to_num(P, nan=0.0)
    rng = as_generator(seed)
    shape = P.shape if size is None else (_check_size(size), *P.shape)
    A = (rng.random(shape) < P).astype(np.uint8)
    if not log:
        return A
    return A, {"probabilities": P, **solver_log}


def typical_table(
    row_margins: Any, col_margins: Any, tol: float = 1e-9, max_iter: int = 10000, log: bool = False
):
    r"""Barvinok's typical table: the maximum-entropy matrix with given margins.

    The unique maximiser of :math:`\sum_{ij} (z_{ij}+1)\log(z_{ij}+1) - z_{ij}\log z_{ij}`
    over non-negative matrices with row sums ``row_margins`` and column sums
    ``col_margins``; it is the contingency bridge with zero cost,
    :math:`z_{ij} = 1/(e^{-(f_i + g_j)} - 1)`. Counting and sampling integer tables with
    these margins reduces to it (Barvinok 2010).

    Parameters
    ----------
    row_margins : array-like, shape (n,)
    col_margins : array-like, shape (m,)
        Non-negative, equal sums.
    tol, max_iter, log
        As in :func:`~gsb_sinkhorn.sinkhorn`.

    Returns
    -------
    Z : numpy.ndarray, shape (n, m)
    log : dict
        Only if ``log=True``.
    """
    r, c = _margins(row_margins, col_margins, "row_margins", "col_margins")
    return sinkhorn(
        r,
        c,
        np.zeros((r.size, c.size)),
        1.0,
        "contingency",
        stopThr=tol,
        numItermax=max_iter,
        log=log,
    )


def random_contingency_table(
    row_margins: Any,
    col_margins: Any,
    seed: int | np.random.Generator | None = None,
    size: int | None = None,
    tol: float = 1e-9,
) -> np.ndarray:
    r"""Sample non-negative integer tables from the maximum-entropy model with given margins.

    Entries are independent geometric variables whose means form the
    :func:`typical_table`, so margins hold in expectation; conditioned on its margins, a
    table from this model is uniform over all tables with those margins (Barvinok 2010).

    Parameters
    ----------
    row_margins, col_margins : array-like
        As in :func:`typical_table`.
    seed : int, Generator or None
        Randomness of the sampling.
    size : int, optional
        Number of independent tables; ``None`` draws one. The typical table is solved once.
    tol : float
        Passed to :func:`~gsb_sinkhorn.sinkhorn`.

    Returns
    -------
    numpy.ndarray of int64, shape (n, m) or (size, n, m)
    """
    Z = typical_table(row_margins, col_margins, tol=tol)
    rng = as_generator(seed)
    # numpy's geometric counts trials up to the first success; minus one has mean (1-p)/p = z
    shape = Z.shape if size is None else (_check_size(size), *Z.shape)
    return rng.geometric(1.0 / (1.0 + Z), size=shape) - 1


def _check_size(size: int) -> int:
    return int(check_scalar(size, "size", low=1, integer=True))
