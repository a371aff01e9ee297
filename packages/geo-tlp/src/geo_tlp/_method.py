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
    claim="pending",
)
