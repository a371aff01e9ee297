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
    claim="not measured yet",
)
