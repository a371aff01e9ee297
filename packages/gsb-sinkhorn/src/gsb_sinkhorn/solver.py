r"""Generalized Sinkhorn: exact block-coordinate ascent on the dual of the static bridge.

The problem, for a cost :math:`C \in \mathbb{R}^{n\times m}`, marginals :math:`a, b` of
equal mass, a reference :math:`R \ge 0` (default all ones) and :math:`\varepsilon > 0`:

.. math::
    \min_{\pi \ge 0,\ \pi 1 = a,\ \pi^\top 1 = b}
    \ \langle C, \pi\rangle + \varepsilon \sum_{ij} R_{ij}\, \varphi(\pi_{ij}/R_{ij}).

Its dual is

.. math::
    \max_{f, g}\ \langle a, f\rangle + \langle b, g\rangle
    - \varepsilon \sum_{ij} R_{ij}\, \varphi^*\big((f_i + g_j - C_{ij})/\varepsilon\big),

with the optimal plan :math:`\pi_{ij} = R_{ij}\,\psi((f_i + g_j - C_{ij})/\varepsilon)`,
:math:`\psi = (\varphi')^{-1}`. Sinkhorn's algorithm maximises the dual exactly in
:math:`f` for fixed :math:`g`, then in :math:`g` for fixed :math:`f`. Each block step splits
into independent one-dimensional monotone equations
:math:`\sum_j R_{ij}\psi(u_i + v_j - K_{ij}) = a_i`, solved here all at once by a safeguarded
Newton method inside a bisection bracket; for KL (:math:`\psi = \exp`) the step has a
closed form, taken as matrix-vector scaling on a kernel absorbed into the log potentials
(with exact log-sum-exp steps wherever that kernel would underflow).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from ot.backend import get_backend

from icml25_core import check_array, check_scalar

from .divergences import KL, Divergence, get_divergence

__all__ = [
    "ConvergenceWarning",
    "dual_objective",
    "marginal_error",
    "primal_objective",
    "sinkhorn",
]

_MAX_NEWTON = 100
_FIRST_CAP = 16.0  # first trust-region radius of a Newton step, in units of reg
_ABSORB = 30.0  # |log| of a KL scaling past which it is absorbed into the potentials


class ConvergenceWarning(UserWarning):
    """Sinkhorn stopped at ``max_iter`` before the marginal residual reached ``tol``."""


def _is_numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _inputs(names: tuple[str, ...], *xs: Any, like: Any = None) -> list[Any]:
    """The arrays ``xs`` (named ``names`` in errors) in one backend.

    Lists and pandas DataFrames / Series become NumPy arrays; NumPy arrays beside a torch
    tensor (or beside ``like``) become tensors on its device, floats in its float dtype,
    as a POT user mixing them means. Refused, naming the argument: non-numeric, boolean
    or complex values (a cast would drop the imaginary part), half precision (float16,
    bfloat16: the log-domain updates need float32 at least) and meta tensors (no data).
    ``None`` passes through.
    """
    out: list[Any] = []
    for name, x in zip(names, xs, strict=True):
        if x is None:
            out.append(None)
            continue
        if not _is_torch(x) and not _is_numpy(x):
            x = np.asarray(x.to_numpy() if hasattr(x, "to_numpy") else x)  # pandas, lists
        dtype = str(x.dtype).replace("torch.", "")
        if _is_torch(x):
            if x.is_complex() or dtype == "bool":
                raise TypeError(f"{name} must be a real numeric tensor, got dtype {x.dtype}")
            if x.device.type == "meta":
                raise ValueError(f"{name} is a meta tensor (it holds no data)")
        elif x.dtype.kind not in "iuf":
            kind = "real" if x.dtype.kind == "c" else "numeric"
            raise TypeError(f"{name} must be {kind}, got dtype {x.dtype}")
        if dtype in ("float16", "bfloat16"):
            raise TypeError(
                f"{name} must be float32 or float64, got {dtype}: the log-domain Sinkhorn "
                "updates lose the marginals in half precision"
            )
        out.append(x)
    tensors = [x for x in (*out, like) if x is not None and _is_torch(x)]
    if tensors and any(_is_numpy(x) for x in out):
        import torch

        ref = next((t for t in tensors if t.is_floating_point()), tensors[0])
        floating = ref.dtype if ref.is_floating_point() else torch.float64
        out = [
            torch.as_tensor(x, device=ref.device, dtype=floating if x.dtype.kind == "f" else None)
            if _is_numpy(x)
            else x
            for x in out
        ]
    return out


def _index(idx: np.ndarray, like: Any, nx: Any) -> Any:
    """Integer indices (NumPy) in a form that indexes ``like``'s backend."""
    return idx if _is_numpy(like) else nx.from_numpy(idx)


def _submatrix(M: Any, ri: np.ndarray, ci: np.ndarray, nx: Any) -> Any:
    """Rows ``ri`` and columns ``ci`` of ``M``."""
    return M[_index(ri, M, nx)][:, _index(ci, M, nx)]


def _as_float(x: Any) -> Any:
    """Integer or boolean arrays as float64 (degree sequences, counts); floats unchanged."""
    if x is None or get_backend(x).is_floating_point(x):
        return x
    return x.astype(np.float64) if _is_numpy(x) else x.double()


def _eps(x: Any) -> float:
    return float(np.finfo(str(x.dtype).replace("torch.", "")).eps)


# --- block updates -----------------------------------------------------------------------------


def _expand(x: Any, axis: int) -> Any:
    """Broadcast a row potential (axis=1) or a column potential (axis=0) against (n, m)."""
    return x[:, None] if axis == 1 else x[None, :]


def _lse(other: Any, K: Any, axis: int, nx: Any, buf: np.ndarray | None) -> Any:
    """log sum over ``axis`` of exp(other - K), ``other`` broadcast along the reduced axis."""
    if buf is None:
        return nx.logsumexp(_expand(other, 1 - axis) - K, axis=axis)
    np.subtract(_expand(other, 1 - axis), K, out=buf)
    mx = buf.max(axis=axis, keepdims=True)
    mx[~np.isfinite(mx)] = 0.0
    buf -= mx
    np.exp(buf, out=buf)
    with np.errstate(divide="ignore"):
        return np.log(buf.sum(axis=axis)) + mx.reshape(-1)


def _kl_step(
    x: Any, other: Any, K: Any, target: Any, log_target: Any, axis: int, nx: Any, buf: Any
):
    """Closed-form KL update of the potential ``x`` (rows if axis=1, columns if axis=0).

    Returns the new potential and ``marginal(x) - target`` at the old one.
    """
    lse = _lse(other, K, axis, nx, buf)
    return log_target - lse, nx.exp(x + lse) - target


