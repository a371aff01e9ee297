"""Training and evaluation: an expert alone, a :class:`~disc_coevo.socialized.Socialized`
pair, or both directions of a coevolution (A learns with B's help, B with A's), from
in-memory tensors or a ``DataLoader`` (paper-scale 224-px datasets, workers, the caller's
transforms); the release's SGD recipe as :data:`RELEASE_SGD`; weights saved to
safetensors atomically."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from torch.utils.data import DataLoader

from icml25_core import (
    as_float_tensor,
    check_choice,
    check_labels,
    check_loss,
    check_scalar,
    load_state_dict_file,
    track,
)
from icml25_core.hub import atomic_directory, check_replaceable, recover_directory

from .experts import StagedExpert
from .socialized import Socialized

__all__ = [
    "OPTIMIZERS",
    "RELEASE_SGD",
    "SCHEDULES",
    "accuracy",
    "coevolve",
    "load_weights",
    "save_weights",
    "train",
]

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "step", "constant")
STEP_MILESTONES = (0.3, 0.6, 0.9)
"""Fractions of all steps where ``schedule="step"`` multiplies the learning rate by 0.1."""
RELEASE_SGD = {"optimizer": "sgd", "lr": 0.01, "weight_decay": 1e-3, "schedule": "step"}
"""The release's classification recipe (``configs/cls/_base_/schedules/mmlab.py``): SGD,
momentum 0.9, lr 0.01, weight decay 1e-3, the lr divided by 10 after 30 %, 60 % and 90 % of
the steps (its 3000 / 6000 / 9000 of 10000 iterations at batch 64). Use as
``train(model, loader, **RELEASE_SGD, epochs=...)``."""
WEIGHTS = "model.safetensors"
CHECKPOINT_FILES = (WEIGHTS, "meta.json")


def _n_classes(model: nn.Module, x: torch.Tensor) -> int:
    """The model's number of output classes, from one forward pass in eval mode."""
    was = model.training
    model.eval()
    with torch.no_grad():
        n = model(x[:2].to(next(model.parameters()).device)).shape[1]
    model.train(was)
    return n


def _check_labels_fit(y: torch.Tensor, n_classes: int) -> None:
    if int(y.max()) >= n_classes:
        raise ValueError(
            f"y must hold labels below the model's {n_classes} classes, got {int(y.max())}"
        )


def _check_data(X, y, model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Images as a float tensor of the model's dtype (any real array-like, converted
    explicitly) and labels checked against the model's number of classes."""
    dtype = next(model.parameters()).dtype
    X = as_float_tensor(X, "X", dtype=dtype, device="cpu", ndim=4)
    y = torch.as_tensor(check_labels(y, "y", n_samples=len(X)))
    _check_labels_fit(y, _n_classes(model, X))
    return X, y


def _check_loader(loader: DataLoader, y, model: nn.Module) -> None:
    if y is not None:
        raise TypeError("y must be None when X is a DataLoader (its batches hold the labels)")
    try:
        n = len(loader)
    except TypeError:
        raise TypeError("X must be a DataLoader with a length (a map-style dataset)") from None
    if n == 0:
        raise ValueError("X is a DataLoader without a batch")


