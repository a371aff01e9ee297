"""What drebo-ssl tells the icml25 CLI (imported without the heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="drebo-ssl",
    title="Density Ratio Estimation-based Bayesian Optimization with Semi-Supervised Learning",
    authors=("Jungtaek Kim",),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2305.15612",
    summary="Bayesian optimisation with a label-propagation density-ratio classifier",
    experiments={"synthetic-functions": "drebo_ssl.experiments:SYNTHETIC_FUNCTIONS"},
    status="available",
    claim=(
        "0.2 re-run pending (paired Wilcoxon, 5 seeds); 0.1.2: did not hold at 30 iterations "
        "x 3 seeds, SSL below supervised DRE in 4 of 8 cases"
    ),
)
