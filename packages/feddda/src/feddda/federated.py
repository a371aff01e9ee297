"""The federated pieces that do not depend on Flower: settings, each client's data, the
model of a method, local training, evaluation, and which tensors a method shares.

Methods
-------
``"feddda"``
    Global + local context, shared + specific adapters and gate; the server averages the
    global context and the shared adapter only.
``"promptfl"``
    A CoOp prompt (one context of ``n_global + n_local`` tokens, no adapters) averaged
    entirely by the server (PromptFL).
``"local"``
    The same CoOp prompt trained on each client alone (no sharing).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F

from .data import STYLES, ImageSet, partition, synthetic_images
from .model import FedDDAModel

METHODS = ("feddda", "promptfl", "local")


@dataclass
class Settings:
    """Run configuration (``[tool.flwr.app.config]`` keys, with dashes, map onto these)."""

    method: str = "feddda"
    clip_path: str = ""
    num_server_rounds: int = 3
    local_epochs: int = 1
    lr: float = 0.002
    batch_size: int = 32
    shots: int = 2
    n_global: int = 16
    n_local: int = 16
    image_size: int = 32
    train_pool: int = 2000
    test_per_client: int = 300
    seed: int = 0
    fail_partition: int = -1  # a client that raises during training (tests)

    @classmethod
    def from_config(cls, config, **overrides) -> Settings:
        names = {f.name for f in fields(cls)}
        values = {}
        for key, value in {**dict(config), **overrides}.items():
            name = key.replace("-", "_")
            if name in names:
                values[name] = value
        settings = cls(**values)
        if settings.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {settings.method!r}")
        return settings


def build_model(settings: Settings) -> FedDDAModel:
    """The method's model on the CLIP checkpoint ``settings.clip_path``, the same initial
    learnable tensors on every client (seeded)."""
    from transformers import AutoTokenizer, CLIPModel

    if not settings.clip_path or not Path(settings.clip_path).is_dir():
        raise ValueError(f"clip_path must be a folder holding a CLIP checkpoint, got {settings.clip_path!r}")
    clip = CLIPModel.from_pretrained(settings.clip_path)
    tokenizer = AutoTokenizer.from_pretrained(settings.clip_path)
    torch.manual_seed(settings.seed)
    classnames = ["circle", "square", "triangle", "cross", "star", "ring"]
    if settings.method == "feddda":
        return FedDDAModel(clip, tokenizer, classnames, settings.n_global, settings.n_local)
    return FedDDAModel(clip, tokenizer, classnames, settings.n_global + settings.n_local, 0,
                       adapters=False)  # fmt: skip


def shared_part(model: FedDDAModel, method: str) -> dict[str, torch.Tensor]:
    """What a client sends and the server averages."""
    if method == "feddda":
        return model.shared_state()
    return model.trainable_state()  # promptfl shares it; local sends it back untouched


def client_data(settings: Settings, partition_id: int, num_partitions: int) -> tuple[ImageSet, ImageSet]:
    """Few-shot training set and test set of client ``partition_id``: one style each."""
    if not 0 <= partition_id < num_partitions <= len(STYLES):
        raise ValueError(
            f"partition {partition_id} of {num_partitions}: need 0 <= id < n <= {len(STYLES)} styles"
        )
    styles = STYLES[:num_partitions]
    pool = synthetic_images(settings.train_pool, settings.image_size, styles, seed=settings.seed)
    test = synthetic_images(settings.test_per_client * num_partitions, settings.image_size, styles,
                            seed=settings.seed + 10_000)  # fmt: skip
    train = partition(pool, num_partitions, shots=settings.shots, seed=settings.seed)[partition_id]
    test = partition(test, num_partitions, seed=settings.seed)[partition_id]
    return train, test


def _pixels(model: FedDDAModel, images: torch.Tensor) -> torch.Tensor:
    """CLIP's normalisation; the checkpoints here are trained at the images' own size."""
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)
    return ((images - mean) / std).to(next(model.parameters()).device)


def local_train(model: FedDDAModel, data: ImageSet, settings: Settings, round_seed: int) -> float:
    """``local_epochs`` of SGD on the learnable tensors; returns the mean loss."""
    if len(data) == 0:
        raise ValueError("the client has no training data")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=settings.lr, momentum=0.9)
    g = torch.Generator().manual_seed(round_seed)
    losses = []
    model.train()
    for _ in range(settings.local_epochs):
        order = torch.randperm(len(data), generator=g)
        for i in range(0, len(data), settings.batch_size):
            idx = order[i : i + settings.batch_size]
            logits = model(_pixels(model, data.images[idx]))
            loss = F.cross_entropy(logits, data.labels[idx].to(logits.device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    model.eval()
    return sum(losses) / len(losses)


@torch.no_grad()
def evaluate(model: FedDDAModel, data: ImageSet, batch_size: int = 256) -> float:
    """Top-1 accuracy."""
    if len(data) == 0:
        raise ValueError("the client has no test data")
    model.eval()
    text = model.text_features()
    correct = 0
    for i in range(0, len(data), batch_size):
        feats = model.image_features(_pixels(model, data.images[i : i + batch_size]))
        pred = (feats @ text.T).argmax(-1).cpu()
        correct += int((pred == data.labels[i : i + batch_size]).sum())
    return correct / len(data)
