"""Oracles from the method note: POT's GW cost, Sinkhorn on one edge, the composed kernel."""

import numpy as np
import ot
import pytest

from ugw_embed import chain_sinkhorn, gw_cost


def _metric(n, seed):
    x = np.random.default_rng(seed).random((n, 2))
    return ot.dist(x, x, metric="euclidean")


def test_gw_cost_equals_pot_tensor_product():
    rng = np.random.default_rng(0)
    MY, MZ = _metric(7, 1), _metric(5, 2)
    P = rng.random((7, 5))
    P /= P.sum()
    ups, z = P.sum(1), P.sum(0)
    ref = ot.gromov.tensor_product(*ot.gromov.init_matrix(MY, MZ, ups, z, "square_loss"), P)
    np.testing.assert_allclose(gw_cost(MY, MZ, ups, z, P), ref, atol=1e-12)


def test_gw_cost_inner_product_is_the_gw_energy():
    rng = np.random.default_rng(1)
    MY, MZ = _metric(6, 3), _metric(4, 4)
    P = rng.random((6, 4))
    P /= P.sum()
    direct = sum(
        (MY[i, j] - MZ[k, m]) ** 2 * P[i, k] * P[j, m]
        for i in range(6)
        for j in range(6)
        for k in range(4)
        for m in range(4)
    )
    assert float((gw_cost(MY, MZ, P.sum(1), P.sum(0), P) * P).sum()) == pytest.approx(
        direct, rel=1e-12
    )


@pytest.mark.parametrize(("n", "m", "eps"), [(7, 5, 0.05), (12, 12, 0.01)])
def test_two_node_chain_is_sinkhorn(n, m, eps):
    rng = np.random.default_rng(n)
    a, b = rng.random(n) + 0.1, rng.random(m) + 0.1
    a, b = a / a.sum(), b / b.sum()
    C = rng.random((n, m))
    res = chain_sinkhorn([a, b], [C], eps, tol=1e-12, max_iter=100000)
    Q = ot.sinkhorn(a, b, C, eps, method="sinkhorn_log", stopThr=1e-14, numItermax=100000)
    assert res.converged
    np.testing.assert_allclose(res.edge_plans[0], Q, atol=1e-10)


def test_free_middle_nodes_compose_the_kernels():
    rng = np.random.default_rng(3)
    a, b = np.full(6, 1 / 6), np.full(5, 1 / 5)
    C1, C2, C3 = rng.random((6, 4)), rng.random((4, 7)), rng.random((7, 5))
    eps = 0.1
    res = chain_sinkhorn([a, None, None, b], [C1, C2, C3], eps, tol=1e-12)
    Kc = np.exp(-C1 / eps) @ np.exp(-C2 / eps) @ np.exp(-C3 / eps)
    joint = np.exp(res.potentials[0])[:, None] * Kc * np.exp(res.potentials[3])[None, :]
    Q = ot.sinkhorn(a, b, -eps * np.log(Kc), eps, method="sinkhorn_log", stopThr=1e-14)
    np.testing.assert_allclose(joint, Q, atol=1e-10)
    # node and edge marginals are consistent
    np.testing.assert_allclose(res.node_marginals[1], res.edge_plans[0].sum(0), rtol=1e-10)
    np.testing.assert_allclose(res.node_marginals[1], res.edge_plans[1].sum(1), rtol=1e-10)
    np.testing.assert_allclose(res.edge_plans[2].sum(0), b, atol=1e-12)


def test_chain_is_stable_at_small_eps():
    """eps = 1e-4 on costs in [0, 1]: exp(-C/eps) underflows, the log domain does not."""
    rng = np.random.default_rng(4)
    a = np.full(10, 0.1)
    C = [rng.random((10, 15)), rng.random((15, 15)), rng.random((15, 10))]
    res = chain_sinkhorn([a, None, None, a], C, 1e-4, tol=1e-12, max_iter=300)
    assert all(np.all(np.isfinite(p)) for p in res.edge_plans)
    assert res.residuals[-1] < res.residuals[0]
    # the last fixed node is exact after every sweep
    np.testing.assert_allclose(res.node_marginals[3], a, rtol=1e-10)


def test_a_far_warm_start_is_not_read_as_divergence():
    """Stale potentials 2000 above the solution put the first measured marginal at e^2000:
    the residual used to overflow to inf and the estimator raised "diverged" (issue 31);
    it is now a large finite residual and the sweeps converge."""
    rng = np.random.default_rng(4)
    a = np.full(10, 0.1)
    C = [rng.random((10, 15)), rng.random((15, 15)), rng.random((15, 10))]
    warm = [np.full(10, 2000.0), np.zeros(15), np.zeros(15), np.full(10, -3000.0)]
    res = chain_sinkhorn([a, None, None, a], C, 1e-2, tol=1e-9, max_iter=20000, warmstart=warm)
    assert np.isfinite(res.residuals[0]) and res.residuals[0] > 1.0
    cold = chain_sinkhorn([a, None, None, a], C, 1e-2, tol=1e-9, max_iter=20000)
    assert res.converged
    np.testing.assert_allclose(res.edge_plans[1], cold.edge_plans[1], atol=1e-8)


def test_chain_converges_and_reports_it():
    rng = np.random.default_rng(5)
    a = np.full(10, 0.1)
    C = [rng.random((10, 15)), rng.random((15, 15)), rng.random((15, 10))]
    res = chain_sinkhorn([a, None, None, a], C, 1e-2, tol=1e-9, max_iter=20000)
    assert res.converged and res.residuals[-1] <= 1e-9
    np.testing.assert_allclose(res.node_marginals[0], a, atol=1e-9)
    short = chain_sinkhorn([a, None, None, a], C, 1e-2, tol=1e-9, max_iter=2)
    assert not short.converged and short.n_iter == 2


def test_chain_input_errors():
    a = np.full(3, 1 / 3)
    with pytest.raises(ValueError, match="one entry per edge"):
        chain_sinkhorn([a, a], [np.ones((3, 3))] * 2, 0.1)
    with pytest.raises(ValueError, match="equal mass"):
        chain_sinkhorn([a, 2 * a], [np.ones((3, 3))], 0.1)
    with pytest.raises(ValueError, match="at least one node"):
        chain_sinkhorn([None, None], [np.ones((3, 3))], 0.1)