def _newton_step(
    x0: Any,
    other: Any,
    K: Any,
    R: Any,
    mask: Any,
    target: Any,
    div: Divergence,
    axis: int,
    nx: Any,
    inner_rtol: float,
):
    r"""Solve :math:`\sum R\,\psi(x + \text{other} - K) = \text{target}` along ``axis``.

    Vectorised over the free index: Newton's method on :math:`\log S(x) = \log(\text{target})`
    (:math:`S` the marginal, increasing in :math:`x`), safeguarded inside a bracket that
    tightens at every evaluation; bisection (or bracket expansion, doubling, while one side
    is open) whenever a Newton step is not finite, would leave the bracket or fails to halve
    the step of two iterations ago.

    Returns the new potential and ``marginal(x0) - target`` at the starting point.
    """
    W = _expand(other, 1 - axis) - K
    if mask is not None:
        W = nx.where(mask, W, -math.inf * nx.ones(W.shape, type_as=W))
    low, high = div.domain
    inf = math.inf * nx.ones(target.shape, type_as=target)
    hi = high - nx.max(W, axis=axis) if math.isfinite(high) else inf
    if math.isfinite(low):
        Wmin = W if mask is None else nx.where(mask, W, math.inf * nx.ones(W.shape, type_as=W))
        lo = low - nx.min(Wmin, axis=axis)
    else:
        lo = -inf
    eps = _eps(target)
    # start strictly inside the bracket (the warm start can sit outside it at the first step)
    both = nx.isfinite(lo) & nx.isfinite(hi)
    inside = (x0 > lo) & (x0 < hi)
    zero = 0 * target
    lo_f, hi_f = nx.where(nx.isfinite(lo), lo, zero), nx.where(nx.isfinite(hi), hi, zero)
    fallback = nx.where(
        both, 0.5 * (lo_f + hi_f), nx.where(nx.isfinite(hi), hi_f - 1.0, lo_f + 1.0)
    )
    x = nx.where(inside, x0, fallback)
    cap = _FIRST_CAP * nx.ones(target.shape, type_as=target)  # trust region, doubles when hit
    dx_old = inf
    dx_older = inf
    first_residual = None
    for _ in range(_MAX_NEWTON):
        t = _expand(x, axis) + W
        p, d = div.evaluate(t)
        if R is not None:
            p, d = R * p, R * d
            if mask is not None:
                zeros = nx.zeros(p.shape, type_as=p)
                p, d = nx.where(mask, p, zeros), nx.where(mask, d, zeros)
        S = nx.sum(p, axis=axis)
        h = S - target
        if first_residual is None:
            first_residual = nx.where(inside, h, inf)
        lo = nx.where(h < 0, x, lo)
        hi = nx.where(h > 0, x, hi)
        # Newton on log S(x) = log target: exact in one step for psi = exp, and well scaled
        # in exponential tails where S itself is flat; 0 * inf -> NaN falls back below
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            dx = -(nx.log(S) - nx.log(target)) * S / nx.sum(d, axis=axis)
        done = (nx.abs(h) <= inner_rtol * target) | (
            nx.abs(dx) <= 4 * eps * nx.maximum(nx.abs(x), 1.0 + 0 * x)
        )
        if bool(done.all()):
            break
        # where psi saturates the Newton step is huge: stay within the trust region
        hit = nx.abs(dx) > cap
        dx = nx.where(hit, nx.where(dx > 0, cap, -cap), dx)
        newton = x + dx
        both = nx.isfinite(lo) & nx.isfinite(hi)
        ok = nx.isfinite(newton) & (newton > lo) & (newton < hi)
        ok = ok & ~(both & (nx.abs(dx) > 0.5 * nx.abs(dx_older)))  # rtsafe: must keep shrinking
        bisect = 0.5 * (nx.where(both, lo, zero) + nx.where(both, hi, zero))
        expand = nx.where(h < 0, x + cap, x - cap)
        cap = nx.where(hit | ~(ok | both), 2.0 * cap, cap)
        x_new = nx.where(ok, newton, nx.where(both, bisect, expand))
        dx_older, dx_old = dx_old, x_new - x
        x = nx.where(done, x, x_new)
    return x, first_residual


# --- validation --------------------------------------------------------------------------------


def _validate(
    a: Any,
    b: Any,
    C: Any,
    R: Any,
    reg: float,
    tol: float,
    max_iter: int,
    div: Divergence,
    names: tuple[str, str, str] = ("C", "tol", "max_iter"),
):
    """Check the inputs; ``names`` are the caller's names for the cost, tolerance and
    iteration cap, so errors name the argument the user passed."""
    cost, tol_name, iter_name = names
    check_array(C, cost, ndim=2)
    n, m = (int(s) for s in C.shape)
    check_array(a, "a", shape=(n,), nonnegative=True)
    check_array(b, "b", shape=(m,), nonnegative=True)
    if R is not None:
        check_array(R, "R", shape=(n, m), nonnegative=True)
    check_scalar(reg, "reg", low=0.0, low_inclusive=False)
    check_scalar(tol, tol_name, low=0.0, low_inclusive=False)
    check_scalar(max_iter, iter_name, low=1, integer=True)
    sa, sb = float(a.sum()), float(b.sum())
    if sa <= 0:
        raise ValueError("a must have positive total mass, got sum(a) = 0")
    slack = max(tol, 100 * _eps(C)) * max(sa, sb)
    if abs(sa - sb) > slack:
        raise ValueError(
            f"a and b must have the same total mass: sum(a) = {sa!r}, sum(b) = {sb!r} "
            f"(difference {abs(sa - sb):.3e} exceeds {slack:.3e})"
        )
    if div.psi_range[0] != 0.0 and (bool((a == 0).any()) or bool((b == 0).any())):
        raise ValueError(
            f"a and b must be positive for divergence {div.name!r}, whose psi is bounded below "
            f"by {div.psi_range[0]}"
        )


