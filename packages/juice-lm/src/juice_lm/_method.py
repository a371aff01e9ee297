"""What juice-lm tells the icml25 CLI (imported without torch)."""

from icml25_core import Method

METHOD = Method(
    name="juice-lm",
    title="Taming Knowledge Conflicts in Language Models",
    authors=("G. Li", "Y. Chen", "H. Tong"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2503.10996",
    summary="Just Run Twice: steer a causal LM toward its memory or its context by re-adding "
    "scaled attention-head outputs from a clean first run",
    experiments={"knowledge-conflict": "juice_lm.experiments:KNOWLEDGE_CONFLICT"},
    status="available",
    claim=(
        "did not hold (toy / fact world, 3 seeds each): toward memory JuICE 0.681 / 0.812 vs "
        "JUNE 0.685 / 0.808 and PH3 0.646 / 0.818; toward the context CAD 1.000 / 0.908 vs "
        "JuICE 0.562 / 0.611"
    ),
)
