r"""DISC's two collaboration modules.

**Dynamic hierarchical collaboration.** At each collaborating main stage :math:`l`,

.. math:: f^m_l \leftarrow f^m_l + \lambda \sum_{s \in S(l)} T_{l,s}\big(\mathrm{sg}(f^a_s)\big),

over the auxiliary stages :math:`S(l)` up to the same depth (``sg``: no gradient to the
auxiliary expert). :math:`T_{l,s}` resamples the auxiliary map to the main one's shape,
read from the real feature maps: a 1x1 convolution + BatchNorm (+ nearest upsampling)
when the auxiliary map is not larger, a chain of stride-2 3x3 convolutions (BN, ReLU
between) when it is. Convolutions start at :math:`N(0, 10^{-6})`, BatchNorm at
:math:`\gamma = \beta = 0`: at initialization collaboration adds exactly zero.

**Dynamic selective collaboration.** Confidence networks (three linear layers without
activations and a sigmoid, as released) estimate each expert's true-class probability
:math:`c_m, c_a` from its pooled feature; the holographic weights

.. math:: h_m = \frac{\log c_a}{\log (c_m c_a)}, \qquad h_a = \frac{\log c_m}{\log (c_m c_a)}

(:math:`h_m + h_a = 1`; the denominator is kept below :math:`-10^{-6}`) and the
confidences give the fusion weights :math:`w = \mathrm{softmax}(c_m + h_m, c_a + h_a)`,
detached; the fused feature is :math:`w_m f^m + w_a f^a`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ConfidenceNet",
    "CosineSchedule",
    "HierarchicalCollaboration",
    "fusion_weights",
    "stage_transform",
]

_RELEASE_EPS = 1e-8
"""The release's ``+ 1e-8`` in the holographic denominator ``log(c_m c_a) + 1e-8``."""


class _Resize(nn.Module):
    """Nearest resampling to a fixed spatial size (a no-op when it already matches)."""

    def __init__(self, size: tuple[int, int]) -> None:
        super().__init__()
        self.size = tuple(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[-2:]) == self.size:
            return x
        return F.interpolate(x, size=self.size, mode="nearest")


def stage_transform(source: tuple[int, int, int], target: tuple[int, int, int]) -> nn.Sequential:
    """:math:`T_{l,s}`: an auxiliary map of shape ``source = (C, H, W)`` to the main
    map's ``target = (C', H', W')``, zero at initialization (see the module docstring)."""
    (c_s, h_s, w_s), (c_t, h_t, w_t) = source, target
    layers: list[nn.Module] = []
    if h_s <= h_t and w_s <= w_t:
        layers += [nn.Conv2d(c_s, c_t, 1, bias=False), nn.BatchNorm2d(c_t)]
    else:
        steps = max(1, math.ceil(math.log2(max(h_s / h_t, w_s / w_t))))
        for _ in range(steps - 1):
            layers += [nn.Conv2d(c_s, c_s, 3, 2, 1, bias=False), nn.BatchNorm2d(c_s), nn.ReLU()]
        layers += [nn.Conv2d(c_s, c_t, 3, 2, 1, bias=False), nn.BatchNorm2d(c_t)]
    layers.append(_Resize((h_t, w_t)))
    block = nn.Sequential(*layers)
    for m in block.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.normal_(m.weight, mean=0.0, std=1e-3)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)
    return block