def _check_support(a: Any, b: Any, R: Any, div: Divergence, nx: Any) -> None:
    """Each positive marginal needs reachable mass: R-weighted psi range must cover it.

    ``a`` and ``b`` are positive here (zero marginals were taken out before).
    """
    top = div.psi_range[1]
    if R is None:
        if not math.isfinite(top):
            return
        caps = (b.shape[0] * nx.ones(a.shape, type_as=a), a.shape[0] * nx.ones(b.shape, type_as=b))
    else:
        caps = (nx.sum(R, axis=1), nx.sum(R, axis=0))
    for name, marg, cap in (("a", a, caps[0]), ("b", b, caps[1])):
        if bool(((marg > 0) & (cap == 0)).any()):
            i = int(np.argmax(nx.to_numpy((marg > 0) & (cap == 0))))
            raise ValueError(
                f"{name}[{i}] > 0 but R has no positive entry linking it to a positive "
                f"entry of the other marginal: the problem is infeasible"
            )
        if math.isfinite(top) and bool((marg >= top * cap).any()):
            i = int(np.argmax(nx.to_numpy(marg >= top * cap)))
            raise ValueError(
                f"{name}[{i}] = {float(marg[i])!r} is not below its largest reachable value "
                f"{float(top * cap[i])!r} (sup psi = {top} times the sum of R over the other "
                f"side's support) for divergence {div.name!r}: the problem is infeasible"
            )


# --- the solver --------------------------------------------------------------------------------


