"""Networks of any width in NTK or standard parameterization, and the analytic ReLU NTK.

A dense layer maps ``g`` (``in_features``) to ``h = W g + b``. In the **NTK**
parameterization (Jacot et al. 2018) the weights are drawn ``W_ij, b_i ~ N(0, 1)`` and
the layer computes

.. math:: h = \\frac{\\sigma_w}{\\sqrt{n_{in}}} W g + \\sigma_b b,

so every entry of the NTK is O(1) in the width and gradient descent with a width-free
learning rate stays in the lazy (linear) regime as the width grows. In the **standard**
parameterization the same function at initialisation is written with the scale folded
into the draw, ``W_ij ~ N(0, sigma_w^2 / n_in)``, ``b_i ~ N(0, sigma_b^2)``, and
``h = W g + b`` (what ``torch.nn.Linear`` computes; its default init differs only in the
distribution). Convolutions use ``n_in = in_channels x kernel area``.

``MLP(parameterization="official")`` is the official code's regression network init:
the standard parameterization with every weight ``W_ij ~ N(0, 1.5 / width)`` (the hidden
width, whatever the layer's fan-in) and ``b_i ~ N(0, 0.1^2)``; ``sigma_w`` and ``sigma_b``
are not used.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn
from torch.nn import functional as F

from icml25_core import check_choice, check_scalar

__all__ = ["CNN", "MLP", "Conv2d", "Linear", "analytic_ntk"]

#: the networks' choices; layers take the first two
PARAMETERIZATIONS = ("ntk", "standard", "official")
OFFICIAL_WEIGHT_VARIANCE, OFFICIAL_BIAS_STD = 1.5, 0.1


def _check_common(parameterization: str, sigma_w: float, sigma_b: float) -> None:
    check_choice(parameterization, "parameterization", PARAMETERIZATIONS[:2])
    check_scalar(sigma_w, "sigma_w", low=0.0, low_inclusive=False)
    check_scalar(sigma_b, "sigma_b", low=0.0)


class _Scaled(nn.Module):
    """Weight and bias with the parameterization's draw and forward scale."""

    def _init_scaled(
        self,
        weight_shape: tuple[int, ...],
        fan_in: int,
        parameterization: str,
        sigma_w: float,
        sigma_b: float,
        generator: torch.Generator | None,
    ) -> None:
        _check_common(parameterization, sigma_w, sigma_b)
        self.parameterization = parameterization
        self.fan_in, self.sigma_w, self.sigma_b = fan_in, float(sigma_w), float(sigma_b)
        ntk = parameterization == "ntk"
        w = torch.randn(weight_shape, generator=generator)
        b = torch.randn(weight_shape[0], generator=generator)
        self.weight = nn.Parameter(w if ntk else w * (sigma_w / math.sqrt(fan_in)))
        self.bias = nn.Parameter(b if ntk else b * sigma_b)
        # the factors the forward pass applies (1 in the standard parameterization)
        self.w_scale = sigma_w / math.sqrt(fan_in) if ntk else 1.0
        self.b_scale = sigma_b if ntk else 1.0

    def extra_repr(self) -> str:
        return (
            f"parameterization={self.parameterization!r}, "
            f"sigma_w={self.sigma_w:g}, sigma_b={self.sigma_b:g}"
        )


