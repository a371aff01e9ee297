"""Tiny random CLIP models and a word-level tokenizer (no download)."""

import pytest
import torch
from transformers import CLIPConfig, CLIPModel

from feddda.text import word_tokenizer

WORDS = ["a", "red", "blue", "green", "circle", "square", "triangle"]
WORDS += ["with", "style", "of", "photo", "sketch"]


def tiny_clip(seed=0):
    torch.manual_seed(seed)
    cfg = CLIPConfig(
        text_config={
            "vocab_size": 64,
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 40,
            "bos_token_id": 1,
            "eos_token_id": 3,
            "pad_token_id": 0,
        },
        vision_config={
            "image_size": 32,
            "patch_size": 8,
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
        },
        projection_dim=16,
    )
    return CLIPModel(cfg).eval()


@pytest.fixture
def clip():
    return tiny_clip()


@pytest.fixture
def tokenizer():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="session")
def clip_path(tmp_path_factory):
    """A tiny random CLIP + the synthetic captions' tokenizer, saved as a checkpoint folder."""
    from feddda.data import caption_words

    path = tmp_path_factory.mktemp("clip")
    tiny_clip().save_pretrained(path)
    word_tokenizer(caption_words()).save_pretrained(path)
    return str(path)
