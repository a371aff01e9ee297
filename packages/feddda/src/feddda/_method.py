"""What feddda tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="feddda",
    title=(
        "Federated Disentangled Tuning with Textual Prior Decoupling and Visual Dynamic Adaptation"
    ),
    authors=("Yihao Yang", "Wenke Huang", "Guancheng Wan", "Bin Yang", "Mang Ye"),
    venue="ICML 2025",
    url="https://proceedings.mlr.press/v267/",
    summary="federated prompt tuning of CLIP with shared/personal prompts, adapters and gate (Flower app)",
    experiments={"personalized-fpl": "feddda.experiments:PERSONALIZED_FPL"},
    status="available",
    claim=(
        "held on a small CLIP pretrained on synthetic styled images: mean per-client "
        "accuracy 0.547 vs PromptFL 0.454 and local-only 0.516 in the full profile; the"
        " gain comes from the decoupled prompts, the visual adapters added nothing at "
        "this scale"
    ),
)
