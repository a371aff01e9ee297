r"""Noise schedules for the smoothed source of OTP.

OTP trains the semi-dual problem between the smoothed source
:math:`\mu_\varepsilon = \mathrm{Law}(X + \varepsilon Z)`, :math:`Z \sim \mathcal N(0, I)`,
and the target, and lowers :math:`\varepsilon` during training. A schedule maps the
training step :math:`t = 0, 1, \dots` to :math:`\varepsilon_t \ge 0`.

The paper (Choi, Choi, Kwon, ICML 2025) proves convergence of the learned plans as
:math:`\varepsilon \to 0` but does not publish the schedule it used. The default here is
:class:`GeometricSchedule` ``(start=1.0, floor=source_floor(source), decay=0.999)``: start
wide, so that the smoothed source is close to a Gaussian whatever the data, shrink by 0.1 %
per step (a floor of 0.2 is reached after 1609 steps), and stop at a floor. The floor
matters: at :math:`\varepsilon = 0` a degenerate source has spurious semi-dual solutions
again, and the map network must grow steeper as :math:`\varepsilon` falls, which makes the
max-min problem worse conditioned (Chu, Choi, Kwon 2026 make this precise and derive a
terminal level from the sample size). On the package's 2-D tasks a floor of 0.2 gave lower
W2 to the target than 0.1 or 0.05 at the same training length (see the package README);
:func:`source_floor` raises it for sources made of a few atoms. Values are in units of the
target's scale when OTP's ``relative_noise`` is on (the default).

Schedules are plain objects that serialise to a dict (``to_dict`` /
:func:`schedule_from_dict`), so a saved model records the schedule it was trained with.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch

from icml25_core import check_scalar

DEFAULT_FLOOR = 0.2


@dataclass(frozen=True)
class NoiseSchedule:
    """Base class: ``schedule(step) -> epsilon``. Subclasses implement :meth:`value`."""

    kind: ClassVar[str] = ""

    def value(self, step: int) -> float:
        raise NotImplementedError

    def __call__(self, step: int) -> float:
        check_scalar(step, "step", low=0, integer=True)
        return float(self.value(int(step)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description; :func:`schedule_from_dict` inverts it."""
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class ConstantSchedule(NoiseSchedule):
    """:math:`\\varepsilon_t = \\varepsilon` for every step (``eps=0`` is plain semi-dual OT)."""

    eps: float = 0.1
    kind: ClassVar[str] = "constant"

    def __post_init__(self):
        check_scalar(self.eps, "eps", low=0.0)

    def value(self, step: int) -> float:
        return self.eps


@dataclass(frozen=True)
class GeometricSchedule(NoiseSchedule):
    r""":math:`\varepsilon_t = \max(\text{floor}, \text{start} \cdot \text{decay}^{t})`.

    Parameters
    ----------
    start : float
        Noise level at step 0, ``> 0``.
    floor : float
        Lowest level, ``0 <= floor <= start``; reached after
        :math:`\log(\text{floor}/\text{start}) / \log(\text{decay})` steps.
    decay : float
        Factor per step, ``0 < decay <= 1``.
    """

    start: float = 1.0
    floor: float = 0.2
    decay: float = 0.999
    kind: ClassVar[str] = "geometric"

    def __post_init__(self):
        check_scalar(self.start, "start", low=0.0, low_inclusive=False)
        check_scalar(self.floor, "floor", low=0.0, high=self.start)
        check_scalar(self.decay, "decay", low=0.0, high=1.0, low_inclusive=False)

    def value(self, step: int) -> float:
        return max(self.floor, self.start * self.decay**step)

    def steps_to_floor(self) -> int | None:
        """Steps until the floor is reached (``None`` if never: floor 0 or decay 1)."""
        if self.floor <= 0 or self.decay == 1.0:
            return None if self.floor < self.start else 0
        return max(0, math.ceil(math.log(self.floor / self.start) / math.log(self.decay)))