class HierarchicalCollaboration(nn.Module):
    """The transforms :math:`T_{l,s}` for every collaborating main stage ``l`` and its
    auxiliary sources ``s``.

    Parameters
    ----------
    main_shapes, aux_shapes : mapping of str to (C, H, W)
        Each expert's stage output shapes (from a real forward pass).
    targets : sequence of str
        The main stages that receive auxiliary features.
    sources : mapping of str to sequence of str, optional
        Auxiliary stages summed into each target; by default every auxiliary stage up to
        the target's depth (stage ``i`` receives auxiliary stages ``1..i``).
    """

    def __init__(self, main_shapes, aux_shapes, targets, sources=None) -> None:
        super().__init__()
        main_names, aux_names = list(main_shapes), list(aux_shapes)
        unknown = [t for t in targets if t not in main_shapes]
        if unknown:
            raise ValueError(f"stages {unknown} are not stages of the main expert {main_names}")
        if sources is None:
            sources = {t: aux_names[: main_names.index(t) + 1] for t in targets}
        self.sources = {t: list(sources.get(t, ())) for t in targets}
        for t, srcs in self.sources.items():
            bad = [s for s in srcs if s not in aux_shapes]
            if bad:
                raise ValueError(
                    f"sources for {t!r} name {bad}, not stages of the auxiliary expert {aux_names}"
                )
            if not srcs:
                raise ValueError(f"stage {t!r} has no auxiliary source")
        self.transforms = nn.ModuleDict(
            {
                t: nn.ModuleDict({s: stage_transform(aux_shapes[s], main_shapes[t]) for s in srcs})
                for t, srcs in self.sources.items()
            }
        )

    def forward(self, target: str, aux_features: dict[str, torch.Tensor]) -> torch.Tensor:
        """The summed, resampled auxiliary contribution to main stage ``target``."""
        return sum(
            self.transforms[target][s](aux_features[s].detach()) for s in self.sources[target]
        )


class ConfidenceNet(nn.Sequential):
    """``Linear(d, 2d) -> Linear(2d, d) -> Linear(d, 1) -> sigmoid`` (no activations in
    between, as released): a pooled feature ``(B, d)`` to a confidence ``(B,)``-shaped
    ``(B, 1)`` in (0, 1)."""

    def __init__(self, dim: int) -> None:
        super().__init__(
            nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim), nn.Linear(dim, 1), nn.Sigmoid()
        )


def fusion_weights(tcp_main: torch.Tensor, tcp_aux: torch.Tensor) -> torch.Tensor:
    """Fusion weights ``(B, 2)`` (main, auxiliary; rows sum to 1) from the confidences
    ``(B,)`` or ``(B, 1)``: ``softmax(c + h)`` with the holographic weights
    ``h_m = log c_a / (log(c_m c_a) + 1e-8)``, ``h_a = log c_m / (...)``, the release's
    formula wherever it is defined. Where it is not: a confidence of exactly 0 (the
    release's NaN) enters as the smallest normal number, and a denominator of exactly 0
    gives both holographic weights 1/2."""
    c_m, c_a = tcp_main.reshape(-1), tcp_aux.reshape(-1)
    tiny = torch.finfo(c_m.dtype).tiny
    log_m, log_a = torch.log(c_m.clamp_min(tiny)), torch.log(c_a.clamp_min(tiny))
    denominator = log_m + log_a + _RELEASE_EPS
    zero = denominator == 0
    denominator = torch.where(zero, torch.ones_like(denominator), denominator)
    half = torch.full_like(denominator, 0.5)
    holo_m = torch.where(zero, half, log_a / denominator)
    holo_a = torch.where(zero, half, log_m / denominator)
    return torch.softmax(torch.stack([c_m + holo_m, c_a + holo_a], dim=1), dim=1)


class CosineSchedule:
    """``lambda(step)``: a cosine decay from ``start`` to ``end`` over ``steps`` steps, then
    ``end``. (The released ``CosineDecay`` computes ``|sin|``, a rise and fall, and is not
    used by the released model, which fixes lambda at 0.59.)"""

    def __init__(self, start: float, end: float, steps: int) -> None:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.start, self.end, self.steps = float(start), float(end), int(steps)

    def __call__(self, step: int) -> float:
        t = min(max(step, 0), self.steps) / self.steps
        return self.end + 0.5 * (self.start - self.end) * (1 + math.cos(math.pi * t))
