"""What kuea tells the icml25 CLI (imported without heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="kuea",
    title=(
        "Kernel-based Unsupervised Embedding Alignment for Enhanced Visual Representation "
        "in Vision-language Models"
    ),
    authors=("S. Gong", "Y. Jiang", "Q. Dou", "F. Farnia"),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2506.02557",
    summary=(
        "kernel alignment of a CLIP image tower (transformers or open_clip) to a "
        "vision-centric teacher (DINOv2, any callable), text tower frozen and checked, "
        "fitted or learned kernel parameters, zero-shot / linear-probe / retrieval evaluation"
    ),
    experiments={"fine-grained-alignment": "kuea.experiments:FINE_GRAINED_ALIGNMENT"},
    status="available",
    claim=(
        "full (3 seeds): held: KUEA polynomial fine probe 0.586 -> 0.821, zero-shot "
        "0.995 -> 0.991 (feature-L2 distillation 0.829 but zero-shot 0.972); quick: did "
        "not hold (fine probe +0.118, zero-shot drop 0.022 on one seed)"
    ),
)
