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
    status="available",
    claim=(
        "held in the full profile: CV accuracy 0.804 vs LogisticRegression 0.801 and "
        "HGB 0.795, best log-loss; the quick profile is a tie with LogisticRegression, "
        "0.878 vs 0.879; weak on digits"
    ),
)