def sinkhorn(
    a: Any,
    b: Any,
    M: Any,
    reg: float = 1.0,
    divergence: str | Divergence = "kl",
    R: Any = None,
    numItermax: int = 10000,
    stopThr: float = 1e-9,
    log: bool = False,
    warn: bool = True,
    warmstart: tuple[Any, Any] | None = None,
):
    r"""Solve the generalized static Schrödinger bridge with Sinkhorn's algorithm.

    .. math::
        \pi^\star = \operatorname*{argmin}_{\pi \ge 0,\ \pi 1 = a,\ \pi^\top 1 = b}
        \ \langle M, \pi\rangle + \varepsilon \sum_{ij} R_{ij}\,\varphi(\pi_{ij}/R_{ij})

    and :math:`\pi^\star_{ij} = R_{ij}\,\psi((f_i + g_j - M_{ij})/\varepsilon)` with the dual
    potentials :math:`f, g`. Each iteration updates all :math:`g_j`, then all :math:`f_i`,
    by exact maximisation of the dual (see :mod:`gsb_sinkhorn.solver`). The paper proves
    that the marginal residual then decays linearly (geometrically).

    The arguments follow POT's :func:`ot.sinkhorn` (order and names), so a call written for
    POT, ``sinkhorn(a, b, M, reg, numItermax=..., stopThr=..., log=True)``, solves the same
    entropic OT problem here (``divergence="kl"``); the divergence comes after ``reg``.

    Parameters
    ----------
    a : array-like, shape (n,)
        Row marginal, non-negative. Zero entries give zero rows. Integer inputs (degree
        sequences, counts) are computed in float64.
    b : array-like, shape (m,)
        Column marginal, non-negative, with the same total mass as ``a``.
    M : array-like, shape (n, m)
        Cost matrix.
    reg : float
        :math:`\varepsilon > 0`.
    divergence : {"kl", "logistic", "contingency"} or Divergence
        ``"kl"``: entropic OT (:math:`\psi = \exp`). ``"logistic"``: maximum-entropy
        matrices with entries in (0, 1), e.g. bipartite graphs with given expected degrees.
        ``"contingency"``: Barvinok's typical tables (:math:`\psi(t) = 1/(e^{-t} - 1)`).
    R : array-like, shape (n, m), optional
        Reference measure, non-negative; ``None`` means all ones. Zero entries force
        zeros in the plan.
    numItermax : int
        Maximum number of iterations (one column and one row update each).
    stopThr : float
        Stop when :math:`\|\pi 1 - a\|_1 \le \mathrm{stopThr}\cdot\|a\|_1` (the column
        marginal is exact after each iteration). POT's ``sinkhorn_knopp`` compares the
        Euclidean norm of the column violation instead; for unit mass ours is the stricter.
    log : bool
        Also return a dictionary with the potentials and the residual history.
    warn : bool
        Warn (``ConvergenceWarning``) when ``numItermax`` is reached first, as POT does.
    warmstart : tuple of array-like, optional
        Starting dual potentials as POT takes them, the logarithms of the scalings
        ``(log_u, log_v) = (f / reg, g / reg)``, shapes (n,) and (m,); for example
        ``(log["log_u"], log["log_v"])`` of a nearby problem. Default zeros.

    Returns
    -------
    plan : array-like, shape (n, m)
        The optimal coupling, in the type, dtype and device of the inputs.
    log : dict
        Only if ``log=True``: ``f`` (n,) and ``g`` (m,) the dual potentials in cost units
        (``-inf`` for zero marginals), ``log_u`` = ``f / reg`` and ``log_v`` = ``g / reg`` (as
        POT's ``sinkhorn_log`` names them), ``residuals`` (NumPy array, the relative residual
        after each iteration), ``n_iter``, ``converged``.

    Warns
    -----
    ConvergenceWarning
        If ``numItermax`` is reached before ``stopThr`` (and ``warn``);
        ``log["converged"]`` is then ``False``.

    Raises
    ------
    ValueError
        On negative or non-finite inputs, shape mismatch, unequal masses, ``reg <= 0``
        (also a string there: the divergence comes after ``reg`` since 0.2),
        or marginals that no plan with this divergence and ``R`` can reach.

    Examples
    --------
    >>> import numpy as np
    >>> from gsb_sinkhorn import sinkhorn
    >>> a, b = np.full(3, 1 / 3), np.full(2, 1 / 2)
    >>> C = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    >>> P = sinkhorn(a, b, C, reg=0.1)
    >>> np.allclose(P.sum(1), a) and np.allclose(P.sum(0), b)
    True

    References
    ----------
    R. Choudhary, H. Lyu. Linear convergence of Sinkhorn's algorithm for generalized static
    Schrödinger bridge. ICML 2025, PMLR 267:10741-10767.
    """
    if isinstance(reg, str | Divergence):
        raise TypeError(
            f"reg must be a positive number, got {reg!r}: since gsb-sinkhorn 0.2 the arguments "
            f"follow POT, sinkhorn(a, b, M, reg, divergence), e.g. sinkhorn(a, b, M, 0.1, {reg!r})"
        )
    C, tol, max_iter = M, stopThr, numItermax
    a, b, C, R = (_as_float(x) for x in _inputs(("a", "b", "M", "R"), a, b, C, R))
    div = get_divergence(divergence)
    _validate(a, b, C, R, reg, tol, max_iter, div, names=("M", "stopThr", "numItermax"))
    nx = get_backend(a, b, C) if R is None else get_backend(a, b, C, R)
    n, m = (int(s) for s in C.shape)

    rows = nx.to_numpy(a > 0).astype(bool)
    cols = nx.to_numpy(b > 0).astype(bool)
    reduced = not (rows.all() and cols.all())
    ri, ci = np.flatnonzero(rows), np.flatnonzero(cols)
    if reduced:
        a_s, b_s = a[_index(ri, a, nx)], b[_index(ci, b, nx)]
        C_s = _submatrix(C, ri, ci, nx)
        R_s = None if R is None else _submatrix(R, ri, ci, nx)
    else:
        a_s, b_s, C_s, R_s = a, b, C, R
    _check_support(a_s, b_s, R_s, div, nx)

    start = None if warmstart is None else _warmstart(warmstart, ri, ci, n, m, reg, nx, a)
    K_s = C_s / reg
    u, v, residuals, converged = _iterate(a_s, b_s, K_s, R_s, div, tol, max_iter, nx, start)
    plan_s = _plan(u, v, K_s, R_s, div, nx)

    if reduced:
        rows_idx, cols_idx = _index(ri, C, nx), _index(ci, C, nx)
        plan = nx.zeros((n, m), type_as=C)
        plan[rows_idx[:, None], cols_idx[None, :]] = plan_s
        f = -math.inf * nx.ones((n,), type_as=C)
        g = -math.inf * nx.ones((m,), type_as=C)
        f[rows_idx] = reg * u
        g[cols_idx] = reg * v
    else:
        plan, f, g = plan_s, reg * u, reg * v

    if not converged and warn:
        warnings.warn(
            f"Sinkhorn ({div.name}) did not reach stopThr={tol:g} in numItermax={max_iter} "
            f"iterations (last relative residual {residuals[-1]:.3e}); increase numItermax or "
            "reg, or check that the marginals are strictly feasible",
            ConvergenceWarning,
            stacklevel=2,
        )
    if not log:
        return plan
    return plan, {
        "f": f,
        "g": g,
        "log_u": f / reg,
        "log_v": g / reg,
        "residuals": np.asarray(residuals, dtype=float),
        "n_iter": len(residuals),
        "converged": converged,
    }