def _loader_batch(
    batch, model: nn.Module, n_classes: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """One ``(images, labels)`` batch of a DataLoader, checked like in-memory data;
    ``n_classes`` caches the model's class count (read on the first batch)."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(
            "X (a DataLoader) must yield (images, labels) batches, got "
            f"{type(batch).__name__}"
            + (f" of length {len(batch)}" if hasattr(batch, "__len__") else "")
        )
    param = next(model.parameters())
    xb = as_float_tensor(batch[0], "X batch", dtype=param.dtype, device="cpu", ndim=4)
    yb = torch.as_tensor(check_labels(batch[1], "y batch", n_samples=len(xb)))
    if not n_classes:
        n_classes.append(_n_classes(model, xb))
    _check_labels_fit(yb, n_classes[0])
    return xb, yb


def _batches(X, y, batch_size: int, order: torch.Tensor | None):
    """``(images, labels)`` batches of in-memory data in ``order`` (or in sequence)."""
    index = order if order is not None else torch.arange(len(X))
    for i in range(0, len(X), batch_size):
        idx = index[i : i + batch_size]
        yield X[idx], y[idx]


def _schedule(opt: torch.optim.Optimizer, schedule: str, steps: int):
    """The learning-rate schedule over ``steps`` optimizer steps."""
    if schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    if schedule == "step":
        milestones = [round(f * steps) for f in STEP_MILESTONES]
        return torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.1)
    return torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)


def train(
    model: nn.Module,
    X,
    y=None,
    *,
    epochs: int = 30,
    batch_size: int = 64,
    optimizer: str = "adamw",
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    schedule: str = "cosine",
    augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
    seed: int = 0,
    progress: bool = False,
    checkpoint_dir: str | Path | None = None,
    overwrite: bool = False,
) -> list[float]:
    """Train ``model`` (a :class:`Socialized` pair with its own losses, or any classifier
    with cross-entropy) on the model's device; returns the mean loss per epoch and leaves
    the model in eval mode.

    Data: images ``X (N, C, H, W)`` and labels ``y (N,)`` in memory (shuffled each epoch
    with ``seed``, batches of ``batch_size``), or ``X`` a ``torch.utils.data.DataLoader``
    yielding ``(images, labels)`` batches and ``y=None`` (its own batch size, sampler,
    workers and per-image transforms, e.g. torchvision's ``Resize(224)``, ``CenterCrop``,
    ``Normalize`` as the release does; its batches are checked like in-memory data). A
    batch of one image is skipped (BatchNorm needs two). ``augment``: a function applied
    to every training batch on the device, ``(B, C, H, W) -> (B, C, H', W')`` (e.g. a
    torchvision v2 transform); default none, as the release.

    ``optimizer``: ``"adamw"`` (with ``weight_decay``) or ``"sgd"`` (momentum 0.9);
    ``schedule``: ``"cosine"`` decay over all steps, ``"step"`` (lr x 0.1 after 30 %, 60 %
    and 90 % of the steps) or ``"constant"``. :data:`RELEASE_SGD` holds the release's
    settings. With ``checkpoint_dir``, the weights and the epoch are written after every
    epoch (atomically: the folder is replaced whole). A non-empty ``checkpoint_dir`` is
    refused before training starts, unless ``overwrite=True`` and it holds only an earlier
    checkpoint (``meta.json`` and ``model.safetensors``): nothing else in it is ever
    deleted.

    Raises
    ------
    FloatingPointError
        When the loss diverges (NaN, infinite); the message names ``lr``.
    FileExistsError
        When ``checkpoint_dir`` cannot be written without losing files (see above).
    """
    check_scalar(epochs, "epochs", integer=True, low=1)
    check_scalar(batch_size, "batch_size", integer=True, low=1)
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    check_scalar(weight_decay, "weight_decay", low=0.0)
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    check_choice(schedule, "schedule", SCHEDULES)
    if augment is not None and not callable(augment):
        raise TypeError(
            f"augment must be a function of a batch or None, got {type(augment).__name__}"
        )
    if checkpoint_dir is not None:
        check_replaceable(checkpoint_dir, overwrite=overwrite, contents=CHECKPOINT_FILES)
    loader = isinstance(X, DataLoader)
    if loader:
        _check_loader(X, y, model)
        steps_per_epoch, n_classes = len(X), []
    else:
        X, y = _check_data(X, y, model)
        if len(X) < 2:
            raise ValueError("X must hold at least 2 images (BatchNorm needs a batch)")
        steps_per_epoch = math.ceil(len(X) / batch_size)
    device = next(model.parameters()).device
    if isinstance(model, Socialized):
        params = model.trainable_parameters()
    else:
        params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no parameter to train (every parameter is frozen)")
    if optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    scheduler = _schedule(opt, schedule, epochs * steps_per_epoch)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    history = []
    model.train()
    for epoch in track(range(epochs), "training") if progress else range(epochs):
        if loader:
            batches = (_loader_batch(b, model, n_classes) for b in X)
        else:
            batches = _batches(X, y, batch_size, torch.randperm(len(X), generator=g))
        total, count = 0.0, 0
        for xb, yb in batches:
            if len(xb) < 2:
                continue
            xb, yb = xb.to(device), yb.to(device)
            if augment is not None:
                xb = augment(xb)
            if isinstance(model, Socialized):
                loss, _ = model.loss(xb, yb)
            else:
                loss = F.cross_entropy(model(xb), yb)
            check_loss(loss, lr=lr, step=len(history))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            scheduler.step()
            if isinstance(model, Socialized):
                model.step += 1
            total += float(loss.detach()) * len(xb)
            count += len(xb)
        history.append(total / max(count, 1))
        if checkpoint_dir is not None:
            save_weights(model, checkpoint_dir, overwrite=overwrite or epoch > 0, epoch=epoch + 1)
    model.eval()
    return history


@torch.no_grad()
def accuracy(model: nn.Module, X, y=None, batch_size: int = 256) -> float:
    """Top-1 accuracy of ``model`` (eval mode) on ``X``, ``y`` in memory, or on a
    ``DataLoader`` ``X`` of ``(images, labels)`` batches (``y=None``)."""
    if isinstance(X, DataLoader):
        _check_loader(X, y, model)
        n_classes: list[int] = []
        batches = (_loader_batch(b, model, n_classes) for b in X)
    else:
        X, y = _check_data(X, y, model)
        batches = _batches(X, y, batch_size, None)
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    correct = total = 0
    for xb, yb in batches:
        correct += int((model(xb.to(device)).argmax(1).cpu() == yb).sum())
        total += len(yb)
    model.train(was)
    return correct / total


def coevolve(
    expert_a: StagedExpert,
    expert_b: StagedExpert,
    task_a: tuple,
    task_b: tuple,
    input_shape: tuple[int, int, int],
    **train_kwargs,
) -> tuple[Socialized, Socialized]:
    """Both directions of socialized coevolution: ``A`` learns ``task_a = (X, y,
    num_classes)`` with a frozen copy of ``B`` as auxiliary, and ``B`` learns ``task_b`` with
    a frozen copy of ``A`` (copies taken before either trains). Each task head starts
    from the learning expert's own head when its class count fits. Returns the two
    trained :class:`Socialized` models."""
    frozen_a, frozen_b = copy.deepcopy(expert_a), copy.deepcopy(expert_b)
    out = []
    for main, aux, (X, y, k) in ((expert_a, frozen_b, task_a), (expert_b, frozen_a, task_b)):
        own = main.head if getattr(main.head, "out_features", None) == k else None
        model = Socialized(main, aux, k, input_shape, head=own)
        train(model, X, y, **train_kwargs)
        out.append(model)
    return out[0], out[1]


def save_weights(model: nn.Module, path: str | Path, *, overwrite: bool = False, **meta) -> Path:
    """Write ``model``'s state (safetensors) and ``meta`` (JSON) into the folder ``path``,
    atomically; an existing non-empty folder needs ``overwrite=True``."""
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    with atomic_directory(path, overwrite=overwrite, contents=CHECKPOINT_FILES) as tmp:
        save_file(state, str(tmp / WEIGHTS))
        (tmp / "meta.json").write_text(json.dumps(meta))
    return Path(path)


def load_weights(model: nn.Module, path: str | Path) -> dict:
    """Load weights saved by :func:`save_weights` into ``model`` (strictly); returns the
    saved ``meta``. A missing or corrupt file is an error naming it."""
    folder = Path(path)
    recover_directory(folder)
    file = folder / WEIGHTS
    if not file.is_file():
        raise FileNotFoundError(f"no weights at {str(file)!r}")
    load_state_dict_file(model, file, map_location=next(model.parameters()).device)
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        return {}
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{meta_file} is not valid JSON: {err}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_file} must hold a JSON object, got {type(meta).__name__}")
    return meta
