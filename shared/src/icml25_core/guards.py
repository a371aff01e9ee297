"""Guards every package's torch code shares: training divergence, labels, float inputs and
targets, and weights loaded into a module.

Each raises an error that names the argument (or the file and tensor) and the expectation,
so a user never meets a raw error from deep inside torch or NumPy, nor a silent NaN:

- :func:`check_loss` / :func:`check_module_finite`: a ``FloatingPointError`` naming the
  learning-rate argument when training diverges (a non-finite or runaway loss, NaN weights);
- :func:`check_labels`: integer class labels in ``[0, n_classes)``, from any array-like;
- :func:`as_float_tensor`: an array-like (list, NumPy array, tensor of any real dtype) as a
  float tensor of the model's dtype, converted explicitly and checked finite;
- :func:`check_targets`: regression targets whose shape matches the model's outputs (no
  silent broadcasting);
- :func:`check_state_dict` / :func:`load_state_dict_file`: weights checked against the
  module (keys, shapes, finiteness) before ``load_state_dict``, naming the file and tensor.

Needs the ``torch`` extra of icml25-core for the tensor helpers (torch is imported lazily,
so the label check works with NumPy alone).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .validation import _is_torch

__all__ = [
    "RUNAWAY",
    "as_float_tensor",
    "check_labels",
    "check_loss",
    "check_module_finite",
    "check_state_dict",
    "check_targets",
    "load_state_dict_file",
]


RUNAWAY = 1e6
""":func:`check_loss` with a ``reference`` (the loss at the start of training) stops a loss
that grew this many times beyond it (or beyond 1, when it started below 1): at too large a
step size, Adam-type updates and linearized models grow the loss without bound while it
stays finite for many steps."""


def _lr_text(lr: Any, lr_name: str) -> str:
    if lr is None:
        return lr_name
    return f"{lr_name}={lr:g}" if isinstance(lr, float | int) else f"{lr_name}={lr!r}"


def check_loss(
    loss: Any,
    *,
    lr: Any = None,
    lr_name: str = "lr",
    step: int | None = None,
    limit: float | None = None,
    reference: float | None = None,
    what: str = "training loss",
) -> float:
    """Stop a training loop whose loss diverged.

    Parameters
    ----------
    loss : float or scalar tensor
        The step's loss (read once, with ``float``).
    lr : float, optional
        The learning rate in use, shown in the message.
    lr_name : str
        The argument that sets it (``"lr"``, ``"lr_vae"``...), named in the message.
    step : int, optional
        The step (or epoch, round) shown in the message.
    limit : float, optional
        Also stop when ``|loss| > limit`` (a runaway that is still finite).
    reference : float, optional
        The loss at the start of training; sets ``limit`` to
        ``RUNAWAY * max(|reference|, 1)`` when ``limit`` is not given.
    what : str
        What the value is, for the message.

    Returns
    -------
    float
        The loss as a Python float.

    Raises
    ------
    FloatingPointError
        If the loss is NaN or infinite, or beyond ``limit``; the message names ``lr_name``.
    """
    value = float(loss.detach()) if _is_torch(loss) else float(loss)
    if limit is None and reference is not None and math.isfinite(reference):
        limit = RUNAWAY * max(abs(reference), 1.0)
    runaway = limit is not None and math.isfinite(value) and abs(value) > limit
    if not math.isfinite(value) or runaway:
        at = f" at step {step}" if step is not None else ""
        beyond = f" (beyond {limit:g})" if runaway else ""
        raise FloatingPointError(
            f"training diverged: the {what} became {value!r}{beyond}{at} with "
            f"{_lr_text(lr, lr_name)}; lower {lr_name}"
        )
    return value


def check_module_finite(
    module: Any, *, lr: Any = None, lr_name: str = "lr", step: int | None = None
) -> None:
    """Stop a training loop whose update left NaN or infinite weights in ``module``
    (a ``torch.nn.Module``): a ``FloatingPointError`` naming the tensors and ``lr_name``."""
    bad = [
        name
        for name, p in module.state_dict().items()
        if p.is_floating_point() and not bool(p.isfinite().all())
    ]
    if bad:
        at = f" at step {step}" if step is not None else ""
        raise FloatingPointError(
            f"training diverged: non-finite weights in {_shown(bad)}{at} with "
            f"{_lr_text(lr, lr_name)}; lower {lr_name}"
        )


def _shown(names: list[str], most: int = 5) -> str:
    extra = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + extra


def check_labels(
    y: Any,
    name: str,
    *,
    n_classes: int | None = None,
    n_samples: int | None = None,
) -> Any:
    """Class labels as integers in ``[0, n_classes)``.

    Parameters
    ----------
    y : array_like or torch.Tensor, shape (n_samples,)
        The labels: integers, or floats that are whole numbers (converted explicitly).
    name : str
        The argument's name, used in the error message.
    n_classes : int, optional
        The number of classes; labels must be below it.
    n_samples : int, optional
        The required number of labels (the length of the inputs they label).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        int64 labels, a tensor on ``y``'s device when ``y`` is a tensor.

    Raises
    ------
    TypeError
        If ``y`` is not numeric (strings, objects) or is complex or boolean.
    ValueError
        If ``y`` is not one-dimensional, is empty, has the wrong length, holds NaN,
        fractional, negative or too-large values; the message names ``name``.
    """
    values = y.detach().cpu().numpy() if _is_torch(y) else np.asarray(y)
    kind = values.dtype.kind
    if kind not in "iuf":
        what = "boolean" if kind == "b" else f"dtype {values.dtype}"
        raise TypeError(f"{name} must hold integer class labels, got {what}")
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
    if values.size == 0:
        raise ValueError(f"{name} must not be empty")
    if n_samples is not None and values.shape[0] != n_samples:
        raise ValueError(
            f"{name} must hold one label per sample ({n_samples}), got {values.shape[0]}"
        )
    if kind == "f":
        if not np.isfinite(values).all():
            raise ValueError(f"{name} must not hold NaN or infinite labels")
        if not (values == np.round(values)).all():
            bad = values[values != np.round(values)][0].item()
            raise ValueError(f"{name} must hold whole-number class labels, got {bad!r}")
    if values.min() < 0:
        raise ValueError(f"{name} must hold labels >= 0, got {values.min().item()!r}")
    if n_classes is not None and values.max() >= n_classes:
        raise ValueError(
            f"{name} must hold labels below n_classes={n_classes}, got {values.max().item()!r}"
        )
    labels = values.astype(np.int64)
    if _is_torch(y):
        import torch

        return torch.as_tensor(labels, device=y.device)
    return labels


def as_float_tensor(
    x: Any,
    name: str,
    *,
    dtype: Any = None,
    device: Any = None,
    ndim: int | None = None,
    shape: tuple[int | None, ...] | None = None,
    finite: bool = True,
    nonempty: bool = True,
) -> Any:
    """``x`` as a floating-point tensor of ``dtype`` on ``device``, checked.

    Accepts a list, a NumPy array or a tensor of any real dtype (integer images included)
    and converts it explicitly; refuses strings, objects, booleans and complex values.

    Parameters
    ----------
    x : array_like or torch.Tensor
        The input.
    name : str
        The argument's name, used in the error message.
    dtype : torch.dtype, optional
        The model's dtype (default ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Where the result lives (default: ``x``'s device for a tensor, else CPU).
    ndim, shape, finite, nonempty
        As in :func:`~icml25_core.validation.check_array`.

    Returns
    -------
    torch.Tensor
    """
    import torch

    from .validation import check_array

    dtype = torch.get_default_dtype() if dtype is None else dtype
    if _is_torch(x):
        if x.dtype == torch.bool or x.dtype.is_complex:
            raise TypeError(f"{name} must be a real-valued tensor, got dtype {x.dtype}")
        tensor = x
    else:
        raw = np.asarray(x)
        if raw.dtype.kind not in "iuf":
            what = "boolean" if raw.dtype.kind == "b" else f"dtype {raw.dtype}"
            raise TypeError(f"{name} must be a real-valued array, got {what}")
        tensor = torch.as_tensor(raw)
    tensor = tensor.to(device=device if device is not None else tensor.device, dtype=dtype)
    return check_array(tensor, name, ndim=ndim, shape=shape, finite=finite, nonempty=nonempty)


def check_targets(y: Any, name: str, *, n_samples: int, n_outputs: int) -> Any:
    """Regression targets shaped like the model's outputs, ``(n_samples, n_outputs)``.

    A one-dimensional ``y`` is accepted for a single output and returned as a column; any
    other shape is refused rather than broadcast against the predictions.

    Raises
    ------
    ValueError
        If the shape does not match; the message names ``name`` and the expected shape.
    """
    shape = tuple(int(s) for s in y.shape)
    if shape == (n_samples,) and n_outputs == 1:
        return y.reshape(n_samples, 1)
    if shape != (n_samples, n_outputs):
        raise ValueError(
            f"{name} must have shape ({n_samples}, {n_outputs}) to match the model's "
            f"{n_outputs} output(s) for {n_samples} samples, got {shape}"
        )
    return y


def check_state_dict(
    module: Any, state: Mapping[str, Any], source: str | os.PathLike, *, strict: bool = True
) -> None:
    """Check ``state`` against ``module`` before ``module.load_state_dict(state)``.

    Parameters
    ----------
    module : torch.nn.Module
        The model the weights are for.
    state : mapping of str to torch.Tensor
        The weights.
    source : path or str
        Where they came from (a file), named in every error.
    strict : bool
        Also require every tensor of ``module`` and refuse unexpected ones.

    Raises
    ------
    ValueError
        Missing or unexpected tensors (with ``strict``), a shape that differs from the
        module's, or NaN / infinite values; the message names ``source`` and the tensors.
    """
    own = module.state_dict()
    if strict:
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing {_shown(missing)}")
            if unexpected:
                parts.append(f"unexpected {_shown(unexpected)}")
            raise ValueError(
                f"{source} does not hold the weights of this {type(module).__name__}: "
                + "; ".join(parts)
            )
    wrong = [
        f"{k} {tuple(v.shape)} (the model has {tuple(own[k].shape)})"
        for k, v in state.items()
        if k in own and tuple(v.shape) != tuple(own[k].shape)
    ]
    if wrong:
        raise ValueError(
            f"{source} holds tensors of the wrong shape for this {type(module).__name__}: "
            f"{_shown(wrong, 3)}; was it saved with another configuration?"
        )
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(v.isfinite().all())]
    if bad:
        raise ValueError(f"{source} holds NaN or infinite weights in {_shown(bad)}")


def _fill_tied(module: Any, state: dict) -> None:
    """Tensors a module shares between two names (tied weights) are stored once by
    ``safetensors.torch.save_model``; give the missing alias the stored tensor."""
    groups: dict[tuple, list[str]] = {}
    for key, tensor in module.state_dict(keep_vars=False).items():
        if tensor.numel():
            groups.setdefault(
                (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)),
                [],
            ).append(key)
    for names in groups.values():
        present = [n for n in names if n in state]
        if present:
            for name in names:
                state.setdefault(name, state[present[0]])


def load_state_dict_file(
    module: Any, file: str | os.PathLike, *, strict: bool = True, map_location: Any = "cpu"
) -> Any:
    """Load a safetensors file into ``module`` after :func:`check_state_dict`.

    A missing or unreadable file is an error naming it (never a pickle is read).

    Returns
    -------
    torch.nn.Module
        ``module``, with the weights loaded.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(file)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file {str(path)!r}")
    try:
        state = load_file(str(path), device=str(map_location))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{path} is not a readable safetensors file: {err}") from None
    _fill_tied(module, state)
    check_state_dict(module, state, path, strict=strict)
    module.load_state_dict(state, strict=strict)
    return module