def _warmstart(warmstart, ri, ci, n, m, reg, nx, like=None):
    """Scaled starting potentials on the support of the marginals (NumPy potentials beside
    torch marginals ``like`` become tensors)."""
    if not isinstance(warmstart, tuple | list) or len(warmstart) != 2:
        raise ValueError("warmstart must be a pair (f, g) of potentials")
    f, g = _inputs(("warmstart[0]", "warmstart[1]"), *warmstart, like=like)
    check_array(f, "warmstart[0]", shape=(n,), finite=False)
    check_array(g, "warmstart[1]", shape=(m,), finite=False)
    f, g = f[_index(ri, f, nx)], g[_index(ci, g, nx)]
    check_array(f, "warmstart[0] on the support of a")
    check_array(g, "warmstart[1] on the support of b")
    return f, g


def _iterate(a, b, K, R, div, tol, max_iter, nx, start=None):
    """Alternate exact column and row updates until the row residual is below tol."""
    if div is KL:
        if R is not None:
            with np.errstate(divide="ignore"):
                K = K - nx.log(R)  # R folds into the kernel: pi = exp(u + v - K + log R)
        return _iterate_kl(a, b, K, tol, max_iter, nx, start)
    mass = float(nx.sum(a))
    u, v = start or (nx.zeros(a.shape, type_as=K), nx.zeros(b.shape, type_as=K))
    residuals: list[float] = []
    mask = None if R is None or bool((R > 0).all()) else R > 0
    inner = 0.01 * tol
    for _ in range(max_iter):
        v, _ = _newton_step(v, u, K, R, mask, b, div, 0, nx, inner)
        u_new, res = _newton_step(u, v, K, R, mask, a, div, 1, nx, inner)
        residuals.append(float(nx.sum(nx.abs(res))) / mass)
        if residuals[-1] <= tol:
            return u, v, residuals, True
        u = u_new
    return u, v, residuals, False


