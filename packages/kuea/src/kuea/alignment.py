"""``align``: fine-tune a CLIP image tower so its kernel matches a teacher's.

One step on a batch ``x`` of unlabelled images (the official ``train_one_epoch``):
``e = f(x)`` (trained tower), ``e0 = f0(x)`` (a frozen copy of it at the start),
``d = g(x)`` (the frozen teacher), then

    L = w_reg * mean_i ||e_i - e0_i||^2 + w_align * mean_ij (K_student(e) - K_teacher(d))^2

AdamW (weight decay on the tower, none on kernel parameters), a linear warm-up then a
cosine decay of the learning rate, a function of the step (step k runs at the rate of
step k, the first at ``lr / warmup``; the official loop runs its first step at the full
rate because it updates the rate only after each optimizer step). Only the image tower
(and, if asked, the kernel parameters) change: every other parameter of the model (the
text tower, the logit scale) is frozen and checked bitwise unchanged at the end.

``objective="feature_l2"`` is the distillation baseline (a linear head P, trained with
the tower, and ``w_align * mean ||P e - d||^2 / d_t`` instead of the kernel term);
``objective="none"`` keeps only the regulariser.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from icml25_core import check_choice, check_loss, check_module_finite, check_scalar
from icml25_core.progress import make_progress

from .fitting import KernelFit, _embed, fit_kernel_params, median_bandwidth
from .kernels import KERNELS, StudentKernel, teacher_kernel
from .losses import REDUCTIONS, alignment_loss, regularization_loss
from .towers import as_images, as_teacher, image_tower, parameters_digest

__all__ = ["OBJECTIVES", "AlignResult", "align"]

OBJECTIVES = ("kernel", "feature_l2", "none")
REFERENCE_BATCH = 64
"""The batch size of the paper's recipe, which ``w_align = 0.5`` was set for."""
_STEP_DIR = re.compile(r"^step-(\d{7})$")


@dataclass
class AlignResult:
    """What :func:`align` returns.

    Attributes
    ----------
    model : nn.Module
        The CLIP model, aligned in place (the same object that was passed).
    kernel : StudentKernel or None
        The student kernel (its parameters as learned, or as fixed); None unless
        ``objective="kernel"``.
    head : nn.Linear or None
        The projection head of ``objective="feature_l2"``.
    history : dict of str to list of float
        Per step: ``step``, ``lr``, ``loss``, ``reg``, ``align`` and the kernel's
        parameters by name.
    kernel_fit : KernelFit or None
        The fit that set the student kernel's parameters, where they were fitted.
    """

    model: nn.Module
    kernel: StudentKernel | None
    head: nn.Linear | None
    history: dict[str, list[float]] = field(default_factory=dict)
    kernel_fit: KernelFit | None = None


