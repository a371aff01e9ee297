"""What disc-coevo tells the icml25 CLI (imported without torch)."""

from icml25_core import Method

METHOD = Method(
    name="disc-coevo",
    title="Socialized Coevolution: Advancing a Better World through Cross-Task Collaboration",
    authors=("X. Yao", "et al."),
    venue="ICML 2025",
    url="https://proceedings.mlr.press/v267/yao25e.html",
    summary=(
        "Two task experts learn from each other (DISC): hierarchical feature collaboration and "
        "confidence-weighted selective fusion"
    ),
    experiments={"two-task-coevolution": "disc_coevo.experiments:TWO_TASK_COEVOLUTION"},
    status="available",
    claim=(
        "held in full (3 seeds): new task DISC 0.940 vs A alone 0.912 and concat 0.920, existing "
        "tasks kept (0.989 vs 0.990, 0.991 vs 0.985); quick: did not hold (DISC 0.895 vs 0.911)"
    ),
)
