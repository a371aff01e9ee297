"""Kernel identities: symmetry, unit diagonal, PSD, invariances, the gamma/c0 ratio."""

import pytest
import torch

from kuea import (
    StudentKernel,
    alignment_loss,
    cosine_kernel,
    gaussian_kernel,
    kernel_matrix,
    normalize_kernel,
    polynomial_kernel,
    teacher_kernel,
)

X = torch.randn(12, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
KINDS = {
    "polynomial": lambda x: polynomial_kernel(x, 0.3, 0.7),
    "gaussian": lambda x: gaussian_kernel(x, 1.3),
    "cosine": cosine_kernel,
}


@pytest.mark.parametrize("kind", KINDS)
def test_symmetric_unit_diagonal_psd(kind):
    k = KINDS[kind](X)
    torch.testing.assert_close(k, k.T)
    torch.testing.assert_close(k.diagonal(), torch.ones(12, dtype=torch.float64))
    assert torch.linalg.eigvalsh(k).min() > -1e-10


@pytest.mark.parametrize("kind", ["gaussian", "cosine"])
def test_rotation_invariance(kind):
    q, _ = torch.linalg.qr(
        torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    )
    torch.testing.assert_close(KINDS[kind](X @ q), KINDS[kind](X))


def test_closed_forms():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    # polynomial: k12 = c0^3, k11 = (g + c0)^3, k22 = (4 g + c0)^3
    g, c = 0.5, 1.0
    want = c**3 / ((g + c) ** 1.5 * (4 * g + c) ** 1.5)
    assert float(polynomial_kernel(x, g, c)[0, 1]) == pytest.approx(want)
    # gaussian: |x1 - x2|^2 = 5
    assert float(gaussian_kernel(x, 2.0)[0, 1]) == pytest.approx(
        torch.exp(torch.tensor(-5 / 8.0)).item()
    )
    assert float(cosine_kernel(x)[0, 1]) == pytest.approx(0.0)
    # the teacher's default: gamma = 1 / n_feat, c0 = 1
    torch.testing.assert_close(teacher_kernel(X), polynomial_kernel(X, 1 / 5, 1.0))


def test_polynomial_depends_on_ratio_only():
    torch.testing.assert_close(polynomial_kernel(X, 0.2, 0.5), polynomial_kernel(X, 2.0, 5.0))
    assert not torch.allclose(polynomial_kernel(X, 0.2, 0.5), polynomial_kernel(X, 0.2, 5.0))


def test_gaussian_gradient_finite_at_zero_distance():
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]], requires_grad=True)
    gaussian_kernel(x, 1.0).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_identical_embeddings_zero_alignment_loss():
    kern = StudentKernel("polynomial", gamma=1 / 5, c0=1.0)
    assert float(alignment_loss(kern(X.float()), teacher_kernel(X.float()))) == pytest.approx(
        0.0, abs=1e-12
    )
    gk = StudentKernel("gaussian", bandwidth=1.3)
    assert float(alignment_loss(gk(X), gaussian_kernel(X, 1.3))) == pytest.approx(0.0, abs=1e-12)


def test_student_kernel_buffers_or_parameters():
    fixed = StudentKernel("polynomial", gamma=0.01, c0=0.2)
    assert list(fixed.parameters()) == [] and {n for n, _ in fixed.named_buffers()} == {
        "log_gamma",
        "log_c0",
    }
    learned = StudentKernel("gaussian", bandwidth=2.0, learnable=True)
    assert [n for n, _ in learned.named_parameters()] == ["log_bandwidth"]
    assert learned.params() == {"bandwidth": pytest.approx(2.0)}
    torch.testing.assert_close(fixed(X.float()), polynomial_kernel(X.float(), 0.01, 0.2))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "rbf"}, "kind"),
        ({"kind": "polynomial"}, "gamma"),
        ({"kind": "polynomial", "gamma": -1.0}, "gamma"),
        ({"kind": "gaussian"}, "bandwidth"),
        ({"kind": "cosine", "learnable": True}, "learnable"),
    ],
)
def test_student_kernel_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        StudentKernel(**kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        cosine_kernel(torch.ones(3))
    with pytest.raises(ValueError, match="zero embedding"):
        cosine_kernel(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="diagonal must be positive"):
        normalize_kernel(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="bandwidth"):
        kernel_matrix(X, "gaussian")
    with pytest.raises(ValueError, match="same batch"):
        alignment_loss(torch.eye(3), torch.eye(4))
