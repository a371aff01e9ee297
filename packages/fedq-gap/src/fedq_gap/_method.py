"""What fedq-gap tells the icml25 CLI (imported without NumPy work)."""

from icml25_core import Method

METHOD = Method(
    name="fedq-gap",
    title="Gap-Dependent Bounds for Federated Q-Learning",
    authors=("H. Zhang", "Z. Zheng", "L. Xue"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2502.02859",
    summary="FedQ-Hoeffding / FedQ-Bernstein with exact regret and communication counts",
    experiments={"log-regret": "fedq_gap.experiments:LOG_REGRET"},
    status="available",
    claim=(
        "mostly held: regret exponent 0.00-0.18 and falling, 7-8x lower per-agent regret "
        "with M=10, rounds slope free of M; not yet log T for (5,3,2) with one agent at "
        "1e6 episodes, and the slope grows with S and A at 1e5"
    ),
)
