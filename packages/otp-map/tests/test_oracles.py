"""Trained-model oracles on the quick experiment's settings (seed 0).

Gaussian -> Gaussian: the learned map against the closed form (``ot.gaussian``), the
learned coupling's cost against ``ot.emd2`` on the same points; Dirac -> 8 Gaussians:
OTP's samples at the one source point follow the target.
"""

import pytest

from otp_map.experiments import BASELINE, FLOOR_ROW, METHOD, PROFILES, run_task

CFG = PROFILES["quick"]


@pytest.fixture(scope="module")
def gaussian():
    return {r.method: r.metrics for r in run_task("gaussian", CFG, seed=0)}


@pytest.mark.parametrize("model", [METHOD, BASELINE])
def test_gaussian_map_error_below_bound(gaussian, model):
    # stated bound: relative L2 error of the map below 5 % of the target's variance
    assert gaussian[model]["map_error"] < 0.05


@pytest.mark.parametrize("model", [METHOD, BASELINE])
def test_plan_cost_near_discrete_ot_cost(gaussian, model):
    # the learned pairing (x_i, y_i) costs at most 5 % more than ot.emd2 between the same
    # points {x_i} and {y_i}: it is close to the optimal coupling of its own marginals
    assert -1e-9 <= gaussian[model]["cost_gap"] < 0.05  # >= 0 up to rounding


@pytest.mark.parametrize("model", [METHOD, BASELINE])
def test_gaussian_pushforward_matches_target(gaussian, model):
    # W2 to a fresh target sample within 0.1 of the W2 between two target samples
    assert gaussian[model]["w2"] < gaussian[FLOOR_ROW]["w2"] + 0.1


def test_otp_from_a_dirac_samples_the_target():
    rows = {r.method: r.metrics for r in run_task("dirac->8-gaussians", CFG, seed=0)}
    # every sample starts at the same point, so the plan's samples there must follow the
    # target: W2 within 0.25 of two target samples' W2 (8 Gaussians on a radius-2 circle)
    assert rows[METHOD]["w2"] < rows[FLOOR_ROW]["w2"] + 0.25
    # a deterministic map sends a Dirac to a Dirac: SNOT's W2 is at least the radius
    assert rows[BASELINE]["w2"] > 1.5
