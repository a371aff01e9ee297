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
        "did not hold (quick, 5 seeds, paired Wilcoxon): DRE-BO-SSL (LP) significantly better "
        "than BORE (MLP) in 1 of 8 cases, worse in 1, tied in 6; not better than random search "
        "anywhere; full profile not run"
    ),
)
