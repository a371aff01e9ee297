"""A small CLIP pretrained contrastively on the synthetic captioned images (all styles),
cached as a ``save_pretrained`` folder (model + tokenizer): the frozen backbone the
federated experiment tunes prompts on, standing in for OpenAI's CLIP, which cannot be
downloaded here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
import torch.nn.functional as F

from icml25_core import cache_dir, track

from .data import caption_words, synthetic_images
from .text import word_tokenizer

CONFIG = {
    "text_config": {"vocab_size": 64, "hidden_size": 64, "intermediate_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 4,
                    "max_position_embeddings": 48, "bos_token_id": 1, "eos_token_id": 3,
                    "pad_token_id": 0},
    "vision_config": {"image_size": 32, "patch_size": 8, "hidden_size": 64,
                      "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4},
    "projection_dim": 32,
}  # fmt: skip


def pretrain_clip(steps: int = 600, n_images: int = 6000, batch_size: int = 128, lr: float = 1e-3,
                  seed: int = 0, show_progress: bool = False):  # fmt: skip
    """``(CLIPModel, tokenizer)`` trained with the symmetric InfoNCE loss on captions."""
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    tokenizer = word_tokenizer(caption_words())
    model = CLIPModel(CLIPConfig(**CONFIG))
    data = synthetic_images(n_images, 32, seed=seed)
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)
    pixels = (data.images - mean) / std
    text = tokenizer(data.captions, padding=True, return_tensors="pt")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in track(range(steps), "pretrain CLIP") if show_progress else range(steps):
        idx = torch.randint(0, len(data), (batch_size,), generator=g)
        out = model(input_ids=text["input_ids"][idx], attention_mask=text["attention_mask"][idx],
                    pixel_values=pixels[idx])  # fmt: skip
        # duplicate captions in a batch are positives too: soft targets over equal captions
        same = (text["input_ids"][idx][:, None] == text["input_ids"][idx][None]).all(-1).float()
        target = same / same.sum(1, keepdim=True)
        loss = (F.cross_entropy(out.logits_per_image, target)
                + F.cross_entropy(out.logits_per_text, target)) / 2  # fmt: skip
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval(), tokenizer


def cached_clip(steps: int = 600, seed: int = 0, show_progress: bool = False) -> Path:
    """The folder of the pretrained CLIP, trained on first use."""
    key = hashlib.sha256(repr((CONFIG, steps, seed)).encode()).hexdigest()[:8]
    folder = cache_dir("feddda") / f"clip-s{steps}-seed{seed}-{key}"
    if not (folder / "config.json").is_file():
        model, tokenizer = pretrain_clip(steps, seed=seed, show_progress=show_progress)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder
