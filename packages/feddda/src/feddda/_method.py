"""What feddda tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="feddda",
    title="Federated Disentangled Tuning with Textual Prior Decoupling and Visual Dynamic Adaptation",
    authors=(),
    venue="ICML 2025",
    url="https://proceedings.mlr.press/v267/",
    summary="planned",
    experiments={"claim": "feddda.experiments:CLAIM"},
)
