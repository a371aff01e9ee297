"""Map and potential networks: MLPs for vectors, a small UNet / conv critic for images.

Every network takes a batch shaped ``(n, *sample_shape)``. :func:`build_networks` builds the
pair ``(T, V)`` from a JSON-serialisable config; :class:`TransportNetworks` holds the pair
for ``save_pretrained`` / ``from_pretrained`` (huggingface_hub's mixin).
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import torch
from torch import nn

from icml25_core import check_choice
from icml25_core.hub import PretrainedModelMixin

ACTIVATIONS = {"silu": nn.SiLU, "relu": nn.ReLU, "gelu": nn.GELU, "leaky_relu": nn.LeakyReLU}
ARCHS = ("auto", "mlp", "conv")


def _mlp(sizes: list[int], activation: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class MapMLP(nn.Module):
    """``T(x) = x + f(x)`` (``residual`` and equal shapes) or ``T(x) = f(x)``; f an MLP.

    Input ``(n, *in_shape)``, output ``(n, *out_shape)``.
    """

    def __init__(
        self, in_shape, out_shape, hidden=(256, 256, 256), activation="silu", residual=True
    ):
        super().__init__()
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        self.residual = bool(residual) and self.in_shape == self.out_shape
        d_in, d_out = math.prod(self.in_shape), math.prod(self.out_shape)
        self.net = _mlp([d_in, *hidden, d_out], activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x.flatten(1)).view(x.shape[0], *self.out_shape)
        return x + out if self.residual else out


class PotentialMLP(nn.Module):
    """Scalar potential ``V(y)``: input ``(n, *shape)``, output ``(n,)``."""

    def __init__(self, shape, hidden=(256, 256, 256), activation="silu"):
        super().__init__()
        self.net = _mlp([math.prod(tuple(shape)), *hidden, 1], activation)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.net(y.flatten(1)).squeeze(-1)


def _block(c_in: int, c_out: int, activation: str, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1),
        nn.GroupNorm(min(8, c_out), c_out),
        ACTIVATIONS[activation](),
    )


class MapUNet(nn.Module):
    """A two-level UNet for images ``(n, C, H, W)`` with H and W even.

    ``channels`` (c1, c2): widths at full and half resolution. Output has ``out_channels``
    channels; with ``residual`` and equal channel counts, ``T(x) = x + f(x)``.
    """

    def __init__(self, in_shape, out_shape, channels=(32, 64), activation="silu", residual=True):
        super().__init__()
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        c_in, c_out = self.in_shape[0], self.out_shape[0]
        c1, c2 = channels
        self.residual = bool(residual) and c_in == c_out
        self.enc1 = nn.Sequential(_block(c_in, c1, activation), _block(c1, c1, activation))
        self.enc2 = nn.Sequential(_block(c1, c2, activation, 2), _block(c2, c2, activation))
        self.up = nn.ConvTranspose2d(c2, c1, 2, stride=2)
        self.dec = nn.Sequential(_block(2 * c1, c1, activation), _block(c1, c1, activation))
        self.out = nn.Conv2d(c1, c_out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h1 = self.enc1(x)
        h2 = self.enc2(h1)
        out = self.out(self.dec(torch.cat([h1, self.up(h2)], 1)))
        return x + out if self.residual else out


class PotentialConv(nn.Module):
    """Conv critic for images ``(n, C, H, W)`` -> ``(n,)``: two strided blocks, pool, MLP."""

    def __init__(self, shape, channels=(32, 64), activation="silu"):
        super().__init__()
        c1, c2 = channels
        self.features = nn.Sequential(
            _block(shape[0], c1, activation),
            _block(c1, c2, activation, 2),
            _block(c2, c2, activation, 2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = _mlp([c2, c2, 1], activation)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(y)).squeeze(-1)


def resolve_arch(arch: str, source_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> str:
    """``"auto"`` -> ``"conv"`` for image-shaped samples ``(C, H, W)``, else ``"mlp"``."""
    check_choice(arch, "arch", ARCHS)
    image = len(source_shape) == 3 and len(target_shape) == 3
    if arch == "auto":
        return "conv" if image else "mlp"
    if arch == "conv":
        if not image:
            raise ValueError(
                "arch='conv' needs image samples shaped (C, H, W) on both sides, got "
                f"source {source_shape} and target {target_shape}"
            )
        if source_shape[1:] != target_shape[1:] or source_shape[1] % 2 or source_shape[2] % 2:
            raise ValueError(
                "arch='conv' needs equal, even image sizes on both sides, got "
                f"source {source_shape} and target {target_shape}"
            )
    return arch


def build_networks(config: dict[str, Any]) -> tuple[nn.Module, nn.Module]:
    """``(T, V)`` from a config with keys arch, source_shape, target_shape, hidden/channels,
    activation, residual (as stored by ``save_pretrained``)."""
    src, tgt = tuple(config["source_shape"]), tuple(config["target_shape"])
    act = check_choice(config.get("activation", "silu"), "activation", ACTIVATIONS)
    if config["arch"] == "conv":
        ch = tuple(config["channels"])
        T = MapUNet(src, tgt, ch, act, config.get("residual", True))
        V = PotentialConv(tgt, ch, act)
    else:
        hidden = tuple(config["hidden"])
        T = MapMLP(src, tgt, hidden, act, config.get("residual", True))
        V = PotentialMLP(tgt, hidden, act)
    return T, V


class TransportNetworks(nn.Module, PretrainedModelMixin):
    r"""The map ``T`` and the potential ``V`` of a neural OT model as one hub-mixin module.

    ``save_pretrained`` writes ``config.json`` (``network``: what :func:`build_networks`
    takes; ``estimator``: the OT model's settings, schedule, cost and step) and
    ``model.safetensors`` (``map.*`` and ``potential.*`` tensors); ``from_pretrained``
    rebuilds both networks from the folder alone. :class:`~otp_map.OTP` and
    :class:`~otp_map.SemiDualOT` save and load through it.

    With ``network["standardized"]`` true the networks work in standardised coordinates
    :math:`x' = (x - m_\mu)/s_\mu`, :math:`y' = (y - m_\nu)/s_\nu` (a mean and a scalar
    scale per side), held as the buffers ``source_shift`` ``(*source_shape)``,
    ``target_shift`` ``(*target_shape)``, ``source_scale`` and ``target_scale`` ``()``;
    :meth:`source_in`, :meth:`target_in` and :meth:`target_out` convert. For the quadratic
    cost this changes nothing in the problem: :math:`\|x - y\|^2` and
    :math:`s_\mu s_\nu \|x' - y'\|^2` differ by terms in :math:`x` alone and terms in
    :math:`y` alone (which the potential absorbs), so the optimal plans correspond exactly.
    Without it (models saved before 0.2.3) the three conversions are the identity.

    Parameters
    ----------
    network : dict
        Keys ``arch``, ``source_shape``, ``target_shape``, ``hidden`` / ``channels``,
        ``activation``, ``residual`` and optionally ``standardized``.
    estimator : dict, optional
        The estimator's own record (JSON); stored, not interpreted here.
    """

    def __init__(self, network: dict[str, Any], estimator: dict[str, Any] | None = None):
        super().__init__()
        self.network = dict(network)
        self.estimator = dict(estimator or {})
        self.map, self.potential = build_networks(self.network)
        self.standardized = bool(self.network.get("standardized", False))
        if self.standardized:
            self.register_buffer("source_shift", torch.zeros(self.network["source_shape"]))
            self.register_buffer("target_shift", torch.zeros(self.network["target_shape"]))
            self.register_buffer("source_scale", torch.ones(()))
            self.register_buffer("target_scale", torch.ones(()))

    def set_standardization(
        self, source_shift, target_shift, source_scale: float, target_scale: float
    ) -> None:
        """Fill the buffers: the means of each side ``(*shape)`` and their scales ``> 0``."""
        if not self.standardized:
            raise RuntimeError("these networks were built without standardization")
        self.source_shift.copy_(source_shift)
        self.target_shift.copy_(target_shift)
        self.source_scale.fill_(float(source_scale))
        self.target_scale.fill_(float(target_scale))

    def source_in(self, x: torch.Tensor) -> torch.Tensor:
        """Source samples ``(n, *source_shape)`` in data units -> the networks' units."""
        return (x - self.source_shift) / self.source_scale if self.standardized else x

    def target_in(self, y: torch.Tensor) -> torch.Tensor:
        """Target samples ``(n, *target_shape)`` in data units -> the networks' units."""
        return (y - self.target_shift) / self.target_scale if self.standardized else y

    def target_out(self, y: torch.Tensor) -> torch.Tensor:
        """The map's output in the networks' units -> data units (inverse of target_in)."""
        return self.target_shift + self.target_scale * y if self.standardized else y
