"""What tabicl-lite tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="tabicl-lite",
    title="TabICL: A Tabular Foundation Model for In-Context Learning on Large Data",
    authors=(),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2502.05564",
    summary="planned",
    experiments={"claim": "tabicl_lite.experiments:CLAIM"},
)
