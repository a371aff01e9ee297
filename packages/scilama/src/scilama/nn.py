"""The paired VAEs: a cell VAE over expression (and covariates) and a gene VAE over static
gene embeddings (one encoder per modality, fused), sharing one latent space.

Shapes: ``x`` (cells, genes), covariates ``c`` (cells, n_covariates), gene inputs
``e_m`` (genes, d_m) per modality ``m``; latents ``z_s`` (cells, latent_dim) and ``z_f``
(genes, latent_dim); decoder hiddens ``h_s`` (cells, hidden[0]) and ``h_f`` (genes,
hidden[0]). The paired reconstructions are

.. math::

    \\hat x = h_s h_f^\\top + b, \\qquad \\tilde x = z_s z_f^\\top + b,

with ``b`` the bias of the cell decoder's output layer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import Normal

from icml25_core import check_choice, check_scalar
from icml25_core.hub import PretrainedModelMixin

FUSIONS = ("average", "poe")


@dataclass
class SciLaMAConfig:
    """Sizes and options of :class:`SciLaMANetwork` (defaults: the official ones).

    Attributes
    ----------
    n_genes : int
        Genes modelled (columns of ``x``, rows of every gene input).
    gene_input_dims : tuple of int
        Width of each gene-input modality (an embedding table, or the transposed expression
        of the training cells); empty for the cell VAE alone (beta-VAE).
    gene_input_names : tuple of str
        One name per modality (``"text"``, ``"protein"``, ``"expression"``...).
    n_covariates : int
        Width of the encoded covariates (one-hot batches, z-scored continuous values).
    latent_dim : int
        Latent size shared by cells and genes.
    hidden : tuple of int
        Encoder widths; decoders use them reversed.
    dropout : float
        Dropout after every hidden layer.
    batchnorm, layernorm : bool
        BatchNorm1d / LayerNorm (no affine) after every hidden Linear.
    var_eps : float
        ``sigma = sqrt(exp(logvar) + var_eps)``.
    fusion : {"average", "poe"}
        How the gene encoders' posteriors are combined (see :func:`fuse_latents`).
    """

    n_genes: int
    gene_input_dims: tuple[int, ...] = ()
    gene_input_names: tuple[str, ...] = ()
    n_covariates: int = 0
    latent_dim: int = 50
    hidden: tuple[int, ...] = (900, 400)
    dropout: float = 0.1
    batchnorm: bool = False
    layernorm: bool = True
    var_eps: float = 1e-4
    fusion: str = "average"

    def __post_init__(self) -> None:
        self.gene_input_dims = tuple(int(d) for d in self.gene_input_dims)
        self.gene_input_names = tuple(str(n) for n in self.gene_input_names)
        self.hidden = tuple(int(h) for h in self.hidden)
        check_scalar(self.n_genes, "n_genes", low=1, integer=True)
        check_scalar(self.n_covariates, "n_covariates", low=0, integer=True)
        check_scalar(self.latent_dim, "latent_dim", low=1, integer=True)
        check_scalar(self.dropout, "dropout", low=0, high=1, high_inclusive=False)
        check_scalar(self.var_eps, "var_eps", low=0)
        check_choice(self.fusion, "fusion", FUSIONS)
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(
                f"hidden must be a non-empty sequence of positive widths, got {self.hidden}"
            )
        if any(d < 1 for d in self.gene_input_dims):
            raise ValueError(f"gene_input_dims must be positive, got {self.gene_input_dims}")
        if len(self.gene_input_names) != len(self.gene_input_dims):
            raise ValueError(
                f"gene_input_names {self.gene_input_names} must name each of the "
                f"{len(self.gene_input_dims)} gene inputs"
            )


def mlp(dims: Sequence[int], *, batchnorm: bool, layernorm: bool, dropout: float) -> nn.Sequential:
    """``Linear -> (BatchNorm1d) -> (LayerNorm, no affine) -> LeakyReLU -> Dropout`` per
    consecutive pair of ``dims`` (the official ``FCNN``)."""
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(dims):
        layers.append(nn.Linear(a, b))
        if batchnorm:
            layers.append(nn.BatchNorm1d(b))
        if layernorm:
            layers.append(nn.LayerNorm(b, elementwise_affine=False))
        layers += [nn.LeakyReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*layers)


class GaussianEncoder(nn.Module):
    """``(n, in_dim) -> mu, sigma`` each ``(n, latent)``, ``sigma = sqrt(exp(s) + eps)``."""

    def __init__(self, in_dim: int, hidden: Sequence[int], latent: int, cfg: SciLaMAConfig):
        super().__init__()
        self.hidden = mlp(
            [in_dim, *hidden], batchnorm=cfg.batchnorm, layernorm=cfg.layernorm, dropout=cfg.dropout
        )
        self.mu = nn.Linear(hidden[-1], latent)
        self.log_var = nn.Linear(hidden[-1], latent)
        self.var_eps = cfg.var_eps

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.hidden(x)
        return self.mu(h), (self.log_var(h).exp() + self.var_eps).sqrt()


class Decoder(nn.Module):
    """``(n, latent) -> h`` of width ``hidden[0]`` (and an output layer when ``out_dim``).

    As the official decoder: an MLP over the reversed widths whose last layer is a plain
    Linear (no norm, no activation); ``h`` is that layer's output; the output layer reads
    ``h`` through BatchNorm (if enabled) and Dropout.
    """

    def __init__(self, latent: int, hidden: Sequence[int], out_dim: int | None, cfg: SciLaMAConfig):
        super().__init__()
        widths = list(reversed(hidden))
        body: list[nn.Module] = []
        if len(widths) > 1:
            body.append(
                mlp(
                    [latent, *widths[:-1]],
                    batchnorm=cfg.batchnorm,
                    layernorm=cfg.layernorm,
                    dropout=cfg.dropout,
                )
            )
            body.append(nn.Linear(widths[-2], widths[-1]))
        else:
            body.append(nn.Linear(latent, widths[0]))
        self.hidden = nn.Sequential(*body)
        final: list[nn.Module] = [nn.BatchNorm1d(widths[-1])] if cfg.batchnorm else []
        if cfg.dropout > 0:
            final.append(nn.Dropout(cfg.dropout))
        self.final = nn.Sequential(*final)
        self.output = nn.Linear(widths[-1], out_dim) if out_dim is not None else None

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.hidden(z)
        out = self.output(self.final(h)) if self.output is not None else None
        return h, out


def fuse_latents(
    mus: Sequence[torch.Tensor], sigmas: Sequence[torch.Tensor], fusion: str = "average"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine per-modality Gaussian posteriors ``N(mu_m, sigma_m^2)`` of the genes.

    ``"average"`` (the official default): ``mu = mean_m mu_m``, ``sigma = mean_m sigma_m``.
    ``"poe"``, the product of experts: precisions add,

    .. math::

        \\tau = \\sum_m (\\sigma_m^2 + 10^{-8})^{-1}, \\quad
        \\mu = \\tau^{-1} \\sum_m \\mu_m (\\sigma_m^2 + 10^{-8})^{-1}, \\quad
        \\sigma = \\tau^{-1/2}.

    (The official ``"MoE"`` option computes this same formula.) Each input is
    ``(genes, latent)``; so are both outputs.
    """
    check_choice(fusion, "fusion", FUSIONS)
    if not mus or len(mus) != len(sigmas):
        raise ValueError(
            f"need one sigma per mu and at least one, got {len(mus)} and {len(sigmas)}"
        )
    if fusion == "average":
        return sum(mus) / len(mus), sum(sigmas) / len(sigmas)
    precisions = [1.0 / (s**2 + 1e-8) for s in sigmas]
    total = sum(precisions)
    mu = sum(m * p for m, p in zip(mus, precisions, strict=True)) / total
    return mu, total.rsqrt()


