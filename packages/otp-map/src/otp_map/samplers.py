"""Turn the user's data into batch samplers: arrays, tensors, or callables ``f(n)``.

An array or tensor shaped ``(n, *sample_shape)`` is an empirical measure; batches are drawn
uniformly with replacement by a seeded ``torch.Generator`` (so training is reproducible and
resumable bit for bit). A callable ``f(n) -> (n, *sample_shape)`` samples an infinite
measure; its randomness is its own. ``sample(n, replace=False)`` draws distinct rows of an
array (at most all of them), for statistics that resampling would distort, such as how
many distinct points the data holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from icml25_core import check_array

Sampler = Callable[..., torch.Tensor]


def to_tensor(x: Any, name: str, device, dtype=torch.float32) -> torch.Tensor:
    """``x`` as a float tensor on ``device`` after checking it is a finite, non-empty batch."""
    if isinstance(x, torch.Tensor):
        check_array(x.detach(), name)
        return x.detach().to(device=device, dtype=dtype)
    arr = check_array(np.asarray(x), name)
    return torch.as_tensor(np.asarray(arr, dtype=np.float64), dtype=dtype, device=device)


def make_sampler(
    data: Any, name: str, device: torch.device, generator: torch.Generator
) -> tuple[Sampler, tuple[int, ...]]:
    """A function ``sample(n, replace=True) -> (n, *shape)`` on ``device`` and the sample
    shape; for an array, ``replace=False`` returns ``min(n, len(data))`` distinct rows.

    Raises
    ------
    ValueError
        Empty data, NaN or inf, fewer than 2 dimensions, or a callable returning a batch of
        the wrong length.
    """
    if callable(data) and not isinstance(data, torch.Tensor | np.ndarray):
        probe = _call(data, name, 2, device)
        shape = tuple(probe.shape[1:])

        def sample(n: int, replace: bool = True) -> torch.Tensor:
            # a callable's draws are independent: with or without replacement is the same
            out = _call(data, name, n, device)
            if tuple(out.shape[1:]) != shape:
                raise ValueError(
                    f"{name}(n) returned samples shaped {tuple(out.shape[1:])}, earlier {shape}"
                )
            return out

        return sample, shape
    table = to_tensor(data, name, device)
    if table.ndim < 2:
        raise ValueError(
            f"{name} must be shaped (n_samples, *sample_shape) with at least 2 dimensions, got "
            f"shape {tuple(table.shape)}; reshape 1-D data with x[:, None]"
        )

    def sample(n: int, replace: bool = True) -> torch.Tensor:
        if replace:
            idx = torch.randint(table.shape[0], (n,), generator=generator, device=device)
        else:
            idx = torch.randperm(table.shape[0], generator=generator, device=device)[:n]
        return table[idx]

    return sample, tuple(table.shape[1:])


def _call(fn: Callable, name: str, n: int, device) -> torch.Tensor:
    out = to_tensor(fn(n), f"{name}({n})", device)
    if out.ndim < 2 or out.shape[0] != n:
        raise ValueError(
            f"{name}(n) must return n samples shaped (n, *sample_shape); for n={n} got shape "
            f"{tuple(out.shape)}"
        )
    return out
