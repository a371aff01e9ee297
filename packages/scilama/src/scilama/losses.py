"""The training objectives and the KL warm-up, as in the official code.

Every squared error is summed over genes and averaged over cells; every KL divergence to
``N(0, I)`` is summed over latent dimensions and averaged over its rows (cells for the cell
VAE, genes for the gene VAE).
"""

from __future__ import annotations

import math

import torch

from icml25_core import check_scalar


def kl_standard_normal(mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu, sigma^2) || N(0, 1))`` summed over the last axis: ``(n, d) -> (n,)``.

    .. math:: \\tfrac12 \\sum_j (\\mu_j^2 + \\sigma_j^2 - 1) - \\log \\sigma_j
    """
    return (0.5 * (mu.square() + sigma.square() - 1.0) - sigma.log()).sum(-1)


def _parts(total: torch.Tensor, mse: torch.Tensor, kl: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"loss": total.detach(), "mse": mse.detach(), "kl": kl.detach()}


def _sse(pred: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (pred - x).square().sum(-1)


def cell_vae_loss(
    x: torch.Tensor, out: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor, beta: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The cell VAE alone (beta-VAE; stepwise phase 1):
    ``mean_cells(||out - x||^2 + beta KL_s)``. Returns the loss and its detached parts
    (``loss``, ``mse``, ``kl``)."""
    sse, kl = _sse(out, x), kl_standard_normal(mu, sigma)
    total = (sse + beta * kl).mean()
    return total, _parts(total, sse.mean(), kl.mean())


def gene_vae_loss(
    x: torch.Tensor,
    x_hidden: torch.Tensor,
    x_latent: torch.Tensor,
    mu_f: torch.Tensor,
    sigma_f: torch.Tensor,
    beta: float,
    gamma: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Stepwise phase 2 (cell VAE frozen):
    ``mean_cells(||x_hidden - x||^2 + gamma ||x_latent - x||^2) + beta mean_genes KL_f``."""
    sse = _sse(x_hidden, x) + gamma * _sse(x_latent, x)
    kl = kl_standard_normal(mu_f, sigma_f).mean()
    total = sse.mean() + beta * kl
    return total, _parts(total, sse.mean(), kl)


def joint_loss(
    x: torch.Tensor,
    x_hidden: torch.Tensor,
    x_latent: torch.Tensor,
    mu_s: torch.Tensor,
    sigma_s: torch.Tensor,
    mu_f: torch.Tensor,
    sigma_f: torch.Tensor,
    beta: float,
    gamma: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """sciLaMA's joint objective (direct mode; stepwise phase 3):

    .. math::

        \\operatorname{mean}_{cells}\\big(\\lVert \\hat x - x \\rVert^2
        + \\gamma \\lVert \\tilde x - x \\rVert^2\\big)
        + \\beta \\big(\\operatorname{mean}_{cells} KL_s + \\operatorname{mean}_{genes} KL_f\\big)

    As in the official code, the cell decoder's own output layer is not in this loss (only
    its bias ``b`` is, through the paired reconstructions).
    """
    sse = _sse(x_hidden, x) + gamma * _sse(x_latent, x)
    kl = kl_standard_normal(mu_s, sigma_s).mean() + kl_standard_normal(mu_f, sigma_f).mean()
    total = sse.mean() + beta * kl
    return total, _parts(total, sse.mean(), kl)


def beta_at(
    epoch: int,
    *,
    warmup_epochs: int = 25,
    rate: float = 0.05,
    start: float = 0.0,
    end: float = 1.0,
) -> float:
    """The KL weight at ``epoch`` (0-based): ``start`` through epoch ``warmup_epochs``,
    then ``+rate`` per epoch up to ``end`` (defaults: 0 until epoch 25, 1 from epoch 45)."""
    check_scalar(epoch, "epoch", low=0, integer=True)
    if epoch <= warmup_epochs:
        return start
    return min(end, start + rate * (epoch - warmup_epochs))


def first_full_beta_epoch(
    *, warmup_epochs: int = 25, rate: float = 0.05, start: float = 0.0, end: float = 1.0
) -> int:
    """The first epoch at which :func:`beta_at` reaches ``end`` (early stopping and the
    best-model choice start there)."""
    if rate <= 0:
        return 0
    return math.ceil(warmup_epochs + (end - start) / rate - 1e-9)
