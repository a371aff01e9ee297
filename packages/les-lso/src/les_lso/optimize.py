"""Latent space optimization by penalized, normalized gradient ascent (the reference's
``ga`` optimizer).

Each step moves every latent by ``lr * (g_f / |g_f| + alpha * g_p / |g_p|)``: the
gradient of the objective and of the penalty score, each scaled to unit norm per latent
(a zero gradient stays zero), so ``alpha`` weighs directions, not magnitudes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from icml25_core import check_choice, check_scalar

from .score import Decoder, _decoder_dtype, decoder_jacobian, les, likelihood_score

__all__ = ["GRADS", "PENALTIES", "normalize_rows", "optimize_latent"]

PENALTIES = ("les", "polarity", "likelihood")
GRADS = ("full", "reference")


def normalize_rows(g: torch.Tensor) -> torch.Tensor:
    """Each row of ``g (B, d)`` scaled to unit Euclidean norm (zero rows stay zero)."""
    norms = torch.linalg.vector_norm(g, dim=1, keepdim=True)
    return torch.where(norms > 0, g / norms.clamp_min(torch.finfo(g.dtype).tiny), g)


def _grad(fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, name: str) -> torch.Tensor:
    z = z.detach().requires_grad_(True)
    value = fn(z)
    if not isinstance(value, torch.Tensor) or value.shape != z.shape[:1]:
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(f"{name} must map z (B, d) to values (B,), got {shape}")
    if not torch.isfinite(value).all():
        raise ValueError(f"{name} returned non-finite values")
    (g,) = torch.autograd.grad(value.sum(), z)
    return g


def optimize_latent(
    objective: Callable[[torch.Tensor], torch.Tensor],
    decoder: Decoder,
    z0: torch.Tensor,
    *,
    alpha: float = 0.5,
    lr: float = 0.03,
    n_steps: int = 10,
    penalty: str | Callable[[torch.Tensor], torch.Tensor] | None = "les",
    grad: str = "full",
    jacobian: str = "autograd",
) -> torch.Tensor:
    """Maximize ``objective`` from ``z0 (B, d)`` while keeping a score of ``decoder`` high.

    Parameters
    ----------
    objective : callable
        ``z (B, d) -> (B,)``, differentiable (an acquisition function, a surrogate's
        mean); latents are independent rows.
    decoder : callable
        ``z (B, d) -> logits (B, L, V)``, the decoder the penalty scores.
    z0 : torch.Tensor
        Starting latents ``(B, d)``.
    alpha, lr, n_steps : float, float, int
        Penalty weight, step length, number of steps (the reference's defaults).
    penalty : {"les", "polarity", "likelihood"}, callable or None
        The score whose normalized gradient is added: :func:`~les_lso.les`, its
        polarity form, :func:`~les_lso.likelihood_score`, any ``z -> (B,)`` callable
        (e.g. a prior log-density), or ``None`` for plain normalized ascent.
    grad : {"full", "reference"}
        ``"full"``: the exact gradient of LES at every step. ``"reference"``: the official
        optimizer's structure, ``A = dl/dz`` computed once at ``z0`` and kept (only the
        softmax part follows ``z``), with the exact ``A``; the official ``A`` is a float32
        forward difference taken with dropout on, whose gradient can point elsewhere (in
        a review run, against the exact one on 2 of 8 latents). Only for the LES penalties.
    jacobian : {"autograd", "fd"}
        How LES computes ``A`` (:func:`~les_lso.decoder_jacobian`).

    Returns
    -------
    torch.Tensor
        The final latents ``(B, d)`` (detached).
    """
    check_scalar(alpha, "alpha", low=0.0)
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    check_scalar(n_steps, "n_steps", integer=True, low=0)
    check_choice(grad, "grad", GRADS)
    if penalty is not None and not callable(penalty):
        check_choice(penalty, "penalty", PENALTIES)
    if not isinstance(z0, torch.Tensor) or z0.ndim != 2 or not z0.dtype.is_floating_point:
        raise ValueError("z0 must be a floating-point tensor of shape (B, d)")
    if not torch.isfinite(z0).all():
        raise ValueError("z0 must be finite (no NaN or inf)")

    a0 = None
    if penalty in ("les", "polarity") and grad == "reference":
        with torch.no_grad():
            a0 = decoder_jacobian(decoder, z0.to(_decoder_dtype(decoder, z0)), jacobian=jacobian)

    def score(z: torch.Tensor) -> torch.Tensor:
        if callable(penalty):
            return penalty(z)
        if penalty == "likelihood":
            return likelihood_score(decoder, z)
        return les(decoder, z, polarity=penalty == "polarity", jacobian=jacobian, a=a0)

    z = z0.detach().clone()
    for _ in range(n_steps):
        step = normalize_rows(_grad(objective, z, "objective"))
        if penalty is not None and alpha > 0:
            step = step + alpha * normalize_rows(_grad(score, z, "penalty"))
        z = z + lr * step
    return z
