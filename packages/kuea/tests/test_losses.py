"""The objective against hand computations."""

import pytest
import torch

from kuea import alignment_loss, regularization_loss


def test_regularizer_zero_with_zero_gradient_at_init():
    e0 = torch.randn(6, 4)
    e = e0.clone().requires_grad_(True)
    loss = regularization_loss(e, e0)
    loss.backward()
    assert float(loss) == 0.0 and float(e.grad.abs().max()) == 0.0


def test_regularizer_hand_computation():
    e = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    e0 = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    # (1 + 4 + 9 + 16) / 2: summed over dimensions, averaged over the batch
    assert float(regularization_loss(e, e0)) == pytest.approx(15.0)
    with pytest.raises(ValueError, match="same shape"):
        regularization_loss(e, e0[:1])


def test_alignment_reductions():
    a = torch.tensor([[1.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.0]])
    b = torch.tensor([[1.0, 0.1, 0.3], [0.1, 1.0, 0.2], [0.3, 0.2, 1.0]])
    sq = 2 * (0.4**2 + 0.3**2)
    assert float(alignment_loss(a, b)) == pytest.approx(sq / 9)
    assert float(alignment_loss(a, b, "off_diagonal")) == pytest.approx(sq / 6)
    with pytest.raises(ValueError, match="reduction"):
        alignment_loss(a, b, "sum")
