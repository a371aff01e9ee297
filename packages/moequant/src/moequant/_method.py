"""What moequant tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="moequant",
    title="MoEQuant: Enhancing Quantization for Mixture-of-Experts Large Language Models via Expert-Balanced Sampling and Affinity Guidance",
    authors=(),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2505.03804",
    summary="planned",
    experiments={"claim": "moequant.experiments:CLAIM"},
)
