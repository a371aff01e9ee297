"""Synthetic distribution shifts at three severities: image corruptions in the spirit of
CIFAR-10-C / ImageNet-C (Hendrycks & Dietterich, 2019), generated here on any batch of
images in [0, 1], and an affine shift of a featurizer's embeddings.

Image corruptions take ``(N, C, H, W)`` float tensors in ``[0, 1]`` and return the same
shape, clipped to ``[0, 1]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from icml25_core import check_array, check_choice, check_scalar

SEVERITY_LEVELS = {
    "gaussian_noise": (0.08, 0.16, 0.24),  # noise standard deviation
    "gaussian_blur": (0.6, 0.9, 1.2),  # kernel standard deviation, in pixels
    "contrast": (0.5, 0.35, 0.2),  # remaining contrast around the image mean
    "brightness": (0.15, 0.3, 0.45),  # added to every pixel
    "pixelate": (0.75, 0.5, 0.375),  # resolution kept before upsampling back
}
"""The parameter of each image corruption at severities 1, 2 and 3."""
CORRUPTIONS = tuple(SEVERITY_LEVELS)
AFFINE_LEVELS = (1.0, 2.0, 3.0)
"""Strength ``s`` of :class:`AffineFeatureShift` at severities 1, 2 and 3."""


def _gaussian_kernel(sigma: float, device, dtype) -> torch.Tensor:
    radius = max(1, math.ceil(2.5 * sigma))
    t = torch.arange(-radius, radius + 1, device=device, dtype=dtype)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    return k / k.sum()


def corrupt(
    images: torch.Tensor,
    kind: str,
    severity: int = 1,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``images`` under one corruption.

    Parameters
    ----------
    images : torch.Tensor, shape (N, C, H, W)
        Values in ``[0, 1]``.
    kind : {"gaussian_noise", "gaussian_blur", "contrast", "brightness", "pixelate"}
    severity : {1, 2, 3}
        See :data:`SEVERITY_LEVELS`.
    generator : torch.Generator, optional
        For the noise (the other corruptions are deterministic).

    Returns
    -------
    torch.Tensor
        The corrupted images, shape ``(N, C, H, W)``, clipped to ``[0, 1]``.
    """
    check_choice(kind, "kind", CORRUPTIONS)
    check_choice(severity, "severity", (1, 2, 3))
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        raise ValueError("images must be a (N, C, H, W) tensor")
    check_array(images, "images")
    if float(images.min()) < 0 or float(images.max()) > 1:
        raise ValueError("images must have values in [0, 1]")
    level = SEVERITY_LEVELS[kind][severity - 1]
    x = images.float()
    if kind == "gaussian_noise":
        noise = torch.randn(x.shape, generator=generator, device="cpu").to(x.device)
        out = x + level * noise
    elif kind == "gaussian_blur":
        k = _gaussian_kernel(level, x.device, x.dtype)
        c, r = x.shape[1], k.numel() // 2
        kx = k.view(1, 1, 1, -1).repeat(c, 1, 1, 1)
        ky = k.view(1, 1, -1, 1).repeat(c, 1, 1, 1)
        out = F.pad(x, (r, r, 0, 0), mode="replicate")
        out = F.conv2d(out, kx, groups=c)
        out = F.conv2d(F.pad(out, (0, 0, r, r), mode="replicate"), ky, groups=c)
    elif kind == "contrast":
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        out = (x - mean) * level + mean
    elif kind == "brightness":
        out = x + level
    else:  # pixelate
        h, w = x.shape[-2:]
        small = (max(1, round(h * level)), max(1, round(w * level)))
        out = F.interpolate(F.interpolate(x, size=small, mode="area"), size=(h, w), mode="nearest")
    return out.clamp(0.0, 1.0).to(images.dtype)


class AffineFeatureShift(nn.Module):
    r"""A featurizer whose embeddings undergo a fixed affine shift
    :math:`z \mapsto z A + b`, with :math:`A = Q \operatorname{diag}(e^{u}) Q^\top`
    symmetric positive definite (``u`` uniform in :math:`[-s, s]`, ``Q`` a random rotation)
    and :math:`b = s\,\sigma \odot g` (``g`` standard normal, :math:`\sigma` the embedding
    scale passed in).

    Parameters
    ----------
    featurizer : torch.nn.Module
        The unshifted featurizer; it is wrapped, not copied.
    dim : int
        Embedding dimension ``d``.
    strength : float
        ``s`` (see :data:`AFFINE_LEVELS`).
    scale : torch.Tensor, shape (d,), optional
        Per-dimension scale of the shift ``b`` (e.g. the embeddings' standard deviation);
        default ones.
    generator : torch.Generator, optional
    """

    def __init__(
        self,
        featurizer: nn.Module,
        dim: int,
        strength: float,
        *,
        scale: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        check_scalar(dim, "dim", low=1, integer=True)
        check_scalar(strength, "strength", low=0.0)
        self.featurizer = featurizer
        Q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
        u = (torch.rand(dim, generator=generator, dtype=torch.float64) * 2 - 1) * strength
        A = (Q * torch.exp(u)) @ Q.T
        sigma = torch.ones(dim, dtype=torch.float64) if scale is None else scale.double().cpu()
        b = strength * sigma * torch.randn(dim, generator=generator, dtype=torch.float64)
        self.register_buffer("A", A.float())
        self.register_buffer("b", b.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Shifted embeddings ``(B, d)``."""
        return self.featurizer(x) @ self.A + self.b
