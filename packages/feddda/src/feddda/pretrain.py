"""A small CLIP pretrained contrastively on the synthetic captioned images (all styles),
cached as a ``save_pretrained`` folder (model + tokenizer): the frozen backbone the
federated experiment tunes prompts on, standing in for OpenAI's CLIP, which cannot be
downloaded here."""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

import torch
import torch.nn.functional as F

from icml25_core import build_once, track

from .data import caption_words, pixel_values, synthetic_images
from .text import word_tokenizer

CONFIG = {
    "text_config": {
        "vocab_size": 64,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 48,
        "bos_token_id": 1,
        "eos_token_id": 3,
        "pad_token_id": 0,
    },
    "vision_config": {
        "image_size": 32,
        "patch_size": 4,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
    },
    "projection_dim": 32,
}


def pretrain_clip(
    steps: int = 1000,
    n_images: int = 12000,
    batch_size: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    show_progress: bool = False,
):
    """``(CLIPModel, tokenizer)`` trained with the symmetric InfoNCE loss on captions
    (AdamW, one-cycle learning-rate schedule)."""
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    tokenizer = word_tokenizer(caption_words())
    model = CLIPModel(CLIPConfig(**CONFIG))
    data = synthetic_images(n_images, 32, seed=seed)
    pixels = pixel_values(data.images)
    text = tokenizer(data.captions, padding=True, return_tensors="pt")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in track(range(steps), "pretrain CLIP") if show_progress else range(steps):
        idx = torch.randint(0, len(data), (batch_size,), generator=g)
        out = model(
            input_ids=text["input_ids"][idx],
            attention_mask=text["attention_mask"][idx],
            pixel_values=pixels[idx],
        )
        # duplicate captions in a batch are positives too: soft targets over equal captions
        same = (text["input_ids"][idx][:, None] == text["input_ids"][idx][None]).all(-1).float()
        target = same / same.sum(1, keepdim=True)
        loss = (
            F.cross_entropy(out.logits_per_image, target)
            + F.cross_entropy(out.logits_per_text, target)
        ) / 2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return model.eval(), tokenizer


def cached_clip(steps: int = 1000, seed: int = 0, show_progress: bool = False) -> Path:
    """The folder of the pretrained CLIP (:func:`pretrain_clip` defaults), trained on first
    use (about two minutes on two CPU cores for 1000 steps)."""
    key = hashlib.sha256(repr((CONFIG, steps, seed, inspect.signature(pretrain_clip))).encode())
    key = key.hexdigest()[:8]

    def build(folder: Path) -> None:
        model, tokenizer = pretrain_clip(steps, seed=seed, show_progress=show_progress)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    # atomic and lock-protected: Ray's client actors may ask for it at the same time
    return build_once(f"clip-s{steps}-seed{seed}-{key}", build, package="feddda")