def _lr_factor(step: int, steps: int, warmup: int) -> float:
    """Linear warm-up from lr / warmup, then cosine to 0 (open_clip's ``cosine_lr``)."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(steps - warmup, 1)
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / span))


class _Batches:
    """Deterministic, resumable minibatches: a fresh permutation per epoch from
    ``(seed, epoch)``, full batches only (as the official ``drop_last=True``) unless the
    data is smaller than a batch."""

    def __init__(self, data, batch_size: int, seed: int) -> None:
        self.data, self.seed = data, seed
        self.n = len(data)
        self.batch_size = min(batch_size, self.n)
        self.per_epoch = self.n // self.batch_size

    def indices(self, step: int) -> list[int]:
        """The images of step ``step``."""
        epoch, position = divmod(step, self.per_epoch)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        idx = torch.randperm(self.n, generator=g)[
            position * self.batch_size : (position + 1) * self.batch_size
        ]
        return idx.tolist()

    def __call__(self, step: int) -> Tensor:
        return _gather(self.data, self.indices(step))


def _collate(items: list) -> Tensor:
    """A batch of images from dataset items (images, or (image, label) pairs)."""
    return torch.stack([it[0] if isinstance(it, (tuple, list)) else it for it in items])


def _gather(data, idx: list[int]) -> Tensor:
    """The images at ``idx`` of a tensor or of a dataset of images / (image, label) pairs."""
    if isinstance(data, Tensor):
        return data[idx]
    return _collate([data[i] for i in idx])


def _load(data, index_batches, workers: int, pin_memory: bool = False):
    """The batches of images at each index list of ``index_batches``, in order: read in
    this process, or by ``workers`` DataLoader worker processes (prefetching)."""
    if workers == 0 or isinstance(data, Tensor):
        return (_gather(data, idx) for idx in index_batches)
    loader = torch.utils.data.DataLoader(
        data,
        batch_sampler=index_batches,
        num_workers=workers,
        collate_fn=_collate,
        pin_memory=pin_memory,
    )
    return iter(loader)


def _as_data(images, batch_size: int, num_workers: int | None) -> tuple[Any, int, bool]:
    """``(data, workers, pin_memory)`` from a tensor, a map-style dataset or a DataLoader
    over one (its dataset, workers and ``pin_memory``; its batches are align's own)."""
    pin = False
    if isinstance(images, torch.utils.data.DataLoader):
        if isinstance(images.dataset, torch.utils.data.IterableDataset):
            raise TypeError(
                "images is a DataLoader over an IterableDataset: align draws its own "
                "resumable batches by index, so it needs a map-style dataset"
            )
        if images.batch_size is not None and images.batch_size != batch_size:
            raise ValueError(
                f"images is a DataLoader with batch_size={images.batch_size} but "
                f"batch_size={batch_size}: give align the same batch size (it draws the "
                "batches itself, from the loader's dataset and with its workers)"
            )
        workers = images.num_workers if num_workers is None else num_workers
        images, pin = images.dataset, images.pin_memory
    else:
        workers = 0 if num_workers is None else num_workers
    check_scalar(workers, "num_workers", low=0, integer=True)
    images = as_images(images)
    if isinstance(images, Tensor):
        return images, workers, pin
    if hasattr(images, "__getitem__") and hasattr(images, "__len__"):
        return images, workers, pin
    raise TypeError(
        "images must be a (n, C, H, W) tensor, a map-style dataset of image tensors "
        f"(or (image, label) pairs) or a DataLoader over one, got {type(images).__name__}"
    )


def _check_weights(tower, head, kern, step, lr, kernel_lr) -> None:
    """NaN weights after ``step`` are a ``FloatingPointError`` naming the learning rate. Run
    before a checkpoint and after the last step only: between them a NaN tower shows up in
    the next step's embedding check, without a pass over every weight per step."""
    for module in (tower, head):
        if module is not None:
            check_module_finite(module, lr=lr, step=step)
    if kern is not None:
        check_module_finite(kern, lr=kernel_lr, lr_name="kernel_lr", step=step)


def _borrow(module: nn.Module, device: torch.device) -> Callable[[], None]:
    """Put ``module`` in eval mode on ``device``; returns the function that puts its mode
    and device back (the caller's teacher is used, not mutated for good)."""
    training = module.training
    tensor = next(module.parameters(), None)
    home = tensor.device if tensor is not None else None
    module.to(device).eval()

    def restore() -> None:
        module.train(training)
        if home is not None:
            module.to(home)

    return restore


def align(
    clip_model: nn.Module,
    teacher: Callable[[Tensor], Any],
    images: Tensor | torch.utils.data.Dataset | torch.utils.data.DataLoader,
    *,
    steps: int = 1000,
    batch_size: int = REFERENCE_BATCH,
    lr: float = 1e-5,
    weight_decay: float = 1e-4,
    warmup: int | None = None,
    w_reg: float = 1.0,
    w_align: float = 0.5,
    objective: str = "kernel",
    kernel: str = "polynomial",
    teacher_kernel_kind: str = "polynomial",
    gamma: float | None = None,
    c0: float | None = None,
    bandwidth: float | None = None,
    teacher_bandwidth: float | None = None,
    degree: int = 3,
    teacher_degree: int = 3,
    learn_kernel_params: bool = False,
    kernel_lr: float = 1e-3,
    reduction: str = "mean",
    fit_images: int = 512,
    num_workers: int | None = None,
    device: str | torch.device | None = None,
    seed: int = 0,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    keep_checkpoints: int = 2,
    resume: bool = False,
    progress: bool = True,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> AlignResult:
    """Align the image tower of ``clip_model`` to ``teacher`` on unlabelled ``images``.

    Parameters
    ----------
    clip_model : nn.Module
        A transformers ``CLIPModel`` (or ``CLIPVisionModelWithProjection``) or an open_clip
        model; trained in place.
    teacher : callable
        ``images -> (n, d_t)`` features (a transformers model such as ``Dinov2Model``, any
        module or function); run without gradient, in eval mode and on ``device`` during
        the call; a module's mode and device are restored afterwards (its parameters'
        ``requires_grad`` flags are never touched). It receives the same pixel tensors as
        CLIP.
    images : Tensor of shape (n, C, H, W), a map-style dataset of such tensors, or a DataLoader over one
        Preprocessed images of the size the CLIP tower expects (a dataset may yield
        ``(image, label)`` pairs; labels are ignored). A DataLoader contributes its dataset,
        ``num_workers`` and ``pin_memory``; its sampler is not used (align draws its own
        seeded, resumable batches) and its ``batch_size`` must equal ``batch_size``.
    steps, batch_size : int
        Optimizer steps and images per step (the paper: 64).
    lr, weight_decay : float
        AdamW on the tower (the paper: 1e-5, 1e-4).
    warmup : int, optional
        Linear warm-up steps (default: 7 % of ``steps``, the README's 2800 / 40000).
    w_reg, w_align : float
        Weights of the regulariser and of the alignment term (the paper: 1, 0.5; see the
        batch-size warning below).
    objective : {"kernel", "feature_l2", "none"}
        KUEA, the feature-distillation baseline, or the regulariser alone.
    kernel : {"polynomial", "gaussian", "cosine"}
        The student's kernel.
    teacher_kernel_kind : {"polynomial", "gaussian", "cosine"}
        The teacher's kernel (the paper: ``(d d^T / n_feat + 1)^3``).
    gamma, c0, bandwidth : float, optional
        The student kernel's parameters; those not given are fitted on ``fit_images``
        images drawn at random with ``seed`` (not the first ones: a dataset in folder
        order would give one class) by :func:`kuea.fit_kernel_params`, ``c0`` held at 1
        unless given. The normalized polynomial kernel depends on ``gamma / c0`` only, so
        ``gamma`` needs ``c0`` too (the official pair: ``gamma=0.0032, c0=0.191623``);
        ``c0`` alone fits ``gamma`` beside it.
    teacher_bandwidth : float, optional
        The teacher's gaussian width (default: the median heuristic on the fit images).
    degree : int
        The student's polynomial degree (3).
    teacher_degree : int
        The teacher kernel's polynomial degree (3: the paper's cubic teacher kernel).
    learn_kernel_params : bool
        Learn the student kernel's parameters with the tower (log-parameterized, AdamW at
        ``kernel_lr`` without weight decay); otherwise they stay fixed.
    reduction : {"mean", "off_diagonal"}
        How the kernel error is averaged (the official code: ``"mean"``).
    num_workers : int, optional
        DataLoader worker processes that read a dataset's images (and the fit sample) ahead
        of the steps (default: the DataLoader's, else 0: read in this process). The
        batches, and so the run, are the same for any number of workers.
    device : str or torch.device, optional
        Where to train (default: where the model's parameters are).
    seed : int
        Seeds the minibatch order.
    checkpoint_dir : path, optional
        Write a checkpoint every ``checkpoint_every`` steps (default: ``steps // 10``) and at
        the end, as ``step-NNNNNNN`` folders, each written atomically, keeping the last
        ``keep_checkpoints``. A folder that already holds checkpoints is only continued with
        ``resume=True`` (then the run's settings must match the checkpoint's).
    progress : bool
        Show a progress bar (quiet when output is not a terminal).
    callback : callable, optional
        ``callback(step, metrics)`` after each step.

    Returns
    -------
    AlignResult

    Notes
    -----
    The kernel term is an average over ``batch_size^2`` entries, so its weight relative
    to the regulariser is tied to the batch size it was tuned at: users reported the
    kernel loss staying flat at batch 1024 with ``w_align = 0.5``. A warning is raised
    when ``batch_size`` differs from 64 by more than a factor of 4 while ``w_align`` keeps
    the default; re-tune ``w_align`` for your batch size.
    """
    check_scalar(steps, "steps", low=1, integer=True)
    check_scalar(batch_size, "batch_size", low=2, integer=True)
    check_scalar(lr, "lr", low=0.0, low_inclusive=False)
    check_scalar(weight_decay, "weight_decay", low=0.0)
    check_scalar(w_reg, "w_reg", low=0.0)
    check_scalar(w_align, "w_align", low=0.0)
    check_scalar(kernel_lr, "kernel_lr", low=0.0, low_inclusive=False)
    check_scalar(fit_images, "fit_images", low=2, integer=True)
    check_scalar(keep_checkpoints, "keep_checkpoints", low=1, integer=True)
    check_choice(objective, "objective", OBJECTIVES)
    check_choice(kernel, "kernel", KERNELS)
    check_choice(teacher_kernel_kind, "teacher_kernel_kind", KERNELS)
    check_choice(reduction, "reduction", REDUCTIONS)
    check_scalar(degree, "degree", low=1, integer=True)
    check_scalar(teacher_degree, "teacher_degree", low=1, integer=True)
    if kernel == "polynomial" and gamma is not None and c0 is None:
        raise ValueError(
            "gamma= needs c0=: the normalized polynomial kernel depends on gamma / c0 only, "
            "so gamma alone is ambiguous (the official pair is gamma=0.0032, c0=0.191623); "
            "give both, c0 alone (gamma is fitted), or neither"
        )
    warmup = max(1, round(0.07 * steps)) if warmup is None else warmup
    check_scalar(warmup, "warmup", low=0, high=steps, integer=True)
    warmup = max(warmup, 1)
    if learn_kernel_params and (objective != "kernel" or kernel == "cosine"):
        raise ValueError(
            "learn_kernel_params=True needs objective='kernel' and a kernel with parameters "
            "('polynomial' or 'gaussian')"
        )
    if objective == "kernel" and w_align == 0.5 and not 16 <= batch_size <= 256:
        warnings.warn(
            f"w_align=0.5 was set for batch size {REFERENCE_BATCH}; at batch_size="
            f"{batch_size} the kernel term's weight relative to the regulariser changes (a "
            "kernel loss that stays flat was reported at batch 1024): tune w_align",
            UserWarning,
            stacklevel=2,
        )

    tower = image_tower(clip_model)
    data, workers, pin_memory = _as_data(images, batch_size, num_workers)
    if len(data) == 0:
        raise ValueError("images is empty: at least one image is needed")
    if len(data) < 2:
        raise ValueError("images must hold at least 2 images (a kernel needs a batch of 2)")
    batches = _Batches(data, batch_size, seed)
    if device is None:
        device = next(clip_model.parameters()).device
    device = torch.device(device)
    clip_model.to(device)
    teacher_fn = as_teacher(teacher)
    restore_teacher = _borrow(teacher, device) if isinstance(teacher, nn.Module) else None
    try:

        def teach(x: Tensor) -> Tensor:
            with torch.no_grad():
                d = teacher_fn(x)
            if not isinstance(d, Tensor) or d.ndim != 2 or len(d) != len(x):
                shape = tuple(d.shape) if isinstance(d, Tensor) else type(d).__name__
                raise ValueError(
                    f"the teacher must return (n, d_t) features for n = {len(x)} images, got {shape}"
                )
            if not bool(torch.isfinite(d).all()):
                raise ValueError("the teacher returned NaN or infinite features")
            return d.float()

        first = batches(0).to(device)
        tower.check_images(first)

        # the student kernel, its parameters fitted where not given
        fit, kern, head = None, None, None
        if objective == "kernel":
            needs_fit = (kernel == "polynomial" and gamma is None) or (
                kernel == "gaussian" and bandwidth is None
            )
            pick = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
            chosen = sorted(pick[:fit_images].tolist())
            chunks = [chosen[i : i + 256] for i in range(0, len(chosen), 256)]
            sample = torch.cat(list(_load(data, chunks, workers))).to(device)
            if needs_fit or (teacher_kernel_kind == "gaussian" and teacher_bandwidth is None):
                tower.check_images(sample)
                e_s, d_s = _embed(tower.encode, sample, 256), _embed(teach, sample, 256)
                if teacher_kernel_kind == "gaussian" and teacher_bandwidth is None:
                    teacher_bandwidth = median_bandwidth(d_s)
                if needs_fit:
                    fit = fit_kernel_params(
                        e_s,
                        d_s,
                        kind=kernel,
                        teacher_kind=teacher_kernel_kind,
                        teacher_bandwidth=teacher_bandwidth,
                        c0=1.0 if c0 is None else c0,
                        degree=degree,
                        teacher_degree=teacher_degree,
                        batch_size=batch_size,
                    )
                    gamma = fit.params.get("gamma", gamma)
                    c0 = fit.params.get("c0", c0)
                    bandwidth = fit.params.get("bandwidth", bandwidth)
            kern = StudentKernel(
                kernel,
                gamma=gamma,
                c0=1.0 if c0 is None else c0,
                bandwidth=bandwidth,
                degree=degree,
                learnable=learn_kernel_params,
            ).to(device)
        elif objective == "feature_l2":
            with torch.no_grad():
                d_dim = teach(first[:2]).shape[1]
                e_dim = tower.encode(first[:2]).shape[1]
            head = nn.Linear(e_dim, d_dim).to(device)

        frozen = copy.deepcopy(tower.trainable).eval().requires_grad_(False)
        grad_flags = {name: p.requires_grad for name, p in clip_model.named_parameters()}
        frozen_named = list(tower.frozen_parameters())
        for _, p in frozen_named:
            p.requires_grad_(False)
        tower.trainable.requires_grad_(True)
        before = parameters_digest(iter(frozen_named))

        groups = [
            {"params": list(tower.trainable.parameters()), "weight_decay": weight_decay, "lr": lr}
        ]
        if head is not None:
            groups.append(
                {"params": list(head.parameters()), "weight_decay": weight_decay, "lr": lr}
            )
        if kern is not None and learn_kernel_params:
            groups.append({"params": list(kern.parameters()), "weight_decay": 0.0, "lr": kernel_lr})
        optimizer = torch.optim.AdamW(groups)
        base_lrs = [g["lr"] for g in groups]

        settings = {
            "steps": steps,
            "batch_size": batch_size,
            "lr": lr,
            "weight_decay": weight_decay,
            "warmup": warmup,
            "w_reg": w_reg,
            "w_align": w_align,
            "objective": objective,
            "kernel": kernel,
            "teacher_kernel_kind": teacher_kernel_kind,
            "degree": degree,
            "teacher_degree": teacher_degree,
            "learn_kernel_params": learn_kernel_params,
            "kernel_lr": kernel_lr,
            "reduction": reduction,
            "seed": seed,
            "n_images": len(data),
        }
        history: dict[str, list[float]] = {k: [] for k in ("step", "lr", "loss", "reg", "align")}
        if kern is not None:
            history.update({k: [] for k in kern.params()})
        start = 0
        ckpt = None
        if checkpoint_dir is not None:
            from .checkpoints import Checkpoints

            ckpt = Checkpoints(Path(checkpoint_dir), settings, keep_checkpoints)
            state = ckpt.restore(resume, tower.trainable, frozen, optimizer, kern, head)
            if state is not None:
                start, history = state
            every = checkpoint_every or max(steps // 10, 1)
            check_scalar(every, "checkpoint_every", low=1, integer=True)

        modes = tower.trainable.training
        tower.trainable.train()
        stream = _load(data, (batches.indices(k) for k in range(start, steps)), workers, pin_memory)
        try:
            with make_progress(transient=True) as bar:
                task = bar.add_task("kuea align", total=steps, completed=start, visible=progress)
                for step in range(start, steps):
                    factor = _lr_factor(step, steps, warmup)  # step k runs at the lr of step k
                    for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
                        group["lr"] = base * factor
                    x = next(stream).to(device, non_blocking=pin_memory)
                    if step > 0:
                        tower.check_images(x)
                    d = teach(x)
                    with torch.no_grad():
                        e0 = tower.encode(x, frozen)
                    e = tower.encode(x)
                    check_loss(
                        e.detach().abs().max(), lr=lr, step=step, what="largest embedding value"
                    )
                    reg = regularization_loss(e, e0)
                    if objective == "kernel":
                        k_d = teacher_kernel(
                            d,
                            teacher_kernel_kind,
                            bandwidth=teacher_bandwidth,
                            degree=teacher_degree,
                        )
                        term = alignment_loss(kern(e.float()), k_d, reduction)
                    elif objective == "feature_l2":
                        term = (head(e) - d).pow(2).mean()
                    else:
                        term = torch.zeros((), device=device)
                    loss = w_reg * reg + w_align * term
                    check_loss(loss, lr=lr, step=step)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    metrics = {
                        "step": step + 1,
                        "lr": optimizer.param_groups[0]["lr"],
                        "loss": float(loss.detach()),
                        "reg": float(reg.detach()),
                        "align": float(term.detach()),
                    }
                    if kern is not None:
                        metrics.update(kern.params())
                    for k, v in metrics.items():
                        history[k].append(v)
                    if callback is not None:
                        callback(step + 1, metrics)
                    bar.advance(task)
                    saving = ckpt is not None and ((step + 1) % every == 0 or step + 1 == steps)
                    if saving or step + 1 == steps:  # the next step's checks come too late here
                        _check_weights(tower.trainable, head, kern, step, lr, kernel_lr)
                    if saving:
                        ckpt.save(step + 1, history, tower.trainable, frozen, optimizer, kern, head)
        finally:
            tower.trainable.train(modes)
            for name, p in clip_model.named_parameters():
                p.requires_grad_(grad_flags[name])
        if parameters_digest(iter(frozen_named)) != before:
            raise RuntimeError("a parameter outside the image tower changed during alignment")
        return AlignResult(clip_model, kern, head, history, fit)
    finally:
        if restore_teacher is not None:
            restore_teacher()
