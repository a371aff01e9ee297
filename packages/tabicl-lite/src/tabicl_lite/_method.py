"""What tabicl-lite tells the icml25 CLI (imported without the heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="tabicl-lite",
    title="TabICL: A Tabular Foundation Model for In-Context Learning on Large Data",
    authors=("Jingang Qu", "David Holzmüller", "Gaël Varoquaux", "Marine Le Morvan"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2502.05564",
    summary="tabular classification by in-context learning with a small pretrained TabICL",
    experiments={"small-tables": "tabicl_lite.experiments:SMALL_TABLES"},
)
