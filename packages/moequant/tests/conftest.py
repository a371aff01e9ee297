"""Tiny random MoE models of the two reference architectures (no download)."""

import pytest
import torch
from transformers import (
    MixtralConfig,
    MixtralForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

COMMON = {
    "vocab_size": 96,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 128,
    "bos_token_id": 0,
    "eos_token_id": 1,
}


def mixtral(seed=0):
    torch.manual_seed(seed)
    cfg = MixtralConfig(intermediate_size=64, num_local_experts=4, **COMMON)
    return MixtralForCausalLM(cfg).eval()


def qwen2_moe(seed=0, norm_topk_prob=False):
    torch.manual_seed(seed)
    cfg = Qwen2MoeConfig(
        intermediate_size=64,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,
        num_experts=4,
        norm_topk_prob=norm_topk_prob,
        **COMMON,
    )
    model = Qwen2MoeForCausalLM(cfg).eval()
    with torch.no_grad():  # transformers initialises the Qwen2-MoE router at zero
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0, 0.5)
    return model


def qwen3_moe(seed=0):
    torch.manual_seed(seed)
    cfg = Qwen3MoeConfig(
        intermediate_size=64, moe_intermediate_size=32, num_experts=4, head_dim=16, **COMMON
    )
    model = Qwen3MoeForCausalLM(cfg).eval()
    with torch.no_grad():  # a zero router would route every token alike
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0, 0.5)
    return model


BUILD = {"mixtral": mixtral, "qwen2_moe": qwen2_moe, "qwen3_moe": qwen3_moe}


class ToyTokenizer:
    """What the calibration samplers read from a tokenizer."""

    bos_token_id, eos_token_id, all_special_ids = 0, 1, [0, 1]


@pytest.fixture(params=["mixtral", "qwen2_moe"])
def model(request):
    return BUILD[request.param]()


@pytest.fixture
def calibration():
    return torch.randint(2, 96, (8, 24), generator=torch.Generator().manual_seed(0))
