r"""The joint embedding estimator.

Given two metric measure spaces :math:`(X_1, d_1, \xi_1)` and :math:`(X_2, d_2, \xi_2)`
without correspondences and a target metric space :math:`(Z, d_Z)`, find

.. math::
    \min_{\pi \in \mathcal{M}_+(Z \times Z)} \int d_Z^2\,d\pi
    + \lambda\,GW^2\big((X_1, \xi_1), (Z, \pi_1)\big) + \lambda\,GW^2\big((Z, \pi_2), (X_2, \xi_2)\big)

(Beier, Piening, Beinert, Steidl, ICML 2025). As :math:`\lambda \to \infty` the minimisers
approach an embedded Wasserstein distance: both spaces are embedded isometrically into
:math:`Z`, and the embeddings are as close as possible. The problem is a quadratic
multi-marginal OT problem on :math:`X_1 \times Z \times Z \times X_2`; its bi-convex
relaxation is solved by block-coordinate descent: linearise both GW terms at the current
couplings, then solve the entropic multi-marginal problem on the chain
:math:`X_1 - Z - Z - X_2` (fixed marginals at the ends, free in the middle) with
:func:`~ugw_embed.chain.chain_sinkhorn`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy.spatial.distance import cdist
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from icml25_core import as_float_array, check_scalar, select_device

from .chain import chain_sinkhorn
from .gromov import gw_cost
from .spaces import SPACES, check_metric, grid_symmetries, make_space, space_size

__all__ = ["JointEmbedding"]

SYMMETRY_STEPS = 5
"""Block steps each ``symmetry_restarts`` candidate is continued for."""


class JointEmbedding(BaseEstimator):
    """Embed two datasets jointly into a target metric space (plane, sphere, torus, ...).

    Parameters
    ----------
    space : {"plane", "sphere", "torus", "circle"} or (points, distance_matrix)
        The target space, or any user grid with its metric.
    lam : float or increasing sequence of float
        Weight :math:`\\lambda` of the GW penalties; a sequence is a continuation schedule
        (each value runs ``n_iter`` block steps, warm-started from the previous one).
    eps : float
        Entropic regularisation of the multi-marginal problem (costs are scaled to max 1).
    n_iter : int
        Block-coordinate steps per value of ``lam``.
    grid : int
        Grid points per dimension of a named space (see :func:`~ugw_embed.make_space`).
    max_len : float
        Largest target distance: the target space's distances are scaled to maximum
        ``max_len`` while both inputs are scaled to maximum 1 (the official wrapper's
        ``max_len``: 1 by default, 1.3 in its notebooks, "between 1 and 1.5" in its README).
    init : {"perturbed", "product"}
        First initial coupling. ``"product"`` (the paper's code) starts both views at the
        product coupling :math:`\\xi_i \\otimes u`; distances, costs and this start are all
        invariant under the grid's symmetries, so it is a saddle and each view's orientation
        is then chosen by floating-point rounding (a view can end mirrored relative to the
        other, and the outcome changes with the BLAS thread count). ``"perturbed"`` breaks the
        symmetry in view 1 only: :math:`P_1 \\propto \\xi_1 \\otimes u \\odot (1 + 10^{-3} N)`,
        rows renormalised to :math:`\\xi_1`, with ``N`` standard normal from ``seed``; view 2
        keeps the product coupling, so it follows view 1's orientation.
    n_restarts : int
        Initial couplings tried: ``init`` first, then random ones; the run with the lowest
        objective is kept.
    symmetry_restarts : bool
        After the fit, try each isometry of the grid (:func:`~ugw_embed.grid_symmetries`:
        the plane's and torus' 7 non-trivial square symmetries, the circle's reflection)
        once on view 2's plan: permute its grid columns, continue ``SYMMETRY_STEPS`` block
        steps at the last ``lam`` from (plan 1, permuted plan 2), and keep the run with the
        lowest objective. It catches the local minimum where one view ends mirrored or
        rotated relative to the other (about 7 x ``SYMMETRY_STEPS`` extra block steps).
    seed : int, optional
        Seed of the initial couplings.
    tol : float
        Stop a ``lam`` stage early when the relative change of the objective is below it.
    sinkhorn_tol, sinkhorn_max_iter : float, int
        Inner multi-marginal Sinkhorn tolerance (relative L1 marginal error) and sweeps.
    device : {"cpu", "cuda", "auto"} or None
        ``None`` computes with NumPy; otherwise with torch in float64 on that device
        (``"auto"``: cuda if available, else cpu; Apple's MPS has no float64 and is
        refused).
    max_memory_gb : float
        Refuse problems whose estimated working memory exceeds this.

    Attributes
    ----------
    plan1_ : numpy.ndarray, shape (n1, k)
        Coupling of :math:`X_1` with the target grid.
    plan2_ : numpy.ndarray, shape (n2, k)
        Coupling of :math:`X_2` with the target grid.
    zeta1_, zeta2_ : numpy.ndarray, shape (k,)
        The measures :math:`\\pi_1, \\pi_2` on the grid.
    embedding1_, embedding2_ : numpy.ndarray, shape (n1, d), (n2, d)
        Barycentric projections of each point into the target space's coordinates.
    distance_ : float
        :math:`(\\int d_Z^2\\,d\\pi)^{1/2}` in the target space's units: the relaxed embedded
        Wasserstein value.
    objective_ : float
        The relaxed objective at the solution (scaled distances).
    space_ : TargetSpace
    n_iter_ : int
        Block steps taken in the kept restart.
    converged_ : bool
        Whether the last ``lam`` stage stopped on ``tol`` and every inner Sinkhorn converged.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((40, 3))
    >>> model = JointEmbedding(grid=12, lam=100.0, eps=5e-3, n_iter=10, seed=0).fit(
    ...     X, X @ np.eye(3)[::-1]
    ... )
    >>> model.embedding1_.shape
    (40, 2)
    """

    _parameter_constraints: ClassVar[dict] = {
        "space": [StrOptions(set(SPACES)), tuple],
        "lam": [Interval(Real, 0, None, closed="neither"), "array-like"],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "grid": [Interval(Integral, 2, None, closed="left")],
        "max_len": [Interval(Real, 0, None, closed="neither")],
        "init": [StrOptions({"perturbed", "product"})],
        "n_restarts": [Interval(Integral, 1, None, closed="left")],
        "symmetry_restarts": ["boolean"],
        "seed": ["random_state"],
        "tol": [Interval(Real, 0, None, closed="left")],
        "sinkhorn_tol": [Interval(Real, 0, None, closed="neither")],
        "sinkhorn_max_iter": [Interval(Integral, 1, None, closed="left")],
        "device": [str, None],
        "max_memory_gb": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        *,
        space: str | tuple[Any, Any] = "plane",
        lam: float | Sequence[float] = 1e3,
        eps: float = 1e-3,
        n_iter: int = 40,
        grid: int = 50,
        max_len: float = 1.0,
        init: str = "perturbed",
        n_restarts: int = 1,
        symmetry_restarts: bool = False,
        seed: int | None = None,
        tol: float = 1e-6,
        sinkhorn_tol: float = 1e-5,
        sinkhorn_max_iter: int = 5000,
        device: str | None = None,
        max_memory_gb: float = 8.0,
    ):
        self.space = space
        self.lam = lam
        self.eps = eps
        self.n_iter = n_iter
        self.grid = grid
        self.max_len = max_len
        self.init = init
        self.n_restarts = n_restarts
        self.symmetry_restarts = symmetry_restarts
        self.seed = seed
        self.tol = tol
        self.sinkhorn_tol = sinkhorn_tol
        self.sinkhorn_max_iter = sinkhorn_max_iter
        self.device = device
        self.max_memory_gb = max_memory_gb

    # -- input handling -----------------------------------------------------------------------

    def _schedule(self) -> list[float]:
        lams = [self.lam] if np.isscalar(self.lam) else list(self.lam)
        if not lams:
            raise ValueError("lam must be a positive number or a non-empty increasing sequence")
        for v in lams:
            check_scalar(v, "lam", low=0.0, low_inclusive=False)
        if any(b < a for a, b in pairwise(lams)):
            raise ValueError(f"lam schedule must be increasing, got {lams}")
        return [float(v) for v in lams]

    @staticmethod
    def _distances(X: Any, D: Any, name: str) -> np.ndarray:
        if (X is None) == (D is None):
            raise ValueError(f"give exactly one of X{name} (points) and D{name} (distances)")
        if X is not None:
            X = as_float_array(X, f"X{name}", ndim=2)
            if X.shape[0] < 2:
                raise ValueError(f"X{name} must have at least 2 points, got {X.shape[0]}")
            D = cdist(X, X)
        else:
            D = check_metric(D, f"D{name}")
            if D.shape[0] < 2:
                raise ValueError(f"D{name} must have at least 2 points, got {D.shape[0]}")
        top = D.max()
        if top <= 0:
            raise ValueError(f"X{name}/D{name} must have at least two distinct points")
        return D / top

    @staticmethod
    def _weights(w: Any, n: int, name: str) -> np.ndarray:
        if w is None:
            return np.full(n, 1.0 / n)
        w = as_float_array(w, name, positive=True, ndim=1)
        if w.shape[0] != n:
            raise ValueError(f"{name} must have one weight per point ({n}), got {w.shape[0]}")
        return w / w.sum()

    def _check_memory(self, n1: int, n2: int, k: int) -> None:
        # k x k: target distances, their squares, scaled edge cost, one log-sum-exp temporary
        # and the middle plan; n x k: costs, plans and temporaries of both ends; n x n: the
        # input distances and their squares
        need = 8 * (5 * k * k + 8 * (n1 + n2) * k + 2 * (n1 * n1 + n2 * n2))
        if need > self.max_memory_gb * 2**30:
            raise MemoryError(
                f"a grid of {k} points with {n1} + {n2} samples needs about {need / 2**30:.1f} GiB, "
                f"more than max_memory_gb={self.max_memory_gb}; lower grid or raise max_memory_gb"
            )

    # -- fitting ------------------------------------------------------------------------------

    def fit(
        self,
        X1: Any = None,
        X2: Any = None,
        w1: Any = None,
        w2: Any = None,
        *,
        D1: Any = None,
        D2: Any = None,
    ):
        """Embed both datasets.

        Parameters
        ----------
        X1, X2 : array-like, shape (n1, p1), (n2, p2), optional
            Point clouds (Euclidean distances are used); feature dimensions may differ.
        w1, w2 : array-like, shape (n1,), (n2,), optional
            Positive weights (normalised to probability vectors); default uniform.
        D1, D2 : array-like, shape (n1, n1), (n2, n2), optional
            Precomputed distance matrices instead of points (graphs, non-Euclidean data).

        Both inputs are rescaled to maximal distance 1, the target space to ``max_len``.
        """
        self._validate_params()
        lams = self._schedule()
        d1 = self._distances(X1, D1, "1")
        d2 = self._distances(X2, D2, "2")
        xi1 = self._weights(w1, d1.shape[0], "w1")
        xi2 = self._weights(w2, d2.shape[0], "w2")
        if isinstance(self.space, str) and self.space in SPACES:
            check_scalar(self.grid, "grid", low=2, integer=True)
            self._check_memory(d1.shape[0], d2.shape[0], space_size(self.space, self.grid))
        space = make_space(self.space, self.grid)
        self._check_memory(d1.shape[0], d2.shape[0], space.size)
        check_scalar(self.max_len, "max_len", low=0.0, low_inclusive=False)  # NaN and inf too
        dz_scale = float(space.distances.max()) / self.max_len  # space units per solver unit
        dz = space.distances / dz_scale

        to, back = _converters(self.device)
        d1t, d2t, dzt, xi1t, xi2t = (to(x) for x in (d1, d2, dz, xi1, xi2))
        rng = np.random.default_rng(self.seed)
        best = None
        uniform = np.full(space.size, 1.0 / space.size)
        for restart in range(self.n_restarts):
            if restart == 0:
                P1, P2 = np.outer(xi1, uniform), np.outer(xi2, uniform)
                if self.init == "perturbed":
                    P1 = _perturbed_product(xi1, space.size, rng)
                P1, P2 = to(P1), to(P2)
            else:
                P1 = to(_random_coupling(xi1, space.size, rng))
                P2 = to(_random_coupling(xi2, space.size, rng))
            run = self._solve(d1t, d2t, dzt, xi1t, xi2t, P1, P2, lams)
            if best is None or run["objective"] < best["objective"]:
                best = run
        assert best is not None
        if self.symmetry_restarts:
            for perm in grid_symmetries(space):
                run = self._solve(
                    d1t,
                    d2t,
                    dzt,
                    xi1t,
                    xi2t,
                    best["P1"],
                    best["P2"][:, perm],
                    lams[-1:],
                    steps=SYMMETRY_STEPS,
                )
                run["n_iter"] += best["n_iter"]
                if run["objective"] < best["objective"]:
                    best = run
        self.space_ = space
        self.plan1_ = back(best["P1"])
        self.plan2_ = back(best["P2"])
        self.zeta1_ = self.plan1_.sum(0)
        self.zeta2_ = self.plan2_.sum(0)
        self.embedding1_ = space.project(
            (self.plan1_ @ space.points) / self.plan1_.sum(1, keepdims=True)
        )
        self.embedding2_ = space.project(
            (self.plan2_ @ space.points) / self.plan2_.sum(1, keepdims=True)
        )
        self.distance_ = math.sqrt(max(best["transport"], 0.0)) * dz_scale
        self.objective_ = best["objective"]
        self.n_iter_ = best["n_iter"]
        self.converged_ = best["converged"]
        return self

    def _solve(self, d1, d2, dz, xi1, xi2, P1, P2, lams, steps=None) -> dict[str, Any]:
        n_steps = self.n_iter if steps is None else steps
        C2 = dz**2
        warm = None
        n_iter = 0
        prev = math.inf
        inner_ok = True
        # linearised GW costs at the current couplings: they also give the objective's GW
        # energies, so each block step computes them once
        G1 = gw_cost(d1, dz, xi1, P1.sum(0), P1)
        G3 = gw_cost(d2, dz, xi2, P2.sum(0), P2)
        for lam in lams:
            converged = False
            for _ in range(n_steps):
                n_iter += 1
                C1 = lam * (G1 - G1.min())
                C3 = lam * (G3 - G3.min())
                scale = max(float(C1.max()), float(C2.max()), float(C3.max()))
                res = chain_sinkhorn(
                    [xi1, None, None, xi2],
                    [C1 / scale, C2 / scale, C3.T / scale],
                    self.eps,
                    tol=self.sinkhorn_tol,
                    max_iter=self.sinkhorn_max_iter,
                    warmstart=warm,
                )
                # a residual above 1 after the sweeps means the fixed marginals are off by
                # more than their whole mass: not slow convergence, a broken problem
                if not np.isfinite(res.residuals[-1]) or res.residuals[-1] > 1.0:
                    raise FloatingPointError(
                        f"the multi-marginal Sinkhorn diverged at lam={lam:g}, eps={self.eps:g}: "
                        "increase eps or lower lam"
                    )
                inner_ok = inner_ok and res.converged
                warm = res.potentials
                P1, P12, P2 = res.edge_plans[0], res.edge_plans[1], res.edge_plans[2].T
                transport = float((C2 * P12).sum())
                G1 = gw_cost(d1, dz, xi1, P1.sum(0), P1)
                G3 = gw_cost(d2, dz, xi2, P2.sum(0), P2)
                objective = transport + lam * float((G1 * P1).sum() + (G3 * P2).sum())
                if not math.isfinite(objective):
                    raise FloatingPointError(
                        f"the objective became non-finite at lam={lam:g}, eps={self.eps:g}: "
                        "increase eps or lower lam"
                    )
                change = abs(prev - objective) / max(abs(objective), 1e-300)
                prev = objective
                if change < self.tol:
                    converged = True
                    break
            prev = math.inf
        return {
            "P1": P1,
            "P2": P2,
            "objective": objective,
            "transport": transport,
            "n_iter": n_iter,
            "converged": converged and inner_ok,
        }


def _perturbed_product(xi: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """The product coupling ``xi x uniform`` times ``1 + 1e-3 N(0, 1)`` entrywise, rows
    renormalised to ``xi``: off the symmetric saddle, still close to the paper's start."""
    rows = 1.0 + 1e-3 * rng.normal(size=(xi.shape[0], k))
    return xi[:, None] * rows / rows.sum(1, keepdims=True)


def _random_coupling(xi: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """A random coupling with first marginal ``xi``: rows are softmaxes of Gaussian logits."""
    logits = rng.normal(size=(xi.shape[0], k))
    rows = np.exp(logits - logits.max(1, keepdims=True))
    return xi[:, None] * rows / rows.sum(1, keepdims=True)


def _converters(device: str | None):
    """Functions moving NumPy arrays to the compute backend and back."""
    if device is None:
        return (lambda x: x), (lambda x: np.asarray(x))
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"device={device!r} runs the solver in torch, which is not installed: "
            "pip install 'ugw-embed[torch]' (or device=None for NumPy)"
        ) from None

    dev = select_device(device)
    if dev.startswith("mps") and device == "auto":
        dev = "cpu"  # the best float64 device
    if dev.startswith("mps"):
        raise ValueError(
            "device 'mps' has no float64, which the log-domain solver needs at small eps; "
            "use device='cpu' or 'cuda'"
        )
    return (lambda x: torch.as_tensor(x, dtype=torch.float64, device=dev)), (
        lambda x: x.detach().cpu().numpy()
    )