class Linear(_Scaled):
    """A dense layer ``(..., in_features) -> (..., out_features)`` in the NTK or standard
    parameterization (module docstring)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        parameterization: str = "ntk",
        sigma_w: float = math.sqrt(2.0),
        sigma_b: float = 0.1,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        check_scalar(in_features, "in_features", low=1, integer=True)
        check_scalar(out_features, "out_features", low=1, integer=True)
        self.in_features, self.out_features = in_features, out_features
        self._init_scaled(
            (out_features, in_features), in_features, parameterization, sigma_w, sigma_b, generator
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.w_scale, self.bias * self.b_scale)


class Conv2d(_Scaled):
    """A ``k x k`` convolution ``(N, C_in, H, W) -> (N, C_out, H, W)`` (same padding) in
    the NTK or standard parameterization; ``n_in = C_in k^2``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        *,
        parameterization: str = "ntk",
        sigma_w: float = math.sqrt(2.0),
        sigma_b: float = 0.1,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        check_scalar(in_channels, "in_channels", low=1, integer=True)
        check_scalar(out_channels, "out_channels", low=1, integer=True)
        check_scalar(kernel_size, "kernel_size", low=1, integer=True)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (same padding), got {kernel_size}")
        shape = (out_channels, in_channels, kernel_size, kernel_size)
        fan_in = in_channels * kernel_size**2
        self._init_scaled(shape, fan_in, parameterization, sigma_w, sigma_b, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.weight.shape[-1] // 2
        return F.conv2d(x, self.weight * self.w_scale, self.bias * self.b_scale, padding=pad)


def _layer_kwargs(width, depth, parameterization, sigma_w, sigma_b, seed) -> dict:
    """Check a network's size arguments; the keyword arguments of its layers (one seeded
    generator shared by all, so the draw depends only on ``seed``)."""
    check_scalar(width, "width", low=1, integer=True)
    check_scalar(depth, "depth", low=1, integer=True)
    if seed is not None:
        check_scalar(seed, "seed", low=0, integer=True)
    return {
        "parameterization": parameterization,
        "sigma_w": sigma_w,
        "sigma_b": sigma_b,
        "generator": None if seed is None else torch.Generator().manual_seed(seed),
    }


class MLP(nn.Module):
    """A ReLU network with ``depth`` hidden layers of ``width`` units.

    Parameters
    ----------
    in_features, out_features : int
        Input and output sizes; the forward maps ``(N, in_features)`` (or any input that
        flattens to it, e.g. ``(N, 1, 8, 8)`` images) to ``(N, out_features)``.
    width : int
        Units per hidden layer (the ``n`` of the paper's O(n^{-1/2}) bound).
    depth : int
        Hidden layers (default 2, the official code's two-hidden-layer network).
    parameterization : {"ntk", "standard", "official"}
        See :mod:`fedavg_wide.models` (``"official"``: the official regression net's init).
    sigma_w, sigma_b : float
        Weight and bias scales (``sigma_w^2 = 2`` keeps ReLU activations at unit scale).
    seed : int, optional
        Seeds the draw (``None``: torch's global generator).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        width: int,
        *,
        depth: int = 2,
        parameterization: str = "ntk",
        sigma_w: float = math.sqrt(2.0),
        sigma_b: float = 0.1,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        check_choice(parameterization, "parameterization", PARAMETERIZATIONS)
        official = parameterization == "official"
        if official:  # N(0, 1.5 / width) for every weight: sigma_w^2 / fan_in = 1.5 / width
            parameterization, sigma_b = "standard", OFFICIAL_BIAS_STD
        kw = _layer_kwargs(width, depth, parameterization, sigma_w, sigma_b, seed)
        sizes = [in_features, *([width] * depth), out_features]

        def layer(a, b):
            if official:
                kw["sigma_w"] = math.sqrt(OFFICIAL_WEIGHT_VARIANCE * a / width)
            return Linear(a, b, **kw)

        layers = [layer(a, b) for a, b in itertools.pairwise(sizes)]
        self.hidden, self.readout = nn.ModuleList(layers[:-1]), layers[-1]
        self.in_features, self.out_features, self.width, self.depth = (
            in_features,
            out_features,
            width,
            depth,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.reshape(x.shape[0], -1)
        if h.shape[1] != self.in_features:
            raise ValueError(
                f"x must have {self.in_features} features per sample, got shape {tuple(x.shape)}"
            )
        for layer in self.hidden:
            h = torch.relu(layer(h))
        return self.readout(h)


class CNN(nn.Module):
    """A small ReLU CNN: ``depth`` same-padded 3x3 convolutions of ``width`` channels,
    global average pooling, a dense readout; ``(N, in_channels, H, W) -> (N, out_features)``.

    Parameters as :class:`MLP` (``width`` = channels per convolution).
    """

    def __init__(
        self,
        in_channels: int,
        out_features: int,
        width: int,
        *,
        depth: int = 2,
        parameterization: str = "ntk",
        sigma_w: float = math.sqrt(2.0),
        sigma_b: float = 0.1,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        if parameterization == "official":
            raise ValueError(
                "parameterization='official' is the official regression MLP's init; the "
                "official classifiers use torch's default init: use 'standard' for a CNN"
            )
        kw = _layer_kwargs(width, depth, parameterization, sigma_w, sigma_b, seed)
        chans = [in_channels, *([width] * depth)]
        self.convs = nn.ModuleList(Conv2d(a, b, 3, **kw) for a, b in itertools.pairwise(chans))
        self.readout = Linear(width, out_features, **kw)
        self.in_channels, self.out_features, self.width = in_channels, out_features, width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"x must have shape (N, {self.in_channels}, H, W), got {tuple(x.shape)}"
            )
        h = x
        for conv in self.convs:
            h = torch.relu(conv(h))
        return self.readout(h.mean(dim=(2, 3)))


def _relu_expectations(k12, k11, k22):
    """E[relu(u) relu(v)] and E[relu'(u) relu'(v)] for (u, v) ~ N(0, [[k11, k12], [k12, k22]])
    (the arc-cosine kernels of degree 1 and 0, Cho & Saul 2009)."""
    norm = torch.sqrt(k11 * k22)
    positive = norm > 0
    # a zero variance (x = 0 with sigma_b = 0) is a pre-activation fixed at 0, where
    # relu and (torch's) relu' are 0: both expectations are 0, not 0/0
    cos = torch.where(positive, k12 / torch.where(positive, norm, 1.0), 0.0).clamp(-1.0, 1.0)
    theta = torch.arccos(cos)
    e_phi = norm * (torch.sin(theta) + (math.pi - theta) * cos) / (2 * math.pi)
    e_dphi = torch.where(positive, (math.pi - theta) / (2 * math.pi), 0.0)
    return e_phi, e_dphi


def analytic_ntk(
    x1,
    x2=None,
    *,
    depth: int = 2,
    sigma_w: float = math.sqrt(2.0),
    sigma_b: float = 0.1,
    kernel: str = "ntk",
) -> torch.Tensor:
    """The infinite-width NTK (or NNGP kernel) of :class:`MLP` in the NTK parameterization.

    With :math:`K^1(x, x') = \\sigma_w^2 x \\cdot x' / d + \\sigma_b^2` and
    :math:`\\Theta^1 = K^1`, each hidden ReLU layer maps

    .. math::
        K^{l+1} = \\sigma_w^2\\, \\mathbb{E}[\\phi(u)\\phi(v)] + \\sigma_b^2, \\qquad
        \\Theta^{l+1} = K^{l+1} + \\sigma_w^2\\, \\mathbb{E}[\\phi'(u)\\phi'(v)]\\, \\Theta^l,

    with :math:`(u, v) \\sim N(0, K^l)` restricted to the pair (closed forms of the
    arc-cosine kernels). After ``depth`` hidden layers :math:`\\Theta^{depth+1}` is the
    kernel of every output (outputs are independent: the NTK is ``Theta x I``); it is the
    limit of :func:`~fedavg_wide.empirical_ntk` as the width grows (neural-tangents'
    ``stax.Dense(..., parameterization="ntk")`` with ``W_std = sigma_w``, ``b_std = sigma_b``).

    Parameters
    ----------
    x1 : array_like, shape (n1, d)
    x2 : array_like, shape (n2, d), optional
        Default ``x1``.
    depth, sigma_w, sigma_b : as :class:`MLP`.
    kernel : {"ntk", "nngp"}

    Returns
    -------
    torch.Tensor, shape (n1, n2), float64
    """
    check_choice(kernel, "kernel", ("ntk", "nngp"))
    check_scalar(depth, "depth", low=1, integer=True)
    _check_common("ntk", sigma_w, sigma_b)
    a = torch.as_tensor(x1, dtype=torch.float64).reshape(len(x1), -1)
    b = a if x2 is None else torch.as_tensor(x2, dtype=torch.float64).reshape(len(x2), -1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"x1 and x2 must have the same features, got {a.shape[1]} and {b.shape[1]}"
        )
    d = a.shape[1]
    sw2, sb2 = sigma_w**2, sigma_b**2
    k12 = sw2 * (a @ b.T) / d + sb2
    k11 = sw2 * (a * a).sum(1, keepdim=True) / d + sb2
    k22 = sw2 * (b * b).sum(1, keepdim=True).T / d + sb2
    ntk = k12
    for _ in range(depth):
        e12, d12 = _relu_expectations(k12, k11, k22)
        e11, _ = _relu_expectations(k11, k11, k11)
        e22, _ = _relu_expectations(k22, k22, k22)
        k12, k11, k22 = sw2 * e12 + sb2, sw2 * e11 + sb2, sw2 * e22 + sb2
        ntk = k12 + sw2 * d12 * ntk
    return ntk if kernel == "ntk" else k12
