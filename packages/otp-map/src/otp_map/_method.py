"""What otp-map tells the icml25 CLI (imported without torch)."""

from icml25_core import Method

METHOD = Method(
    name="otp-map",
    title=(
        "Overcoming Spurious Solutions in Semi-Dual Neural Optimal Transport: "
        "A Smoothing Approach for Learning the Optimal Transport Plan"
    ),
    authors=("Jaemoo Choi", "Jaewoong Choi", "Dohyun Kwon"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2502.04583",
    summary="Learn OT plans (one-to-many where needed) by annealed source smoothing",
    experiments={"spurious-solutions": "otp_map.experiments:SPURIOUS_SOLUTIONS"},
    status="available",
    claim="quick: held on 4 of 5 tasks; full: 3 of 5 (Gaussian + segment and segment -> moons not)",
)
