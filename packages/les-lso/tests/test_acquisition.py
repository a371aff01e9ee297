"""LES in BoTorch: the penalty's shapes and values inside PenalizedAcquisitionFunction,
and the nonlinear constraint honoured by optimize_acqf."""

import pytest
import torch
from botorch.acquisition.logei import qLogExpectedImprovement
from botorch.acquisition.penalized import PenalizedAcquisitionFunction
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf

from les_lso import LESPenalty, les, les_constraint


@pytest.fixture
def gp():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(12, 3, generator=g, dtype=torch.float64)
    return SingleTaskGP(x, x.sum(-1, keepdim=True).sin())


def test_penalty_shapes_and_values(tiny_vae):
    vae = tiny_vae("gru")
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    with torch.no_grad():
        scores = les(vae.decoder, x.reshape(-1, 3)).reshape(4, 2)
    torch.testing.assert_close(LESPenalty(vae.decoder)(x), -scores.sum(-1))
    hinge = LESPenalty(vae.decoder, threshold=float(scores.median()))
    torch.testing.assert_close(hinge(x), torch.relu(scores.median() - scores).sum(-1))
    assert (LESPenalty(vae.decoder, threshold=-1e9)(x) == 0).all()
    shifted = LESPenalty(vae.decoder, transform=lambda u: u + 1.0)
    torch.testing.assert_close(shifted(x), LESPenalty(vae.decoder)(x + 1.0))
    with pytest.raises(ValueError, match=r"X must have shape"):
        LESPenalty(vae.decoder)(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(
        ValueError, match=r"X must have shape \(batch, q, d\) or \(q, d\), got \(2, 4, 2, 3\)"
    ):
        LESPenalty(vae.decoder)(torch.zeros(2, 4, 2, 3, dtype=torch.float64))


def test_penalized_acquisition_subtracts_the_penalty(tiny_vae, gp):
    vae = tiny_vae("gru")
    raw = qLogExpectedImprovement(gp, best_f=0.5)
    penalty = LESPenalty(vae.decoder, threshold=0.0)
    acqf = PenalizedAcquisitionFunction(raw, penalty, regularization_parameter=2.0)
    x = torch.rand(5, 2, 3, dtype=torch.float64)
    torch.manual_seed(0)
    want = raw(x) - 2.0 * penalty(x)
    torch.manual_seed(0)
    torch.testing.assert_close(acqf(x), want)
    bounds = torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64)
    cand, _ = optimize_acqf(
        acqf, bounds=bounds, q=2, num_restarts=2, raw_samples=8, options={"maxiter": 5}
    )
    assert cand.shape == (2, 3) and ((cand >= 0) & (cand <= 1)).all()


def test_constraint_is_honoured_by_optimize_acqf(tiny_vae, gp):
    vae = tiny_vae("gru")
    bounds = torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64)
    grid = torch.rand(64, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        scores = les(vae.decoder, grid)
    threshold = float(scores.quantile(0.5))
    constraint, intra = les_constraint(vae.decoder, threshold)
    assert intra is True
    with torch.no_grad():
        torch.testing.assert_close(constraint(grid[0]), scores[0] - threshold)
    feasible = grid[scores >= threshold][:2].reshape(2, 1, 3)
    cand, _ = optimize_acqf(
        qLogExpectedImprovement(gp, best_f=0.5),
        bounds=bounds,
        q=1,
        num_restarts=2,
        nonlinear_inequality_constraints=[(constraint, intra)],
        batch_initial_conditions=feasible,
        options={"maxiter": 20},
    )
    with torch.no_grad():
        assert float(les(vae.decoder, cand)) >= threshold - 1e-4
