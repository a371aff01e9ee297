"""Oracle and unit tests of the generalized Sinkhorn solver."""

import math
import warnings

import numpy as np
import ot
import pytest

from gsb_sinkhorn import (
    ConvergenceWarning,
    Divergence,
    dual_lbfgs,
    dual_objective,
    marginal_error,
    primal_objective,
    sinkhorn,
)

DIVS = ["kl", "logistic", "contingency"]


def ot_problem(n, m, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random(n) + 0.1, rng.random(m) + 0.1
    return a / a.sum(), b / b.sum(), ot.dist(rng.random((n, 2)), rng.random((m, 2)))


def feasible_problem(n, m, seed):
    """Marginals of a matrix with entries in (0.05, 0.95): strictly feasible for all divergences."""
    rng = np.random.default_rng(seed)
    P0 = rng.uniform(0.05, 0.95, size=(n, m))
    return P0.sum(1), P0.sum(0), ot.dist(rng.random((n, 2)), rng.random((m, 2)))


@pytest.mark.parametrize(
    ("n", "m", "reg"), [(5, 5, 1.0), (7, 13, 0.1), (40, 25, 0.05), (30, 60, 0.01)]
)
def test_kl_equals_pot_log_domain(n, m, reg):
    a, b, C = ot_problem(n, m, seed=n + m)
    P = sinkhorn(a, b, C, reg, "kl", stopThr=1e-13, numItermax=100000)
    Q = ot.sinkhorn(a, b, C, reg, method="sinkhorn_log", stopThr=1e-14, numItermax=100000)
    np.testing.assert_allclose(P, Q, atol=1e-8, rtol=0)


@pytest.mark.parametrize("divergence", DIVS)
@pytest.mark.parametrize(("n", "m"), [(6, 9), (30, 20)])
def test_marginals_reached(divergence, n, m):
    a, b, C = feasible_problem(n, m, seed=1)
    P, log = sinkhorn(a, b, C, 0.2, divergence, stopThr=1e-11, log=True)
    assert log["converged"]
    np.testing.assert_allclose(P.sum(1), a, rtol=1e-9)
    np.testing.assert_allclose(P.sum(0), b, rtol=1e-9)
    assert marginal_error(P, a, b) <= 2e-11 * a.sum()


@pytest.mark.parametrize("divergence", DIVS)
def test_dual_matches_generic_solver_and_strong_duality(divergence):
    a, b, C = feasible_problem(6, 5, seed=3)
    reg = 0.5
    P, log = sinkhorn(a, b, C, reg, divergence, stopThr=1e-12, log=True)
    _, llog = dual_lbfgs(a, b, C, divergence, reg=reg, tol=1e-12, log=True)
    ours = dual_objective(a, b, C, log["f"], log["g"], divergence, reg)
    generic = dual_objective(a, b, C, llog["f"], llog["g"], divergence, reg)
    scale = abs(ours) + 1.0
    # Sinkhorn's point is at least as good as scipy's and equal to it up to solver noise
    assert ours >= generic - 1e-9 * scale
    assert ours == pytest.approx(generic, abs=1e-6 * scale)
    # strong duality: primal value of the plan equals the dual value of the potentials
    assert primal_objective(P, C, divergence, reg) == pytest.approx(ours, abs=1e-8 * scale)


def test_logistic_plan_entries_and_dual_gradient():
    a, b, C = feasible_problem(12, 8, seed=4)
    P, log = sinkhorn(a, b, C, 0.3, "logistic", log=True)
    assert np.all((P > 0) & (P < 1))
    # the plan is psi of the potentials
    t = (log["f"][:, None] + log["g"][None, :] - C) / 0.3
    np.testing.assert_allclose(P, 1 / (1 + np.exp(-t)), rtol=1e-12)


@pytest.mark.parametrize("divergence", DIVS)
def test_residual_ratios_below_one(divergence):
    a, b, C = feasible_problem(40, 40, seed=5)
    _, log = sinkhorn(a, b, C, 0.1, divergence, stopThr=1e-10, log=True)
    r = log["residuals"]
    assert r.size >= 3
    assert np.max(r[1:] / r[:-1]) < 1.0


def test_user_defined_exp_matches_kl_closed_form():
    """The Newton path with psi = exp must reproduce the closed-form KL update."""
    a, b, C = feasible_problem(15, 10, seed=6)
    custom = Divergence("exp-newton", psi=np.exp, dpsi=np.exp, conjugate=np.exp)
    P1 = sinkhorn(a, b, C, 0.2, custom, stopThr=1e-12)
    P2 = sinkhorn(a, b, C, 0.2, "kl", stopThr=1e-12)
    np.testing.assert_allclose(P1, P2, rtol=1e-9)


def test_user_defined_bounded_domain():
    """psi(t) = -1/t on t < 0 (phi = -log x): Newton must stay inside the domain."""
    a, b, C = feasible_problem(8, 8, seed=7)
    burg = Divergence(
        "burg", psi=lambda t: -1 / t, dpsi=lambda t: 1 / t**2, domain=(-math.inf, 0.0)
    )
    P, log = sinkhorn(a, b, C, 0.5, burg, stopThr=1e-11, log=True)
    assert log["converged"]
    np.testing.assert_allclose(P.sum(1), a, rtol=1e-10)
    t = (log["f"][:, None] + log["g"][None, :] - C) / 0.5
    assert np.all(t < 0)


def test_reference_measure_zeros_are_kept():
    a, b, C = feasible_problem(6, 6, seed=8)
    R = np.ones((6, 6))
    R[0, 0] = R[3, 2] = 0.0
    for div in DIVS:
        P = sinkhorn(a, b, C, 0.5, div, R=R, stopThr=1e-11)
        assert P[0, 0] == 0.0
        assert P[3, 2] == 0.0
        np.testing.assert_allclose(P.sum(0), b, rtol=1e-9)


def test_reference_measure_kl_is_kernel_weighting():
    """With KL, R multiplies the Gibbs kernel: same as POT on cost C - reg*log R."""
    a, b, C = ot_problem(7, 9, seed=9)
    R = np.random.default_rng(9).uniform(0.5, 2.0, (7, 9))
    P = sinkhorn(a, b, C, 0.3, "kl", R=R, stopThr=1e-13)
    Q = ot.sinkhorn(
        a, b, C - 0.3 * np.log(R), 0.3, method="sinkhorn_log", stopThr=1e-14, numItermax=10000
    )
    np.testing.assert_allclose(P, Q, atol=1e-9)


@pytest.mark.parametrize("divergence", DIVS)
def test_zero_marginals_give_zero_rows_and_columns(divergence):
    a, b, C = feasible_problem(7, 6, seed=10)
    a[2] = 0.0
    b[4] = 0.0
    b *= a.sum() / b.sum()
    P, log = sinkhorn(a, b, C, 0.5, divergence, stopThr=1e-11, log=True)
    assert np.all(P[2] == 0) and np.all(P[:, 4] == 0)
    assert log["f"][2] == -math.inf and log["g"][4] == -math.inf
    np.testing.assert_allclose(P.sum(1), a, rtol=1e-9, atol=1e-12)


def test_non_convergence_warns_and_says_so():
    a, b, C = feasible_problem(20, 20, seed=11)
    with pytest.warns(ConvergenceWarning, match="did not reach stopThr"):
        _, log = sinkhorn(a, b, C, 0.05, "contingency", numItermax=3, log=True)
    assert log["converged"] is False
    assert log["n_iter"] == 3


def test_scale_invariance_of_cost_and_reg():
    """Scaling C and reg together leaves the plan unchanged."""
    a, b, C = feasible_problem(9, 7, seed=12)
    for div in DIVS:
        P1 = sinkhorn(a, b, C, 0.4, div, stopThr=1e-12)
        P2 = sinkhorn(a, b, 3.0 * C, 1.2, div, stopThr=1e-12)
        np.testing.assert_allclose(P1, P2, rtol=1e-8)


def test_lists_are_accepted():
    P = sinkhorn([0.5, 0.5], [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], 1.0)
    assert isinstance(P, np.ndarray)
    np.testing.assert_allclose(P.sum(0), [0.5, 0.5])


def test_integer_inputs_are_computed_in_float64():
    P = sinkhorn(
        np.array([2, 1]), np.array([1, 1, 1]), np.zeros((2, 3), dtype=int), 1.0, "logistic"
    )
    assert P.dtype == np.float64
    np.testing.assert_allclose(P.sum(1), [2, 1], rtol=1e-9)


@pytest.mark.parametrize(
    ("divergence", "reg"), [("kl", 0.01), ("logistic", 0.01), ("contingency", 0.1)]
)
def test_row_and_column_cost_offsets_leave_the_plan_unchanged(divergence, reg):
    """C_ij + d_i + e_j has the same plan (absorbed in f, g), even where exp(-C/reg) is 0.

    Row offsets up to 50 / reg = 5000 (at reg 0.01) underflow every kernel entry of the shifted rows,
    which the KL path must survive (log-domain first step, absorption, exact fallbacks) and
    where the Newton path meets saturated psi (trust region);
    float64 then resolves the plan to about 5000 * eps relative.
    """
    a, b, C = (
        ot_problem(30, 20, seed=13) if divergence == "kl" else feasible_problem(30, 20, seed=13)
    )
    rng = np.random.default_rng(13)
    d, e = rng.uniform(0, 50, 30) * (rng.random(30) < 0.5), rng.uniform(-5, 5, 20)
    P, log = sinkhorn(a, b, C, reg, divergence, stopThr=1e-10, numItermax=20000, log=True)
    shifted = C + d[:, None] + e[None, :]
    P_shift, log_shift = sinkhorn(
        a, b, shifted, reg, divergence, stopThr=1e-10, numItermax=20000, log=True
    )
    assert log["converged"] and log_shift["converged"]
    np.testing.assert_allclose(P_shift, P, atol=1e-8 * a.sum(), rtol=0)
    if divergence == "kl":
        Q = ot.sinkhorn(a, b, C, 0.01, method="sinkhorn_log", stopThr=1e-12, numItermax=100000)
        np.testing.assert_allclose(P_shift, Q, atol=1e-8, rtol=0)


@pytest.mark.parametrize("divergence", DIVS)
def test_warmstart_from_the_solution_converges_at_once(divergence):
    a, b, C = feasible_problem(12, 9, seed=14)
    P, log = sinkhorn(a, b, C, 0.2, divergence, stopThr=1e-11, log=True)
    P2, log2 = sinkhorn(
        a, b, C, 0.2, divergence, stopThr=1e-10, log=True, warmstart=(log["log_u"], log["log_v"])
    )
    assert log2["n_iter"] == 1
    np.testing.assert_allclose(P2, P, rtol=1e-9)


def test_warmstart_is_checked():
    a, b, C = feasible_problem(4, 3, seed=15)
    with pytest.raises(ValueError, match="warmstart must be a pair"):
        sinkhorn(a, b, C, warmstart=np.zeros(4))
    with pytest.raises(ValueError, match=r"warmstart\[1\] must have shape \(3,\)"):
        sinkhorn(a, b, C, warmstart=(np.zeros(4), np.zeros(4)))
    with pytest.raises(ValueError, match=r"warmstart\[0\] on the support of a must be finite"):
        sinkhorn(a, b, C, warmstart=(np.full(4, np.nan), np.zeros(3)))


def test_called_exactly_as_pots_docs_call_ot_sinkhorn():
    """POT's docstring example of ``ot.sinkhorn`` runs unchanged and gives POT's numbers."""
    a = [0.5, 0.5]
    b = [0.5, 0.5]
    M = [[0.0, 1.0], [1.0, 0.0]]
    np.testing.assert_allclose(
        sinkhorn(a, b, M, 1), [[0.36552929, 0.13447071], [0.13447071, 0.36552929]], atol=1e-8
    )
    np.testing.assert_allclose(sinkhorn(a, b, M, 1), ot.sinkhorn(a, b, M, 1), atol=1e-8)


def test_pots_keywords_mean_the_same_here():
    a, b, C = feasible_problem(15, 11, seed=21)
    a, b = a / a.sum(), b / b.sum()
    kwargs = {"numItermax": 5000, "stopThr": 1e-12, "log": True, "warn": False}
    P, log = sinkhorn(a, b, C, 0.3, **kwargs)
    Q, qlog = ot.sinkhorn(a, b, C, 0.3, method="sinkhorn_log", **kwargs)
    np.testing.assert_allclose(P, Q, atol=1e-10)
    np.testing.assert_allclose(
        log["log_u"] - log["log_u"][0], qlog["log_u"] - qlog["log_u"][0], atol=1e-6
    )
    with pytest.warns(ConvergenceWarning):
        sinkhorn(a, b, C, 0.01, numItermax=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sinkhorn(a, b, C, 0.01, numItermax=2, warn=False)
