"""TensorMemoryTracker (needs the torch extra)."""

import pytest

torch = pytest.importorskip("torch")

from icml25_core.memory import TensorMemoryTracker  # noqa: E402


def test_memory_tracker_counts_live_tensors_and_releases_them():
    with TensorMemoryTracker() as mem:
        a = torch.ones(1000)  # 4000 bytes
        b = a * 2  # 4000 more
    assert mem.peak_bytes >= 8000
    del a, b
    with TensorMemoryTracker() as mem:
        for _ in range(10):
            t = torch.ones(1000)
            del t
    assert 4000 <= mem.peak_bytes < 8000  # freed each time: never two at once


def test_memory_tracker_ignores_views_and_in_place_updates_of_older_tensors():
    weight = torch.ones(10_000)
    with TensorMemoryTracker() as mem:
        weight.add_(1.0)
        view = weight[:5000]
        view.mul_(2.0)
    assert mem.peak_bytes == 0


def test_memory_tracker_sees_autograd_saved_activations():
    layer = torch.nn.Linear(100, 100)
    x = torch.randn(256, 100)
    with TensorMemoryTracker() as no_grad_mem, torch.no_grad():
        layer(x).relu().sum()
    with TensorMemoryTracker() as grad_mem:
        layer(x).relu().sum().backward()
    assert grad_mem.peak_bytes > no_grad_mem.peak_bytes
