r"""Multi-marginal Sinkhorn on a chain tree, in the log domain.

Nodes :math:`0, \dots, L-1` with measures on :math:`n_0, \dots, n_{L-1}` points; edge
:math:`i` joins nodes :math:`i` and :math:`i+1` with cost :math:`C_i \in \mathbb{R}^{n_i
\times n_{i+1}}`. The plan on the product space is

.. math::
    \pi(x_0, \dots, x_{L-1}) = \exp\Big(\sum_{i \in F} \varphi_i(x_i)/\varepsilon
    - \sum_i C_i(x_i, x_{i+1})/\varepsilon\Big),

where :math:`F` is the set of nodes whose marginal is fixed; free nodes keep the scaling 1
(:math:`\varphi = 0`). Because the cost is a sum over a chain, every marginal is a product
of messages passed along the chain, never the full tensor: a sweep is one backward and one
forward pass of log-sum-exp messages, updating each fixed node's potential exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ot.backend import get_backend

from icml25_core import check_array, check_scalar

__all__ = ["ChainResult", "chain_sinkhorn"]

LOG_CLIP = 30.0
"""Log-marginals are clipped here when the residual is measured (an entry above e^30 already
means a residual far above any tolerance); the updates themselves are never clipped."""


@dataclass
class ChainResult:
    """What :func:`chain_sinkhorn` found.

    Attributes
    ----------
    potentials : list of arrays
        :math:`\\varphi_i / \\varepsilon` per node (zeros at free nodes).
    node_marginals : list of arrays
        The plan's marginal at every node.
    edge_plans : list of arrays
        The plan's two-node marginal on every edge, shape (n_i, n_{i+1}).
    n_iter : int
    converged : bool
    residuals : list of float
        Relative L1 error of the fixed marginals, measured before each sweep's updates.
    """

    potentials: list[Any]
    node_marginals: list[Any]
    edge_plans: list[Any]
    n_iter: int
    converged: bool
    residuals: list[float] = field(default_factory=list)


def _msg_forward(m: Any, phi: Any, K: Any, nx: Any) -> Any:
    """log message from node i to node i+1: lse_x(m(x) + phi(x) - K(x, y))."""
    return nx.logsumexp((m + phi)[:, None] - K, axis=0)


def _msg_backward(m: Any, phi: Any, K: Any, nx: Any) -> Any:
    """log message from node i+1 to node i: lse_y(m(y) + phi(y) - K(x, y))."""
    return nx.logsumexp((m + phi)[None, :] - K, axis=1)


def chain_sinkhorn(
    marginals: list[Any],
    costs: list[Any],
    eps: float,
    tol: float = 1e-9,
    max_iter: int = 10000,
    warmstart: list[Any] | None = None,
) -> ChainResult:
    r"""Entropic multi-marginal OT on a chain with fixed and free node marginals.

    Parameters
    ----------
    marginals : list of array or None, length L
        The fixed marginal of each node (shape (n_i,)), or ``None`` for a free node. All
        fixed marginals must have the same total mass.
    costs : list of arrays, length L - 1
        Edge costs, shape (n_i, n_{i+1}).
    eps : float
        Entropic regularisation :math:`\varepsilon > 0`.
    tol : float
        Stop when the summed relative L1 error of the fixed marginals is below ``tol``.
    max_iter : int
        Maximum number of sweeps.
    warmstart : list of arrays, optional
        Starting potentials :math:`\varphi_i/\varepsilon` (for example
        ``result.potentials`` of a nearby problem).

    Returns
    -------
    ChainResult

    Notes
    -----
    With two fixed nodes joined by one edge this is Sinkhorn's algorithm
    (``ot.sinkhorn(a, b, C, eps)``); with free nodes between two fixed ends it is
    Sinkhorn's algorithm on the composed kernel :math:`K_0 K_1 \cdots K_{L-2}`.
    """
    L = len(marginals)
    if L < 2 or len(costs) != L - 1:
        raise ValueError(
            f"costs must have one entry per edge: {L} nodes need {L - 1}, got {len(costs)}"
        )
    check_scalar(eps, "eps", low=0.0, low_inclusive=False)
    check_scalar(tol, "tol", low=0.0, low_inclusive=False)
    check_scalar(max_iter, "max_iter", low=1, integer=True)
    sizes = [int(costs[0].shape[0])] + [int(c.shape[1]) for c in costs]
    for i, c in enumerate(costs):
        check_array(c, f"costs[{i}]", shape=(sizes[i], sizes[i + 1]))
    fixed = [i for i, mu in enumerate(marginals) if mu is not None]
    if not fixed:
        raise ValueError("at least one node must have a fixed marginal")
    for i in fixed:
        check_array(marginals[i], f"marginals[{i}]", shape=(sizes[i],), positive=True)
    masses = [float(marginals[i].sum()) for i in fixed]
    if max(masses) - min(masses) > 1e-9 * max(masses):
        raise ValueError(f"fixed marginals must have equal mass, got sums {masses}")
    nx = get_backend(*costs)
    K = [c / eps for c in costs]
    log_mu = {i: nx.log(marginals[i]) for i in fixed}
    phi = (
        list(warmstart) if warmstart is not None else [nx.zeros((s,), type_as=K[0]) for s in sizes]
    )
    mass = masses[0]
    residuals: list[float] = []
    converged = False
    for _ in range(max_iter):
        right = [None] * L
        right[L - 1] = nx.zeros((sizes[-1],), type_as=K[0])
        for i in range(L - 2, -1, -1):
            right[i] = _msg_backward(right[i + 1], phi[i + 1], K[i], nx)
        left = nx.zeros((sizes[0],), type_as=K[0])
        err = 0.0
        for i in range(L):
            if i in log_mu:
                # clipped at e^30 before exponentiating: after a large cost change (a new
                # lam, a warm start from another problem) the stale potentials can put the
                # marginal far above e^709, and an overflow here used to read as divergence
                log_marg = nx.clip(left + phi[i] + right[i], -np.inf, LOG_CLIP)
                err += float(nx.sum(nx.abs(nx.exp(log_marg) - marginals[i])))
                phi[i] = log_mu[i] - left - right[i]
            if i < L - 1:
                left = _msg_forward(left, phi[i], K[i], nx)
        residuals.append(err / mass)
        if not np.isfinite(residuals[-1]):
            break
        if residuals[-1] <= tol:
            converged = True
            break
    node, edges = _marginals(phi, K, nx)
    return ChainResult(phi, node, edges, len(residuals), converged, residuals)


def _marginals(phi: list[Any], K: list[Any], nx: Any) -> tuple[list[Any], list[Any]]:
    """Node and edge marginals of the chain plan from its potentials."""
    L = len(phi)
    left = [nx.zeros(phi[0].shape, type_as=K[0])]
    for i in range(L - 1):
        left.append(_msg_forward(left[i], phi[i], K[i], nx))
    right = [None] * L
    right[L - 1] = nx.zeros(phi[-1].shape, type_as=K[0])
    for i in range(L - 2, -1, -1):
        right[i] = _msg_backward(right[i + 1], phi[i + 1], K[i], nx)
    node = [nx.exp(left[i] + phi[i] + right[i]) for i in range(L)]
    edges = [
        nx.exp((left[i] + phi[i])[:, None] - K[i] + (phi[i + 1] + right[i + 1])[None, :])
        for i in range(L - 1)
    ]
    return node, edges
