"""scilama: sciLaMA, a single-cell language-model adapter (Hu et al., ICML 2025), on AnnData.

:class:`SciLaMA` trains paired VAEs on a scanpy user's AnnData: a cell VAE over the
scaled expression (with batch and other covariates) and a gene VAE over static gene
embeddings from language models (:func:`embed_genes` embeds symbols offline), meeting in
one latent space through the paired reconstruction ``x ~ h_s h_f^T + b``. It gives cell
representations (``adata.obsm["X_scilama"]``), gene representations
(``adata.varm["scilama"]``), gene modules (:func:`gene_modules`) and per-group marker
scores (:func:`marker_scores`). :mod:`scilama.metrics` scores representations (ARI, NMI,
silhouette, batch ASW, iLISI); :mod:`scilama.datasets` loads scanpy's bundled PBMCs and
simulates batches.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .data import CovariateEncoder, align_gene_embeddings, read_embedding_parquet
    from .datasets import pbmc68k_reduced, simulate_batch, synthetic_cells
    from .losses import beta_at, cell_vae_loss, gene_vae_loss, joint_loss, kl_standard_normal
    from .model import SciLaMA
    from .modules import gene_modules, marker_scores, top_markers
    from .nn import SciLaMAConfig, SciLaMANetwork, fuse_latents
    from .text import embed_genes

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("scilama")

__all__ = [
    "CovariateEncoder",
    "SciLaMA",
    "SciLaMAConfig",
    "SciLaMANetwork",
    "__version__",
    "align_gene_embeddings",
    "beta_at",
    "cell_vae_loss",
    "embed_genes",
    "fuse_latents",
    "gene_modules",
    "gene_vae_loss",
    "joint_loss",
    "kl_standard_normal",
    "marker_scores",
    "pbmc68k_reduced",
    "read_embedding_parquet",
    "simulate_batch",
    "synthetic_cells",
    "top_markers",
]
