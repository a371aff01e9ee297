"""torch inputs: same answers as NumPy, result in the input's type, dtype and device."""

import numpy as np
import pytest

from gsb_sinkhorn import dual_objective, sinkhorn
from icml25_core import select_device

torch = pytest.importorskip("torch")


def problem(n, m, seed):
    rng = np.random.default_rng(seed)
    P0 = rng.uniform(0.05, 0.95, size=(n, m))
    x, y = rng.random((n, 2)), rng.random((m, 2))
    C = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return P0.sum(1), P0.sum(0), C


@pytest.mark.parametrize("divergence", ["kl", "logistic", "contingency"])
def test_torch_matches_numpy(divergence):
    device = select_device()
    a, b, C = problem(12, 9, seed=0)
    P_np, log_np = sinkhorn(a, b, C, 0.3, divergence, log=True)
    ta, tb, tC = (torch.tensor(x, device=device) for x in (a, b, C))
    P_t, log_t = sinkhorn(ta, tb, tC, 0.3, divergence, log=True)
    assert isinstance(P_t, torch.Tensor)
    assert P_t.dtype == torch.float64 and P_t.device.type == torch.device(device).type
    np.testing.assert_allclose(P_t.cpu().numpy(), P_np, rtol=1e-9, atol=1e-12)
    assert log_t["n_iter"] == log_np["n_iter"]
    assert dual_objective(ta, tb, tC, log_t["f"], log_t["g"], divergence, 0.3) == pytest.approx(
        dual_objective(a, b, C, log_np["f"], log_np["g"], divergence, 0.3), rel=1e-10
    )


def test_torch_float32_keeps_dtype():
    a, b, C = problem(10, 10, seed=1)
    ta, tb, tC = (torch.tensor(x, dtype=torch.float32) for x in (a, b, C))
    P = sinkhorn(ta, tb, tC, 0.5, "kl", stopThr=1e-5)
    assert P.dtype == torch.float32
    torch.testing.assert_close(P.sum(0), tb, rtol=1e-4, atol=1e-4)


def test_torch_zero_marginals_and_reference():
    a, b, C = problem(6, 5, seed=2)
    a[1] = 0.0
    b *= a.sum() / b.sum()
    R = np.ones_like(C)
    R[0, 0] = 0.0
    P_np = sinkhorn(a, b, C, 0.5, "logistic", R=R)
    P_t = sinkhorn(*(torch.tensor(x) for x in (a, b, C)), 0.5, "logistic", R=torch.tensor(R))
    np.testing.assert_allclose(P_t.numpy(), P_np, rtol=1e-9, atol=1e-13)
    assert float(P_t[1].abs().sum()) == 0.0 and float(P_t[0, 0]) == 0.0


def test_numpy_marginals_beside_a_torch_cost_follow_the_tensor():
    a, b, C = problem(8, 6, seed=3)
    tC = torch.tensor(C, dtype=torch.float32)
    P = sinkhorn(a, b, tC, 0.5)  # POT itself refuses mixed backends
    assert isinstance(P, torch.Tensor) and P.dtype == torch.float32
    torch.testing.assert_close(
        P, sinkhorn(*(torch.tensor(x, dtype=torch.float32) for x in (a, b, C)), 0.5)
    )


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda C: torch.tensor(C, dtype=torch.bfloat16),
            TypeError,
            "M must be float32 or float64, got bfloat16",
        ),
        (
            lambda C: torch.tensor(C, dtype=torch.complex64),
            TypeError,
            "M must be a real numeric tensor",
        ),
        (lambda C: torch.empty(C.shape, device="meta"), ValueError, "M is a meta tensor"),
    ],
)
def test_tensors_that_cannot_be_solved_are_refused(make, error, match):
    a, b, C = problem(4, 3, seed=4)
    with pytest.raises(error, match=match):
        sinkhorn(torch.tensor(a), torch.tensor(b), make(C), 0.5)
