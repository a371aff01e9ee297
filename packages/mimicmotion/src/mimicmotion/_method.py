"""What mimicmotion tells the icml25 CLI (imported without the heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="mimicmotion",
    title="MimicMotion: High-Quality Human Motion Video Generation with Confidence-aware Pose Guidance",
    authors=(
        "Yuang Zhang",
        "Jiaxi Gu",
        "Li-Wen Wang",
        "Han Wang",
        "Junqi Cheng",
        "Yuefeng Zhu",
        "Fangyuan Zou",
    ),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2406.19680",
    summary="pose-guided video diffusion of any length with confidence-aware pose guidance",
    experiments={"long-video": "mimicmotion.experiments:LONG_VIDEO"},
    status="available",
    claim=(
        "tiny CPU models: memory flat and time linear in frames held; regional loss "
        "amplification and fusion smoothness showed no effect at this scale"
    ),
)
