"""Tiny random causal LMs of every supported architecture, and a toy world."""

import pytest
import torch
import transformers as T

from juice_lm import ToyWorld

VOCAB = 48


def _tiny(arch: str, seed: int = 0):
    """A random 2-layer model of ``arch`` (4 heads of width 8; GQA where it exists)."""
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=64)
    llama = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)
    configs = {
        "llama": lambda: T.LlamaConfig(**common, **llama),
        "qwen2": lambda: T.Qwen2Config(**common, **llama),
        "mistral": lambda: T.MistralConfig(**common, **llama),
        "gemma": lambda: T.GemmaConfig(**common, **llama, head_dim=12),
        "gemma2": lambda: T.Gemma2Config(**common, **llama, head_dim=12),
        "gemma3_text": lambda: T.Gemma3TextConfig(**common, **llama, head_dim=12),
        "qwen3": lambda: T.Qwen3Config(**common, **llama, head_dim=8),
        "olmo": lambda: T.OlmoConfig(**common, **llama, pad_token_id=0, eos_token_id=1),
        "olmo2": lambda: T.Olmo2Config(**common, **llama, pad_token_id=0, eos_token_id=1),
        "phi3": lambda: T.Phi3Config(
            **common, **llama, pad_token_id=0, eos_token_id=1, bos_token_id=0
        ),
        "gpt_neox": lambda: T.GPTNeoXConfig(
            **common, hidden_size=32, intermediate_size=64, num_attention_heads=4
        ),
        # transformers 5.0.0's PhiConfig has no pad_token_id default (PhiModel reads it)
        "phi": lambda: T.PhiConfig(**common, **llama, pad_token_id=0),
        "gpt2": lambda: T.GPT2Config(
            vocab_size=VOCAB,
            n_layer=2,
            n_embd=32,
            n_head=4,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=1,
        ),
    }
    torch.manual_seed(seed)
    model = T.AutoModelForCausalLM.from_config(configs[arch](), attn_implementation="eager")
    with torch.no_grad():  # non-zero biases, so the bias terms are checked too
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
    return model.eval()


@pytest.fixture(scope="session")
def tiny():
    """``tiny(arch, seed=0)``: a random 2-layer causal LM of ``arch`` (vocabulary 48, 4
    heads; GQA where the architecture has it; non-zero biases)."""
    return _tiny


@pytest.fixture(scope="session")
def world():
    return ToyWorld(num_subjects=16, num_answers=6, num_fillers=8, seed=0)


@pytest.fixture(scope="session")
def toy(world):
    """A random (untrained) Llama over the toy world's vocabulary."""
    from juice_lm import toy_model

    return toy_model(world, hidden=32, layers=2, heads=4, seed=0)
