r"""Gromov hyperbolicity, globally and per node on k-hop balls.

For four points :math:`x, y, z, w` of a metric space, let
:math:`S_1 \ge S_2 \ge S_3` be the three pair sums :math:`d(x,y)+d(z,w)`,
:math:`d(x,z)+d(y,w)`, :math:`d(x,w)+d(y,z)` in decreasing order. The four-point
(Gromov) delta is

.. math:: \delta = \max_{x,y,z,w} \tfrac12 (S_1 - S_2),

zero for a tree metric (and for the complete graph), one for the 4-cycle. The relative
delta :math:`2\delta / \operatorname{diam}` lies in :math:`[0, 1]` and makes balls of
different sizes comparable: a value near 0 means tree-like (hyperbolic), larger values
flat or cyclic structure.

Per node, :func:`local_hyperbolicity` takes the k-hop ball around the node as an induced
subgraph (its own shortest-path metric, so the cost stays local on large graphs), and
computes the relative delta exactly over all quadruples when there are at most
``samples`` of them, otherwise over ``samples`` random quadruples (a lower bound).
"""

from __future__ import annotations

from math import comb

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from icml25_core import check_array, check_scalar

__all__ = ["gromov_delta", "hyperbolicity_sequence", "local_hyperbolicity"]


def _quadruple_delta(D: np.ndarray, quads: np.ndarray) -> float:
    x, y, z, w = quads.T
    sums = np.stack([D[x, y] + D[z, w], D[x, z] + D[y, w], D[x, w] + D[y, z]])
    sums.sort(axis=0)
    return float(np.max(sums[2] - sums[1]) / 2.0) if len(quads) else 0.0


def _all_quadruples(n: int) -> np.ndarray:
    idx = np.array(np.meshgrid(*(np.arange(n),) * 4, indexing="ij")).reshape(4, -1).T
    return idx[(idx[:, 0] < idx[:, 1]) & (idx[:, 1] < idx[:, 2]) & (idx[:, 2] < idx[:, 3])]


def gromov_delta(
    D,
    *,
    relative: bool = False,
    samples: int | None = None,
    seed: int | np.random.Generator = 0,
) -> float:
    """The four-point Gromov delta of a finite metric space.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Symmetric matrix of pairwise distances (finite, non-negative).
    relative : bool
        Return :math:`2\\delta / \\operatorname{diam}` instead of :math:`\\delta` (0 when
        the diameter is 0).
    samples : int, optional
        Evaluate at most this many quadruples: all of them when there are no more,
        otherwise a uniform random sample (the result is then a lower bound). ``None``:
        all quadruples (cost :math:`O(n^4)`).
    seed : int or numpy.random.Generator
        Randomness of the sample.

    Returns
    -------
    float
    """
    D = np.asarray(check_array(D, "D", ndim=2, nonnegative=True), dtype=np.float64)
    n = D.shape[0]
    if D.shape != (n, n):
        raise ValueError(f"D must be a square matrix, got shape {D.shape}")
    if not np.allclose(D, D.T):
        raise ValueError("D must be symmetric")
    if samples is not None:
        check_scalar(samples, "samples", low=1, integer=True)
    if n < 4:
        return 0.0
    if samples is None or comb(n, 4) <= samples:
        quads = _all_quadruples(n)
    else:
        quads = _distinct_quadruples(np.random.default_rng(seed), n, samples)
    delta = _quadruple_delta(D, quads)
    if not relative:
        return delta
    diam = float(D.max())
    return 2.0 * delta / diam if diam > 0 else 0.0


def _distinct_quadruples(rng: np.random.Generator, n: int, samples: int) -> np.ndarray:
    """``samples`` quadruples of distinct indices in ``range(n)`` (rejection on repeats)."""
    out = np.empty((0, 4), dtype=np.int64)
    while len(out) < samples:
        q = rng.integers(0, n, size=(2 * samples, 4))
        q.sort(axis=1)
        q = q[(np.diff(q, axis=1) > 0).all(axis=1)]
        out = np.concatenate([out, q])
    return out[:samples]


def _adjacency(edge_index, num_nodes: int) -> sp.csr_matrix:
    ei = np.asarray(edge_index.cpu() if hasattr(edge_index, "cpu") else edge_index)
    A = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(num_nodes, num_nodes))
    A = ((A + A.T) > 0).astype(np.float64).tocsr()
    A.setdiag(0)
    A.eliminate_zeros()
    return A


def local_hyperbolicity(
    edge_index,
    num_nodes: int,
    *,
    k: int = 2,
    samples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """Relative Gromov delta of every node's k-hop ball (induced subgraph).

    Parameters
    ----------
    edge_index : array_like or torch.Tensor, shape (2, E)
        Edges (read as undirected; self-loops ignored).
    num_nodes : int
        Number of nodes N.
    k : int
        Radius of the ball in hops.
    samples : int
        Quadruples per ball: exact when the ball has at most this many, else sampled.
    seed : int
        Randomness of the sampled quadruples.

    Returns
    -------
    numpy.ndarray, shape (N,)
        :math:`2\\delta / \\operatorname{diam}` of each ball, in [0, 1]; NaN where the ball
        has fewer than 4 nodes (no quadruple: the structure around the node is undefined).
    """
    check_scalar(num_nodes, "num_nodes", low=1, integer=True)
    check_scalar(k, "k", low=1, integer=True)
    check_scalar(samples, "samples", low=1, integer=True)
    A = _adjacency(edge_index, num_nodes)
    rng = np.random.default_rng(seed)
    out = np.full(num_nodes, np.nan)
    indptr, indices = A.indptr, A.indices
    for v in range(num_nodes):
        ball, frontier = {v}, [v]
        for _ in range(k):
            nxt = []
            for u in frontier:
                for w in indices[indptr[u] : indptr[u + 1]]:
                    if w not in ball:
                        ball.add(w)
                        nxt.append(w)
            frontier = nxt
        if len(ball) < 4:
            continue
        members = np.fromiter(ball, dtype=np.int64)
        D = shortest_path(A[members][:, members], unweighted=True, directed=False)
        out[v] = gromov_delta(D, relative=True, samples=samples, seed=rng)
    return out


def hyperbolicity_sequence(
    edge_indices, num_nodes: int, *, k: int = 2, samples: int = 1000, seed: int = 0
) -> np.ndarray:
    """Per-snapshot local hyperbolicity with undefined values filled causally.

    A node whose ball is undefined at snapshot t (isolated or nearly) keeps its last
    defined value; a node never defined so far takes the mean of the defined values at t
    (0 when none is). Only snapshots up to t are used for the value at t.

    Parameters
    ----------
    edge_indices : sequence of (2, E_t) arrays or tensors
        The snapshots, oldest first.
    num_nodes : int
        N, shared by all snapshots.

    Returns
    -------
    numpy.ndarray, shape (T, N)
        Relative deltas in [0, 1].
    """
    last = np.full(num_nodes, np.nan)
    rows = []
    for t, ei in enumerate(edge_indices):
        d = local_hyperbolicity(ei, num_nodes, k=k, samples=samples, seed=seed + t)
        defined = ~np.isnan(d)
        last = np.where(defined, d, last)
        fill = float(d[defined].mean()) if defined.any() else 0.0
        rows.append(np.where(np.isnan(last), fill, last))
    return np.stack(rows)
