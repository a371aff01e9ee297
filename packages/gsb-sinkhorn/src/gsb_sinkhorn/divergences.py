r"""Divergences of the generalized static Schrödinger bridge.

A divergence is given by a strictly convex :math:`\varphi`, through

- :math:`\psi = (\varphi')^{-1}`, strictly increasing: the optimal plan is
  :math:`\pi_{ij} = R_{ij}\,\psi\big((f_i + g_j - C_{ij})/\varepsilon\big)`;
- :math:`\psi'`, for Newton's method;
- :math:`\varphi^*`, the convex conjugate, for the dual objective
  (:math:`(\varphi^*)' = \psi`);
- :math:`\varphi`, for the primal objective (optional);
- the open interval where :math:`\psi` is defined.

Callables receive arrays of the caller's type (NumPy or torch) and must return the same
type; :func:`ot.backend.get_backend` helps to write them once for both.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from ot.backend import get_backend

ArrayFn = Callable[[Any], Any]


def _expm1(x: Any) -> Any:
    """``exp(x) - 1`` accurate near 0, for NumPy arrays and torch tensors alike."""
    return x.expm1() if hasattr(x, "expm1") else np.expm1(x)


def _log1p(x: Any) -> Any:
    """``log(1 + x)`` accurate near 0, for NumPy arrays and torch tensors alike."""
    return x.log1p() if hasattr(x, "log1p") else np.log1p(x)


def _xlogx(x: Any) -> Any:
    """``x log x`` with ``0 log 0 = 0``."""
    nx = get_backend(x)
    safe = nx.where(x > 0, x, nx.ones(x.shape, type_as=x))
    return nx.where(x > 0, x * nx.log(safe), nx.zeros(x.shape, type_as=x))


@dataclass(frozen=True)
class Divergence:
    r"""A strictly convex :math:`\varphi` described through :math:`\psi = (\varphi')^{-1}`.

    Parameters
    ----------
    name : str
        Name used in logs and reports.
    psi : callable
        :math:`\psi(t)`, strictly increasing on ``domain``; elementwise.
    dpsi : callable
        :math:`\psi'(t) > 0`; elementwise.
    conjugate : callable, optional
        :math:`\varphi^*(t)` with :math:`(\varphi^*)' = \psi`; needed by
        :func:`~gsb_sinkhorn.dual_objective`.
    phi : callable, optional
        :math:`\varphi(x)`; needed by :func:`~gsb_sinkhorn.primal_objective`.
    domain : tuple of float
        Open interval ``(low, high)`` of the arguments ``t`` where :math:`\psi` is defined.
    psi_range : tuple of float
        Infimum and supremum of :math:`\psi` over the domain; marginals outside
        ``R``-weighted multiples of this range are infeasible.
    psi_dpsi : callable, optional
        Both at once, ``t -> (psi(t), dpsi(t))``, when sharing work is cheaper (the
        presets do); Newton's method then calls it once per evaluation.
    validate : bool
        Check on a grid that ``psi`` is finite and strictly increasing and that ``dpsi``
        matches its finite differences (default ``True``).

    Examples
    --------
    The KL preset rebuilt by hand:

    >>> import numpy as np
    >>> kl = Divergence("my-kl", psi=np.exp, dpsi=np.exp, conjugate=np.exp)
    """

    name: str
    psi: ArrayFn
    dpsi: ArrayFn
    conjugate: ArrayFn | None = None
    phi: ArrayFn | None = None
    domain: tuple[float, float] = (-math.inf, math.inf)
    psi_range: tuple[float, float] = (0.0, math.inf)
    psi_dpsi: Callable[[Any], tuple[Any, Any]] | None = None
    validate: bool = True

    def __post_init__(self) -> None:
        low, high = self.domain
        if not low < high:
            raise ValueError(
                f"domain must be an interval (low, high) with low < high, got {self.domain}"
            )
        if self.validate:
            self._check_monotone()

    def evaluate(self, t: Any) -> tuple[Any, Any]:
        """``(psi(t), dpsi(t))``, through ``psi_dpsi`` when given."""
        if self.psi_dpsi is not None:
            return self.psi_dpsi(t)
        return self.psi(t), self.dpsi(t)

    def _check_monotone(self) -> None:
        low, high = self.domain
        a = low if math.isfinite(low) else (high - 40.0 if math.isfinite(high) else -20.0)
        b = high if math.isfinite(high) else a + 40.0
        width = b - a
        t = np.linspace(a + 1e-3 * width, b - 1e-3 * width, 401)
        with np.errstate(all="ignore"):
            p = np.asarray(self.psi(t), dtype=float)
            d = np.asarray(self.dpsi(t), dtype=float)
        if p.shape != t.shape or not np.all(np.isfinite(p)):
            raise ValueError(
                f"psi of divergence {self.name!r} must be finite elementwise on its domain {self.domain}"
            )
        if not np.all(np.diff(p) > 0):
            raise ValueError(
                f"psi of divergence {self.name!r} must be strictly increasing on its domain {self.domain}"
            )
        if d.shape != t.shape or not np.all(np.isfinite(d) & (d > 0)):
            raise ValueError(
                f"dpsi of divergence {self.name!r} must be finite and positive on its domain {self.domain}"
            )
        if self.psi_dpsi is not None:
            with np.errstate(all="ignore"):
                both = tuple(np.asarray(v, dtype=float) for v in self.psi_dpsi(t))
            if not (np.allclose(both[0], p, rtol=1e-12) and np.allclose(both[1], d, rtol=1e-12)):
                raise ValueError(
                    f"psi_dpsi of divergence {self.name!r} must return (psi(t), dpsi(t))"
                )
        h = 1e-6 * np.maximum(1.0, np.abs(t))
        inner = (t - h > a) & (t + h < b)
        with np.errstate(all="ignore"):
            fd = (np.asarray(self.psi(t + h)) - np.asarray(self.psi(t - h))) / (2 * h)
        scale = np.maximum(np.abs(d), 1e-300)
        bad = inner & (np.abs(fd - d) > 1e-4 * scale + 1e-10)
        if np.any(bad):
            t0 = float(t[np.argmax(bad)])
            raise ValueError(
                f"dpsi of divergence {self.name!r} does not match the derivative of psi "
                f"(at t={t0:.4g}: dpsi={float(d[np.argmax(bad)]):.6g}, finite difference "
                f"{float(fd[np.argmax(bad)]):.6g})"
            )


# --- KL / entropy: phi(x) = x log x - x, psi = exp --------------------------------------------


def _exp(t: Any) -> Any:
    return get_backend(t).exp(t)


def _kl_phi(x: Any) -> Any:
    return _xlogx(x) - x


KL = Divergence("kl", psi=_exp, dpsi=_exp, conjugate=_exp, phi=_kl_phi, validate=False)


# --- logistic: phi(x) = x log x + (1-x) log(1-x), psi = sigmoid --------------------------------


def _sigmoid_pair(t: Any) -> tuple[Any, Any]:
    """(sigmoid(t), sigmoid(-t)) without overflow and without cancellation."""
    nx = get_backend(t)
    e = nx.exp(-nx.abs(t))
    pos, neg = 1.0 / (1.0 + e), e / (1.0 + e)
    return nx.where(t >= 0, pos, neg), nx.where(t >= 0, neg, pos)


def _logistic_psi(t: Any) -> Any:
    return _sigmoid_pair(t)[0]


def _logistic_dpsi(t: Any) -> Any:
    s, r = _sigmoid_pair(t)
    return s * r


def _logistic_both(t: Any) -> tuple[Any, Any]:
    s, r = _sigmoid_pair(t)
    return s, s * r


def _softplus(t: Any) -> Any:
    nx = get_backend(t)
    return nx.maximum(t, nx.zeros(t.shape, type_as=t)) + _log1p(nx.exp(-nx.abs(t)))


def _logistic_phi(x: Any) -> Any:
    return _xlogx(x) + _xlogx(1.0 - x)


LOGISTIC = Divergence(
    "logistic",
    psi=_logistic_psi,
    dpsi=_logistic_dpsi,
    conjugate=_softplus,
    phi=_logistic_phi,
    psi_range=(0.0, 1.0),
    psi_dpsi=_logistic_both,
    validate=False,
)


# --- contingency (Barvinok): phi(x) = x log x - (1+x) log(1+x), psi(t) = 1/(e^{-t} - 1), t < 0 -


def _contingency_psi(t: Any) -> Any:
    return 1.0 / _expm1(-t)


def _contingency_dpsi(t: Any) -> Any:
    p = _contingency_psi(t)
    return p * (1.0 + p)


def _contingency_both(t: Any) -> tuple[Any, Any]:
    p = _contingency_psi(t)
    return p, p * (1.0 + p)


def _contingency_conjugate(t: Any) -> Any:
    return -get_backend(t).log(-_expm1(t))


def _contingency_phi(x: Any) -> Any:
    return _xlogx(x) - _xlogx(1.0 + x)


CONTINGENCY = Divergence(
    "contingency",
    psi=_contingency_psi,
    dpsi=_contingency_dpsi,
    conjugate=_contingency_conjugate,
    phi=_contingency_phi,
    domain=(-math.inf, 0.0),
    psi_dpsi=_contingency_both,
    validate=False,
)

PRESETS: dict[str, Divergence] = {d.name: d for d in (KL, LOGISTIC, CONTINGENCY)}


def get_divergence(divergence: str | Divergence) -> Divergence:
    """A preset by name (``"kl"``, ``"logistic"``, ``"contingency"``, in any case) or the
    given one."""
    if isinstance(divergence, Divergence):
        return divergence
    if isinstance(divergence, str) and divergence.lower() in PRESETS:
        return PRESETS[divergence.lower()]  # "KL" as well as "kl"
    raise ValueError(
        f"divergence must be one of {sorted(PRESETS)} or a Divergence instance, got {divergence!r}"
    )
