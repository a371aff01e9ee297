"""Input checks that raise clear errors naming the argument and the expectation.

The helpers accept NumPy arrays and torch tensors alike (anything with ``shape`` and the
usual reductions) and never copy a tensor off its device.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _all(mask: Any) -> bool:
    return bool(mask.all())


def check_array(
    x: Any,
    name: str,
    *,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
    finite: bool = True,
    nonnegative: bool = False,
    positive: bool = False,
    nonempty: bool = True,
) -> Any:
    """Check an array or tensor and return it unchanged.

    Parameters
    ----------
    x : array_like or torch.Tensor
        The value to check. Python lists are converted with :func:`numpy.asarray`.
    name : str
        The argument's name, used in the error message.
    ndim : int, optional
        Required number of dimensions.
    shape : sequence of int or None, optional
        Required shape; ``None`` entries match any length.
    finite, nonnegative, positive, nonempty : bool
        Require no NaN/inf, all ``>= 0``, all ``> 0``, at least one element.

    Raises
    ------
    TypeError
        If ``x`` is not numeric.
    ValueError
        If a requirement fails; the message names ``name`` and the expectation.
    """
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        x = np.asarray(x)
    if not _is_torch(x) and not np.issubdtype(np.asarray(x).dtype, np.number):
        raise TypeError(f"{name} must be numeric, got dtype {x.dtype}")
    if not _is_torch(x) and np.iscomplexobj(x):
        raise TypeError(f"{name} must be real, got complex dtype {x.dtype}")
    if _is_torch(x) and (x.dtype.is_complex or str(x.dtype) == "torch.bool"):
        raise TypeError(f"{name} must be a real numeric tensor, got dtype {x.dtype}")
    if ndim is not None and len(x.shape) != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {tuple(x.shape)}")
    if shape is not None:
        expected = tuple(shape)
        got = tuple(int(s) for s in x.shape)
        if len(got) != len(expected) or any(
            e is not None and e != g for e, g in zip(expected, got, strict=False)
        ):
            shown = tuple("any" if e is None else e for e in expected)
            raise ValueError(f"{name} must have shape {shown}, got {got}")
    size = math.prod(int(s) for s in x.shape)
    if nonempty and size == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(x.shape)}")
    if size == 0:
        return x
    if finite:
        finite_mask = x.isfinite() if _is_torch(x) else np.isfinite(x)
        if not _all(finite_mask):
            raise ValueError(f"{name} must be finite (no NaN or inf)")
    if positive and not _all(x > 0):
        raise ValueError(f"{name} must be strictly positive, got minimum {float(x.min())!r}")
    if nonnegative and not _all(x >= 0):
        raise ValueError(f"{name} must be non-negative, got minimum {float(x.min())!r}")
    return x


def as_float_array(x: Any, name: str, **checks: Any) -> np.ndarray:
    """``x`` (any array-like: list, NumPy array, pandas DataFrame or Series) as a float64
    NumPy array, checked with :func:`check_array` (keyword ``checks``).

    The input's own dtype is checked before the conversion, so complex values (whose
    imaginary part a cast to float would drop with only a warning) and non-numeric columns
    are refused, naming ``name``.
    """
    raw = np.asarray(x)
    check_array(raw, name, **{**checks, "finite": False, "nonnegative": False, "positive": False})
    return check_array(raw.astype(np.float64, copy=False), name, **checks)


def check_scalar(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    integer: bool = False,
) -> Any:
    """Check a real (or integer) scalar against an interval and return it unchanged."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "an integer" if integer else "a real number"
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    if not integer and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}, got {value!r}")
    return value


def as_generator(seed: Any, name: str = "seed") -> np.random.Generator:
    """``numpy.random.default_rng(seed)`` after checking ``seed``: ``None`` (fresh
    entropy), a non-negative integer, or a ``numpy.random.Generator`` (returned as is,
    so a caller's stream continues). Anything else is refused naming ``name``.

    Raises
    ------
    TypeError
        ``seed`` is not None, an integer or a Generator (a string, a float, a bool, a
        legacy ``RandomState``).
    ValueError
        A negative integer.
    """
    if seed is None or isinstance(seed, np.random.Generator):
        return np.random.default_rng(seed)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"{name} must be None, a non-negative integer or a numpy.random.Generator, got "
            f"{type(seed).__name__} {seed!r}"
        )
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed!r}")
    return np.random.default_rng(int(seed))


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Check that ``value`` is one of ``choices`` and return it."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def available_memory(device: Any = "cpu") -> int | None:
    """Bytes a new allocation can take on ``device``: the free memory of a CUDA device
    (``torch.cuda.mem_get_info``), else the host's available memory (Linux
    ``MemAvailable``, or the free physical pages); ``None`` when it cannot be told."""
    name = str(device)
    if name.startswith("cuda"):
        import torch

        index = torch.device(name).index
        return int(
            torch.cuda.mem_get_info(index if index is not None else torch.cuda.current_device())[0]
        )
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"  # pragma: no cover


def check_memory(nbytes: float, name: str, *, device: Any = "cpu", what: str = "") -> None:
    """Refuse a request whose estimated memory ``nbytes`` exceeds what ``device`` has
    available (:func:`available_memory`), before anything is allocated: a ``ValueError``
    naming the argument ``name``, the estimate and the available memory. Nothing is
    checked when the available memory cannot be told."""
    available = available_memory(device)
    if available is not None and nbytes > available:
        detail = f" ({what})" if what else ""
        raise ValueError(
            f"{name}: this request needs at least {_size(nbytes)}{detail}, more than the "
            f"{_size(available)} available on {device}; use a smaller {name}"
        )