def _xavier(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.xavier_normal_(module.weight)
        nn.init.zeros_(module.bias)


class SciLaMANetwork(nn.Module, PretrainedModelMixin):
    """The paired VAEs, with the gene inputs stored as buffers (saved with the weights).

    Parameters
    ----------
    config : SciLaMAConfig
        Sizes and options.
    """

    def __init__(self, config: SciLaMAConfig) -> None:
        super().__init__()
        self.config = config
        cfg = config
        self.cell_encoder = GaussianEncoder(
            cfg.n_genes + cfg.n_covariates, cfg.hidden, cfg.latent_dim, cfg
        )
        self.cell_decoder = Decoder(cfg.latent_dim + cfg.n_covariates, cfg.hidden, cfg.n_genes, cfg)
        self.gene_encoders = nn.ModuleList(
            GaussianEncoder(d, cfg.hidden, cfg.latent_dim, cfg) for d in cfg.gene_input_dims
        )
        self.gene_decoder = (
            Decoder(cfg.latent_dim, cfg.hidden, None, cfg) if cfg.gene_input_dims else None
        )
        for i, d in enumerate(cfg.gene_input_dims):
            self.register_buffer(f"gene_input_{i}", torch.zeros(cfg.n_genes, d))
        self.apply(_xavier)

    @property
    def has_gene_vae(self) -> bool:
        """Whether the network has a gene VAE (not the cell VAE alone)."""
        return self.gene_decoder is not None

    def gene_inputs(self) -> list[torch.Tensor]:
        """The stored gene inputs, one ``(genes, d_m)`` tensor per modality."""
        return [getattr(self, f"gene_input_{i}") for i in range(len(self.gene_encoders))]

    def set_gene_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        """Copy ``inputs`` (one ``(genes, d_m)`` tensor per modality) into the buffers."""
        buffers = self.gene_inputs()
        if len(inputs) != len(buffers):
            raise ValueError(f"expected {len(buffers)} gene inputs, got {len(inputs)}")
        for i, (buf, new) in enumerate(zip(buffers, inputs, strict=True)):
            if tuple(new.shape) != tuple(buf.shape):
                raise ValueError(
                    f"gene input {i} must have shape {tuple(buf.shape)}, got {tuple(new.shape)}"
                )
            buf.copy_(new)

    def _with(self, a: torch.Tensor, c: torch.Tensor | None) -> torch.Tensor:
        if self.config.n_covariates == 0:
            return a
        if c is None or c.shape != (a.shape[0], self.config.n_covariates):
            shown = None if c is None else tuple(c.shape)
            raise ValueError(
                f"covariates must have shape ({a.shape[0]}, {self.config.n_covariates}), got {shown}"
            )
        return torch.cat([a, c], dim=1)

    def encode_cells(
        self, x: torch.Tensor, c: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (cells, genes), ``c`` (cells, n_covariates) -> mu_s, sigma_s (cells, latent)."""
        return self.cell_encoder(self._with(x, c))

    def decode_cells(
        self, z: torch.Tensor, c: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``z`` (cells, latent) -> h_s (cells, hidden[0]), the cell decoder's output
        (cells, genes)."""
        h, out = self.cell_decoder(self._with(z, c))
        assert out is not None
        return h, out

    def encode_genes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The fused gene posterior: mu_f, sigma_f (genes, latent)."""
        if not self.has_gene_vae:
            raise RuntimeError("this network is the cell VAE alone (no gene inputs)")
        parts = [enc(e) for enc, e in zip(self.gene_encoders, self.gene_inputs(), strict=True)]
        return fuse_latents([p[0] for p in parts], [p[1] for p in parts], self.config.fusion)

    def paired(
        self, h_s: torch.Tensor, z_s: torch.Tensor, h_f: torch.Tensor, z_f: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The paired reconstructions ``h_s h_f^T + b`` and ``z_s z_f^T + b`` (cells, genes)."""
        b = self.cell_decoder.output.bias
        return torch.addmm(b, h_s, h_f.t()), torch.addmm(b, z_s, z_f.t())

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """One stochastic pass: posteriors, samples and reconstructions (a dict of tensors:
        ``mu_s, sigma_s, z_s, out`` and, with a gene VAE, ``mu_f, sigma_f, z_f, h_f,
        x_hidden, x_latent``)."""
        mu_s, sigma_s = self.encode_cells(x, c)
        z_s = Normal(mu_s, sigma_s).rsample()
        h_s, out = self.decode_cells(z_s, c)
        result = {"mu_s": mu_s, "sigma_s": sigma_s, "z_s": z_s, "out": out}
        if self.has_gene_vae:
            mu_f, sigma_f = self.encode_genes()
            z_f = Normal(mu_f, sigma_f).rsample()
            assert self.gene_decoder is not None
            h_f, _ = self.gene_decoder(z_f)
            x_hidden, x_latent = self.paired(h_s, z_s, h_f, z_f)
            result |= {
                "mu_f": mu_f,
                "sigma_f": sigma_f,
                "z_f": z_f,
                "h_f": h_f,
                "x_hidden": x_hidden,
                "x_latent": x_latent,
            }
        return result
