"""What linear-tca tells the icml25 CLI (imported without torch)."""

from icml25_core import Method

METHOD = Method(
    name="linear-tca",
    title="Test-time Correlation Alignment",
    authors=("L. You", "J. Lu", "Z. Huang"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2505.00533",
    summary="Backprop-free test-time adaptation: align test embeddings' correlation to a pseudo-source",
    experiments={"corrupted-digits": "linear_tca.experiments:CORRUPTED_DIGITS"},
    status="available",
    claim=(
        "did not hold: LinearTCA 0.652 vs best baseline 0.909 (BatchNorm CNN), 0.806 vs "
        "0.818 (GroupNorm); +5 and +4 points over the source model at 7-9% of Tent's time "
        "and no growth of peak memory; LinearTCA+ Tent >= Tent"
    ),
)
