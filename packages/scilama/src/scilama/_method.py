"""What scilama tells the icml25 CLI (imported without heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="scilama",
    title="sciLaMA: A Single-Cell Representation Learning Framework to Leverage Prior "
    "Knowledge from Large Language Models",
    authors=("H. Hu", "S. Zhang", "Y. Choi", "V. S. Malladi", "G. Quon"),
    venue="ICML 2025",
    url="https://proceedings.mlr.press/v267/hu25aa.html",
    summary="paired cell and gene VAEs on an AnnData: static gene embeddings from language "
    "models meet expression in one latent space (cell and gene representations, gene "
    "modules, batch correction), beside PCA, beta-VAE and scVI",
    experiments={
        "pbmc-representation": "scilama.experiments:PBMC_REPRESENTATION",
        "pbmc-batch": "scilama.experiments:PBMC_BATCH",
    },
    status="available",
    claim=(
        "did not hold (quick, 3 seeds): KMeans NMI with text gene embeddings 0.613 vs "
        "random embeddings 0.614 and none 0.616 (PCA 0.627, scVI 0.626); simulated batches "
        "with a batch covariate: overall scIB score 0.469 vs scVI 0.608 (full profile 0.567 "
        "vs 0.647)"
    ),
)
