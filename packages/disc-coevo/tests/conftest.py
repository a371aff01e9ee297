"""Tiny experts shared by the tests of this package."""

import pytest
import torch

from disc_coevo import TinyResNet


@pytest.fixture
def experts():
    """``experts(seed=0)``: two random TinyResNets (widths 4, 8, 8; 3 and 2 classes) in
    float64 for 8x8 single-channel images, with non-trivial BatchNorm statistics."""

    def make(seed=0, widths=(4, 8, 8)):
        torch.manual_seed(seed)
        a, b = TinyResNet(3, widths=widths).double(), TinyResNet(2, widths=widths).double()
        x = torch.rand(16, 1, 8, 8, dtype=torch.float64)
        for m in (a, b):  # move the running statistics off their defaults
            m.train()
            with torch.no_grad():
                m(x)
            m.eval()
        return a, b

    return make


@pytest.fixture
def images():
    """Random images ``(10, 1, 8, 8)`` in float64 and 3-class labels."""
    g = torch.Generator().manual_seed(1)
    return torch.rand(10, 1, 8, 8, generator=g, dtype=torch.float64), torch.randint(
        0, 3, (10,), generator=g
    )
