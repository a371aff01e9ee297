"""What les-lso tells the icml25 CLI (imported without torch)."""

from icml25_core import Method

METHOD = Method(
    name="les-lso",
    title="Mitigating over-exploration in latent space optimization using LES",
    authors=("O. Ronen", "A. I. Humayun", "R. Baraniuk", "R. Balestriero", "B. Yu"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2406.09657",
    summary=(
        "Latent Exploration Score: a differentiable decoder-Jacobian penalty that keeps "
        "latent space optimization where the decoder is reliable"
    ),
    experiments={"over-exploration": "les_lso.experiments:OVER_EXPLORATION"},
    status="available",
    claim=(
        "held (full, 3 seeds): AUROC LES 0.913 vs likelihood 0.806, kNN 0.805, prior 0.521; "
        "LES penalty raises validity of BoTorch 0.14 -> 0.40 and gradient ascent 0.76 -> "
        "0.85 (likelihood penalty: 0.88); quick: the gradient-ascent part did not hold"
    ),
)
