"""Peak tensor memory of a block of torch code, on any device.

On CUDA the allocator's own peak (``torch.cuda.max_memory_allocated``) is the measure
papers report. Elsewhere :class:`TensorMemoryTracker` counts what an allocator peak would:
every storage a torch operation creates inside the block (autograd's saved activations,
optimizer state and workspace outputs included), released when its last tensor dies. A
storage that aliases memory allocated before the block (a view of a parameter, an
in-place update) is not counted, so the figure is the block's own extra memory.

Unlike the resident-set growth :func:`icml25_core.compare` records, the figure does not
depend on what the allocator kept from earlier work, so it is the same from run to run:
fit for a claim about memory. Needs the ``torch`` extra of icml25-core.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["TensorMemoryTracker"]


def _storage_key(t: torch.Tensor) -> tuple[str, int] | None:
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    if storage.nbytes() == 0:
        return None
    return (str(t.device), storage.data_ptr())


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.live: dict[tuple[str, int], list[int]] = {}  # key -> [nbytes, n tensors]
        self.current = 0
        self.peak = 0

    def _release(self, key: tuple[str, int]) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del self.live[key]
            self.current -= entry[0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {
            _storage_key(t)
            for t in tree_flatten((args, kwargs or {}))[0]
            if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            key = _storage_key(t)
            if key is None:
                continue
            if key in self.live:
                self.live[key][1] += 1
            elif key in inputs:
                continue  # aliases memory from before the block
            else:
                self.live[key] = [t.untyped_storage().nbytes(), 1]
                self.current += self.live[key][0]
                self.peak = max(self.peak, self.current)
            weakref.finalize(t, self._release, key)
        return out


class TensorMemoryTracker:
    """Context manager measuring the peak memory of the tensors created inside it.

    Attributes
    ----------
    peak_bytes : int
        After the block: the CUDA allocator's peak above its level at entry when
        ``device`` is CUDA, else the largest total size of live storages created in the
        block (see the module docstring).

    Examples
    --------
    >>> with TensorMemoryTracker() as mem:
    ...     x = torch.ones(1000)
    >>> mem.peak_bytes >= 4000
    True
    """

    def __init__(self, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.peak_bytes = 0
        self._mode: _Counter | None = None
        self._base = 0

    def __enter__(self) -> TensorMemoryTracker:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            self._mode = _Counter()
            self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device) - self._base)
        else:
            assert self._mode is not None
            self._mode.__exit__(*exc)
            self.peak_bytes = int(self._mode.peak)
