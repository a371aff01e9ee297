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

import functools
import re
from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F

from .data import SHAPES, STYLES, ImageSet, image_folder, partition, pixel_values, synthetic_images
from .model import FedDDAModel

METHODS = ("feddda", "promptfl", "local")


@dataclass(frozen=True)
class Settings:
    """Run configuration (``[tool.flwr.app.config]`` keys, with dashes, map onto these).

    ``clip_path``: a folder or hub id for ``CLIPModel.from_pretrained``; empty = the
    package's CLIP pretrained on the synthetic images (trained and cached on first use).
    ``data_root``: a user's data, ``<data_root>/<partition-id>/{train,test}/<class name>/
    *.png|jpg``, with ``classnames`` (comma-separated) fixing the class order; empty = the
    synthetic images, one style per client. ``result_path``: where the server writes the
    per-round metrics as JSON (empty = nowhere). ``image_size``: pixels images are resized
    or rendered to (0 = the CLIP vision tower's own resolution). ``min_nodes``: clients the
    server waits for each round (0 = those connected when the run starts). ``adapters =
    False`` turns FedDDA's visual adapters and gate off (the prompt-only ablation).
    """

    method: str = "feddda"
    clip_path: str = ""
    data_root: str = ""
    classnames: str = ""
    result_path: str = ""
    num_server_rounds: int = 5
    local_epochs: int = 2
    lr: float = 0.002
    batch_size: int = 32
    shots: int = 2
    n_global: int = 16
    n_local: int = 16
    adapters: bool = True
    image_size: int = 0
    train_pool: int = 2000
    test_per_client: int = 300
    seed: int = 0
    min_nodes: int = 0
    device: str = ""  # "" = cuda when available, else cpu

    @classmethod
    def from_config(cls, config, **overrides) -> Settings:
        """Settings from a Flower run config (dashed keys) overlaid with ``overrides``
        (underscored or dashed); an unknown key is an error, not silently ignored."""
        names = {f.name for f in fields(cls)}
        values = {
            key.replace("-", "_"): value for key, value in {**dict(config), **overrides}.items()
        }
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown}; known: {sorted(names)}")
        settings = cls(**values)
        if settings.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {settings.method!r}")
        if settings.classnames and not settings.data_root:
            raise ValueError("classnames is for a user's data: set data-root as well")
        if settings.data_root and not settings.classnames:
            raise ValueError(
                "data-root needs classnames (comma-separated), the class order all clients share"
            )
        for name in ("num_server_rounds", "local_epochs", "batch_size", "n_global"):
            if int(getattr(settings, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(settings, name)}")
        return settings

    @property
    def class_list(self) -> list[str]:
        """The class names, in label order."""
        if not self.classnames:
            return list(SHAPES)
        return [c.strip() for c in self.classnames.split(",") if c.strip()]


@functools.lru_cache(maxsize=2)
def _load_clip(path: str):
    from transformers import AutoTokenizer, CLIPModel

    from .pretrain import cached_clip

    if not path:
        path = str(cached_clip())
    elif Path(path).is_dir():
        if not (Path(path) / "config.json").is_file():
            raise ValueError(
                f"clip_path {path!r} is a folder without a CLIP checkpoint (config.json)"
            )
    elif not re.fullmatch(r"[\w.-]+/[\w.-]+", path) or path.startswith((".", "~")):
        raise ValueError(f"clip_path {path!r} is neither a folder nor a hub id like 'org/name'")
    return CLIPModel.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def build_model(settings: Settings) -> FedDDAModel:
    """The method's model on the CLIP checkpoint ``settings.clip_path`` (frozen towers loaded
    once per process), with the same initial learnable tensors on every client (seeded)."""
    clip, tokenizer = _load_clip(settings.clip_path)
    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(settings.seed)
    if settings.method == "feddda":
        model = FedDDAModel(
            clip,
            tokenizer,
            settings.class_list,
            settings.n_global,
            settings.n_local,
            adapters=settings.adapters,
        )
    else:
        model = FedDDAModel(
            clip,
            tokenizer,
            settings.class_list,
            settings.n_global + settings.n_local,
            0,
            adapters=False,
        )
    return model.to(device)


def shared_part(model: FedDDAModel, method: str) -> dict[str, torch.Tensor]:
    """What a client sends and the server averages (on the CPU): FedDDA's global context
    and shared adapter, PromptFL's whole prompt, nothing for local-only training."""
    if method == "feddda":
        state = model.shared_state()
    elif method == "promptfl":
        state = model.trainable_state()
    else:
        state = {}
    return {k: v.cpu() for k, v in state.items()}


def personal_part(model: FedDDAModel, method: str) -> dict[str, torch.Tensor]:
    """What a client keeps across rounds: FedDDA's local context, specific adapter and
    gate, local-only training's whole prompt, nothing for PromptFL."""
    if method == "feddda":
        return model.personal_state()
    if method == "local":
        return model.trainable_state()
    return {}


@functools.lru_cache(maxsize=8)
def _folder_client(root: str, classnames: tuple[str, ...], size: int) -> tuple[ImageSet, ImageSet]:
    sets = []
    for split in ("train", "test"):
        folder = Path(root) / split
        if not folder.is_dir():
            raise ValueError(f"client {Path(root).name} has no data: {folder} is not a folder")
        sets.append(image_folder(folder, classnames, size))
    return sets[0], sets[1]


@functools.lru_cache(maxsize=8)
def _synthetic_client(
    n_clients: int, pool: int, test_size: int, image_size: int, shots: int, seed: int
) -> tuple[list[ImageSet], list[ImageSet]]:
    styles = STYLES[:n_clients]
    train = synthetic_images(pool, image_size, styles, seed=seed)
    test = synthetic_images(test_size * n_clients, image_size, styles, seed=seed + 10_000)
    return partition(train, n_clients, shots=shots, seed=seed), partition(
        test, n_clients, seed=seed
    )


def image_size(settings: Settings) -> int:
    """``settings.image_size``, or the CLIP vision tower's resolution when it is 0."""
    return settings.image_size or _load_clip(settings.clip_path)[0].config.vision_config.image_size


def client_data(
    settings: Settings, partition_id: int, num_partitions: int
) -> tuple[ImageSet, ImageSet]:
    """Training and test set of client ``partition_id``.

    Synthetic data: one style per client, ``shots`` images per class for training.
    ``data_root``: the client's own ``train`` and ``test`` image folders (all of them; the
    user decides how few-shot they are), resized to ``image_size``. Both kinds are built
    once per process and reused in later rounds.
    """
    if not 0 <= partition_id < num_partitions:
        raise ValueError(
            f"partition-id {partition_id} is not in [0, num-partitions={num_partitions})"
        )
    if settings.data_root:  # read and resized once per process, not every round
        root = str(Path(settings.data_root) / str(partition_id))
        return _folder_client(root, tuple(settings.class_list), image_size(settings))
    if num_partitions > len(STYLES):
        raise ValueError(
            f"num-partitions {num_partitions} exceeds the {len(STYLES)} synthetic styles "
            "(one style per client)"
        )
    train, test = _synthetic_client(
        num_partitions,
        settings.train_pool,
        settings.test_per_client,
        image_size(settings),
        settings.shots,
        settings.seed,
    )
    return train[partition_id], test[partition_id]


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
            logits = model(pixel_values(data.images[idx], model.device))
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
        feats = model.image_features(pixel_values(data.images[i : i + batch_size], model.device))
        pred = (feats @ text.T).argmax(-1).cpu()
        correct += int((pred == data.labels[i : i + batch_size]).sum())
    return correct / len(data)
