"""What vsp-point tells the icml25 CLI (imported without heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="vsp-point",
    title="Exploring Vision Semantic Prompt for Efficient Point Cloud Understanding",
    authors=("Y. Zha", "C. Wang", "W. Yang", "T. Zhang", "F. Wu"),
    venue="ICML 2025",
    url="https://proceedings.mlr.press/v267/zha25a.html",
    summary="fine-tune a frozen Point-MAE-style transformer through a few per cent of its "
    "parameters: depth maps read by a frozen 2-D ViT give per-layer semantic prompts that "
    "steer a Hybrid Attention Adapter (with the DAPT baseline)",
    experiments={"peft-semantic-prompt": "vsp_point.experiments:PEFT_SEMANTIC_PROMPT"},
    status="available",
    claim=(
        "held (quick / full, 3 seeds each): VSP + HAA 0.675 / 0.723 vs DAPT 0.552 / 0.596, "
        "rank-matched DAPT 0.536 / 0.656, concatenated 2-D features 0.619 / 0.689; "
        "4.8x DAPT's forward time at the paper's size"
    ),
)