def _iterate_kl(a, b, K, tol, max_iter, nx, start=None):
    r"""KL Sinkhorn: scaling steps on a kernel absorbed in the log potentials.

    The plan is :math:`\exp(u_i + v_j - K_{ij})\,\alpha_i\beta_j` with the kernel
    :math:`G = \exp(u + v - K)` stored once; an iteration is then two matrix-vector
    products, :math:`\beta = b / G^\top\alpha` and :math:`\alpha = a / G\beta`, instead of
    two log-sum-exp passes. When a scaling leaves :math:`[e^{-30}, e^{30}]` it is absorbed
    (:math:`u \mathrel{+}= \log\alpha`, :math:`v \mathrel{+}= \log\beta`) and :math:`G` is
    recomputed, so no entry that matters underflows; a step that still produces a zero or
    non-finite value is redone as an exact log-domain step. The first step is always a
    log-domain step, which normalises the rows of :math:`G` whatever ``K``'s scale.
    Every step is the same exact block maximisation of the dual as in the log domain.
    """
    mass = float(nx.sum(a))
    buf = np.empty(K.shape, dtype=K.dtype) if _is_numpy(K) else None
    with np.errstate(divide="ignore"):
        log_a, log_b = nx.log(a), nx.log(b)
    u, v = start or (nx.zeros(a.shape, type_as=K), nx.zeros(b.shape, type_as=K))
    residuals: list[float] = []
    G = None  # exp(u + v - K) while valid; the iterate is (u + log alpha, v + log beta)
    alpha = nx.ones(a.shape, type_as=K)
    beta = nx.ones(b.shape, type_as=K)
    while len(residuals) < max_iter:
        if G is None:
            v, _ = _kl_step(v, u, K, b, log_b, 0, nx, buf)
            u_new, res = _kl_step(u, v, K, a, log_a, 1, nx, buf)
            residuals.append(float(nx.sum(nx.abs(res))) / mass)
            if residuals[-1] <= tol:
                return u, v, residuals, True
            u = u_new
            G = _kernel(u, v, K, nx, buf)
            alpha, beta = nx.ones(a.shape, type_as=K), nx.ones(b.shape, type_as=K)
            continue
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            beta_new = b / nx.dot(G.T, alpha)
            Gb = nx.dot(G, beta_new)
            alpha_new = a / Gb
        if not (_positive_finite(beta_new, nx) and _positive_finite(alpha_new, nx)):
            # a column or row of G underflowed: redo this step exactly in the log domain
            u, v, G = u + nx.log(alpha), v + nx.log(beta), None
            continue
        beta = beta_new
        residuals.append(float(nx.sum(nx.abs(alpha * Gb - a))) / mass)
        if residuals[-1] <= tol:
            return u + nx.log(alpha), v + nx.log(beta), residuals, True
        alpha = alpha_new
        if max(float(nx.max(nx.abs(nx.log(alpha)))), float(nx.max(nx.abs(nx.log(beta))))) > _ABSORB:
            u, v = u + nx.log(alpha), v + nx.log(beta)
            G = _kernel(u, v, K, nx, buf)
            alpha, beta = nx.ones(a.shape, type_as=K), nx.ones(b.shape, type_as=K)
    return u + nx.log(alpha), v + nx.log(beta), residuals, False


def _positive_finite(x: Any, nx: Any) -> bool:
    return bool((nx.isfinite(x) & (x > 0)).all())


def _kernel(u, v, K, nx, buf):
    """exp(u_i + v_j - K_ij), in ``buf`` when given (NumPy)."""
    if buf is None:
        return nx.exp(u[:, None] + v[None, :] - K)
    np.subtract(v[None, :], K, out=buf)
    buf += u[:, None]
    return np.exp(buf, out=buf)


def _plan(u, v, K, R, div, nx):
    t = u[:, None] + v[None, :] - K
    if div is KL:
        return nx.exp(t) if R is None else R * nx.exp(t)
    p = div.psi(t)
    if R is None:
        return p
    return nx.where(R > 0, R * p, nx.zeros(p.shape, type_as=p))


# --- objectives --------------------------------------------------------------------------------


def marginal_error(plan: Any, a: Any, b: Any, norm: float = 1) -> float:
    r""":math:`\|\pi 1 - a\| + \|\pi^\top 1 - b\|` in the given vector norm.

    Parameters
    ----------
    plan : array-like, shape (n, m)
    a : array-like, shape (n,)
    b : array-like, shape (m,)
    norm : float
        The vector norm's order (1, 2 or ``inf``).
    """
    plan, a, b = _inputs(("plan", "a", "b"), plan, a, b)
    check_array(plan, "plan", ndim=2)
    check_array(a, "a", shape=(plan.shape[0],))
    check_array(b, "b", shape=(plan.shape[1],))
    nx = get_backend(plan, a, b)
    r = nx.to_numpy(nx.sum(plan, axis=1) - a)
    c = nx.to_numpy(nx.sum(plan, axis=0) - b)
    return float(np.linalg.norm(r, ord=norm) + np.linalg.norm(c, ord=norm))