@dataclass(frozen=True)
class _AnnealedSchedule(NoiseSchedule):
    """From ``start`` to ``floor`` over ``n_steps`` steps, then ``floor``; subclasses give
    the shape through :meth:`shape` on the fraction of steps done."""

    start: float = 1.0
    floor: float = 0.2
    n_steps: int = 1000

    def __post_init__(self):
        check_scalar(self.start, "start", low=0.0)
        check_scalar(self.floor, "floor", low=0.0, high=self.start)
        check_scalar(self.n_steps, "n_steps", low=1, integer=True)

    def shape(self, frac: float) -> float:
        """Fraction of the way from ``start`` to ``floor`` after ``frac`` of the steps."""
        raise NotImplementedError

    def value(self, step: int) -> float:
        frac = min(1.0, step / self.n_steps)
        return self.start + self.shape(frac) * (self.floor - self.start)


@dataclass(frozen=True)
class LinearSchedule(_AnnealedSchedule):
    r""":math:`\varepsilon` falls linearly from ``start`` to ``floor`` over ``n_steps`` steps."""

    kind: ClassVar[str] = "linear"

    def shape(self, frac: float) -> float:
        return frac


@dataclass(frozen=True)
class CosineSchedule(_AnnealedSchedule):
    r"""Half-cosine from ``start`` to ``floor`` over ``n_steps`` steps, then ``floor``."""

    kind: ClassVar[str] = "cosine"

    def shape(self, frac: float) -> float:
        return 0.5 * (1.0 - math.cos(math.pi * frac))


def source_floor(source: torch.Tensor, dim: int, *, floor: float = DEFAULT_FLOOR) -> float:
    r"""The default noise floor for a source, in units of the target's scale.

    :math:`\max(\text{floor}, K^{-1/d})` when the sample ``source`` ``(n, *shape)`` (distinct
    draws) holds only :math:`K < n` distinct points, i.e. the source is a measure with
    atoms; ``floor`` otherwise (a sample of a continuous measure, however degenerate its
    support: a segment, a curve).

    Why: each atom carries mass :math:`1/K` and the plan must spread it over a part of the
    target holding that mass, whose linear size is about :math:`s K^{-1/d}` for a target of
    scale :math:`s` in :math:`d` dimensions (``dim``: the target's number of coordinates).
    Smoothed with noise much narrower than that, the atom's blob must be stretched by the
    ratio, and the max-min training degrades as the stretch grows: on 4 point masses ->
    moons the W2 to the target rose from 0.21 to 0.55 while the noise fell from 0.4 to 0.2
    (in target scales). With the noise at the floor equal to that size no stretch is
    needed; for one atom (a Dirac) the floor is 1, the start of the default schedule. The
    price is optimality: the plan of the smoothed source is farther from the optimal plan
    (its ``cost_gap`` grows with the noise).
    """
    check_scalar(dim, "dim", low=1, integer=True)
    check_scalar(floor, "floor", low=0.0)
    k = n_atoms(source)
    return float(floor) if k >= source.shape[0] else max(float(floor), k ** (-1.0 / dim))


def n_atoms(source: torch.Tensor) -> int:
    """Number of distinct points in a sample ``(n, *shape)``."""
    return int(torch.unique(source.flatten(1), dim=0).shape[0])


SCHEDULES: dict[str, type[NoiseSchedule]] = {
    cls.kind: cls for cls in (ConstantSchedule, GeometricSchedule, LinearSchedule, CosineSchedule)
}


def schedule_from_dict(spec: dict[str, Any]) -> NoiseSchedule:
    """Rebuild a schedule from :meth:`NoiseSchedule.to_dict`."""
    if not isinstance(spec, dict) or spec.get("kind") not in SCHEDULES:
        raise ValueError(
            f"spec must be a dict with 'kind' one of {sorted(SCHEDULES)}, got {spec!r}"
        )
    cls = SCHEDULES[spec["kind"]]
    expected = {f.name for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in spec.items() if k != "kind"}
    missing, unknown = sorted(expected - set(fields)), sorted(set(fields) - expected)
    if missing or unknown:
        raise ValueError(
            f"spec of a {spec['kind']!r} schedule must have exactly the fields "
            f"{sorted(expected)} (a saved schedule names them all); missing {missing}, "
            f"unknown {unknown}"
        )
    return cls(**fields)
