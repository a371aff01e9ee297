"""Training and evaluation: an expert alone, a :class:`~disc_coevo.socialized.Socialized`
pair, or both directions of a coevolution (A learns with B's help, B with A's); weights
saved to safetensors atomically."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

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

__all__ = ["OPTIMIZERS", "accuracy", "coevolve", "load_weights", "save_weights", "train"]

OPTIMIZERS = ("adamw", "sgd")
WEIGHTS = "model.safetensors"
CHECKPOINT_FILES = (WEIGHTS, "meta.json")


def _check_data(X, y, model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Images as a float tensor of the model's dtype (any real array-like, converted
    explicitly) and labels checked against the model's number of classes."""
    dtype = next(model.parameters()).dtype
    X = as_float_tensor(X, "X", dtype=dtype, device="cpu", ndim=4)
    y = torch.as_tensor(check_labels(y, "y", n_samples=len(X)))
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    with torch.no_grad():
        n_classes = model(X[:2].to(device)).shape[1]
    model.train(was)
    if int(y.max()) >= n_classes:
        raise ValueError(
            f"y must hold labels below the model's {n_classes} classes, got {int(y.max())}"
        )
    return X, y


def train(
    model: nn.Module,
    X,
    y,
    *,
    epochs: int = 30,
    batch_size: int = 64,
    optimizer: str = "adamw",
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
    progress: bool = False,
    checkpoint_dir: str | Path | None = None,
    overwrite: bool = False,
) -> list[float]:
    """Train ``model`` (a :class:`Socialized` pair with its own losses, or any classifier
    with cross-entropy) on images ``X (N, C, H, W)`` and labels ``y (N,)``, on the model's
    device; returns the mean loss per epoch and leaves the model in eval mode.

    ``optimizer``: ``"adamw"`` (with ``weight_decay``) or ``"sgd"`` (momentum 0.9), the
    release's two recipes, with a cosine learning-rate decay over all steps. With
    ``checkpoint_dir``, the weights and the epoch are written after every epoch (atomically:
    the folder is replaced whole). A non-empty ``checkpoint_dir`` is refused before training
    starts, unless ``overwrite=True`` and it holds only an earlier checkpoint (``meta.json``
    and ``model.safetensors``): nothing else in it is ever deleted.

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
    if checkpoint_dir is not None:
        check_replaceable(checkpoint_dir, overwrite=overwrite, contents=CHECKPOINT_FILES)
    X, y = _check_data(X, y, model)
    if len(X) < 2:
        raise ValueError("X must hold at least 2 images (BatchNorm needs a batch)")
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
    steps = epochs * math.ceil(len(X) / batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    history = []
    model.train()
    for epoch in track(range(epochs), "training") if progress else range(epochs):
        order = torch.randperm(len(X), generator=g)
        total, count = 0.0, 0
        for i in range(0, len(X), batch_size):
            idx = order[i : i + batch_size]
            if len(idx) < 2:
                continue
            xb, yb = X[idx].to(device), y[idx].to(device)
            if isinstance(model, Socialized):
                loss, _ = model.loss(xb, yb)
            else:
                loss = F.cross_entropy(model(xb), yb)
            check_loss(loss, lr=lr, step=len(history))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
            if isinstance(model, Socialized):
                model.step += 1
            total += float(loss.detach()) * len(idx)
            count += len(idx)
        history.append(total / max(count, 1))
        if checkpoint_dir is not None:
            save_weights(model, checkpoint_dir, overwrite=overwrite or epoch > 0, epoch=epoch + 1)
    model.eval()
    return history


@torch.no_grad()
def accuracy(model: nn.Module, X, y, batch_size: int = 256) -> float:
    """Top-1 accuracy of ``model`` (eval mode) on ``X``, ``y``."""
    X, y = _check_data(X, y, model)
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    correct = 0
    for i in range(0, len(X), batch_size):
        correct += int(
            (model(X[i : i + batch_size].to(device)).argmax(1).cpu() == y[i : i + batch_size]).sum()
        )
    model.train(was)
    return correct / len(X)


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
