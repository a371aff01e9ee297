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
        "did not hold (toy, 3 seeds): toward memory JuICE 0.678 vs PH3 0.669 and JUNE 0.683; "
        "toward the context CAD 1.000 vs JuICE 0.556"
    ),
)
