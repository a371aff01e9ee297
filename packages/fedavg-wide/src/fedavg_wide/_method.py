"""What fedavg-wide tells the icml25 CLI (imported without heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="fedavg-wide",
    title="Widening the Network Mitigates the Impact of Data Heterogeneity on FedAvg",
    authors=("L. Jian", "D. Liu"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2508.12576",
    summary=(
        "FedAvg in the wide-network regime: NTK/standard-parameterized networks of any width, "
        "FedAvg as analysed vs centralized GD at equal steps, jvp linearization and NTKs, "
        "as a plain loop and a Flower app"
    ),
    experiments={"width-sweep": "fedavg_wide.experiments:WIDTH_SWEEP"},
    status="available",
    claim="pending",
)
