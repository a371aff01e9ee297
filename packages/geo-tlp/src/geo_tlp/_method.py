"""What geo-tlp tells the icml25 CLI (imported without heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="geo-tlp",
    title=(
        "Analytical Construction on Geometric Architectures: Transitioning from Static to "
        "Temporal Link Prediction"
    ),
    authors=("Y. Sun", "X. Cao", "I. Tsang", "H. T. Shen"),
    venue="ICML 2025",
    url="https://proceedings.mlr.press/v267/",
    summary=(
        "Temporal link prediction that routes nodes between Euclidean and hyperbolic "
        "geometry by local Gromov hyperbolicity (reconstructed: no official code)"
    ),
    experiments={"mixed-geometry": "geo_tlp.experiments:MIXED_GEOMETRY"},
    status="available",
    claim=(
        "did not hold in full (3 seeds): AUC geo-tlp 0.830 vs Euclidean only 0.815 overall and "
        "0.824 vs 0.807 (geometric region), but 0.849 vs hyperbolic only 0.859 (tree region); "
        "a static GAE 0.861 beats all; quick: did not hold (0.776 vs 0.809)"
    ),
)
