"""What moequant tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="moequant",
    title=(
        "MoEQuant: Enhancing Quantization for Mixture-of-Experts Large Language Models via "
        "Expert-Balanced Sampling and Affinity Guidance"
    ),
    authors=("Xing Hu", "Zhixuan Chen", "Dawei Yang", "et al."),
    venue="ICML 2025",
    url="https://arxiv.org/abs/2505.03804",
    summary="post-training quantization of MoE LLMs: expert-balanced self-sampling + affinity-guided GPTQ",
    experiments={
        "moe-ptq": "moequant.experiments:MOE_PTQ",
        "moe-ptq-paper": "moequant.experiments:MOE_PTQ_PAPER",
    },
    status="available",
    claim=(
        "did not hold on a small stdlib-trained Mixtral, in the group-wise asymmetric regime "
        "or the paper's symmetric per-channel MSE-clipped one: EBSS at tau 1.2 stays "
        "repetitive (sigma on the candidate or the parent alike) and MoEQuant's perplexity "
        "gap was not below GPTQ's; quantizes 2.3x faster than llm-compressor's GPTQ"
    ),
)
