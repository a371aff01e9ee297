"""What mimicmotion tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="mimicmotion",
    title="MimicMotion: High-Quality Human Motion Video Generation with Confidence-aware Pose Guidance",
    authors=(),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2406.19680",
    summary="planned",
    experiments={"claim": "mimicmotion.experiments:CLAIM"},
)