def dual_objective(
    a: Any,
    b: Any,
    C: Any,
    f: Any,
    g: Any,
    divergence: str | Divergence = "kl",
    reg: float = 1.0,
    R: Any = None,
) -> float:
    r"""The dual objective at potentials ``f``, ``g``.

    .. math::
        D(f, g) = \langle a, f\rangle + \langle b, g\rangle
        - \varepsilon \sum_{ij} R_{ij}\,\varphi^*\big((f_i + g_j - C_{ij})/\varepsilon\big)

    ``-inf`` potentials (zero marginals) contribute nothing. Outside the divergence's
    domain the objective is ``-inf``.
    """
    a, b, C, f, g, R = _inputs(("a", "b", "C", "f", "g", "R"), a, b, C, f, g, R)
    check_array(C, "C", ndim=2)
    n, m = (int(s) for s in C.shape)
    check_array(a, "a", shape=(n,))
    check_array(b, "b", shape=(m,))
    check_array(f, "f", shape=(n,), finite=False)
    check_array(g, "g", shape=(m,), finite=False)
    if R is not None:
        check_array(R, "R", shape=(n, m), nonnegative=True)
    div = get_divergence(divergence)
    if div.conjugate is None:
        raise ValueError(
            f"divergence {div.name!r} has no conjugate: pass conjugate= to compute the dual"
        )
    check_scalar(reg, "reg", low=0.0, low_inclusive=False)
    nx = get_backend(a, b, C, f, g)
    rows, cols = nx.to_numpy(nx.isfinite(f)), nx.to_numpy(nx.isfinite(g))
    ri, ci = np.flatnonzero(rows), np.flatnonzero(cols)
    rows_idx, cols_idx = _index(ri, f, nx), _index(ci, g, nx)
    f_s, g_s, a_s, b_s = f[rows_idx], g[cols_idx], a[rows_idx], b[cols_idx]
    C_s = _submatrix(C, ri, ci, nx)
    t = (f_s[:, None] + g_s[None, :] - C_s) / reg
    low, high = div.domain
    if bool((t >= high).any()) or bool((t <= low).any()):
        return -math.inf
    conj = div.conjugate(t)
    if R is not None:
        R_s = _submatrix(R, ri, ci, nx)
        conj = nx.where(R_s > 0, R_s * conj, nx.zeros(conj.shape, type_as=conj))
    return float(nx.sum(a_s * f_s) + nx.sum(b_s * g_s) - reg * nx.sum(conj))


def primal_objective(
    plan: Any, C: Any, divergence: str | Divergence = "kl", reg: float = 1.0, R: Any = None
) -> float:
    r"""The primal objective :math:`\langle C,\pi\rangle + \varepsilon\sum R\varphi(\pi/R)`.

    Entries with :math:`R_{ij} = 0` must have :math:`\pi_{ij} = 0` and contribute nothing.
    """
    plan, C, R = _inputs(("plan", "C", "R"), plan, C, R)
    check_array(plan, "plan", ndim=2, nonnegative=True)
    check_array(C, "C", shape=tuple(plan.shape))
    div = get_divergence(divergence)
    if div.phi is None:
        raise ValueError(f"divergence {div.name!r} has no phi: pass phi= to compute the primal")
    check_scalar(reg, "reg", low=0.0, low_inclusive=False)
    nx = get_backend(plan, C)
    if R is None:
        ent = nx.sum(div.phi(plan))
    else:
        check_array(R, "R", shape=tuple(plan.shape), nonnegative=True)
        pos = R > 0
        ratio = plan / nx.where(pos, R, nx.ones(R.shape, type_as=R))
        ent = nx.sum(nx.where(pos, R * div.phi(ratio), nx.zeros(R.shape, type_as=R)))
    return float(nx.sum(C * plan) + reg * ent)
