"""The optimiser's behaviour: pool mode, convergence on a convex function, NaN rule,
maximisation, baselines, problems, bad input."""

import numpy as np
import pytest

from drebo_ssl import (
    BORE,
    DREBOSSL,
    TPE,
    GPLogEI,
    RandomSearch,
    class1_probability,
    get_problem,
    minimize,
    run_loop,
)

FAST = {"n_candidates": 300, "n_starts": 10}


def test_pool_mode_never_repeats():
    rng = np.random.default_rng(0)
    pool = rng.uniform(-2, 2, (40, 2))
    res = minimize(
        lambda x: float((x**2).sum()), [[-2, -2], [2, 2]], n_init=5, n_iter=30, pool=pool, seed=0
    )
    assert len(np.unique(res.X, axis=0)) == 35
    assert all(np.any(np.all(pool == x, axis=1)) for x in res.X)
    with pytest.raises(ValueError, match="pool has"):
        minimize(lambda x: 0.0, [[-2, -2], [2, 2]], n_init=5, n_iter=40, pool=pool)


def test_suggestions_approach_the_minimiser_of_a_convex_function():
    f = lambda x: float((x[0] - 0.7) ** 2)  # noqa: E731
    res = minimize(f, [[-3.0], [3.0]], n_init=5, n_iter=15, seed=0, **FAST)
    init_dist = np.abs(res.X[:5, 0] - 0.7).mean()
    late_dist = np.abs(res.X[-5:, 0] - 0.7).mean()
    # the last five suggestions sit at least 5x closer to 0.7 than the random start points
    assert late_dist < init_dist / 5
    assert abs(res.x_best[0] - 0.7) < 0.05


def test_nan_values_are_recorded_and_avoided():
    def f(x):
        return np.nan if x[0] > 1.0 else float((x[0] - 0.5) ** 2)

    res = minimize(f, [[-3.0], [3.0]], n_init=8, n_iter=12, seed=1, **FAST)
    # every failure is kept as NaN, exactly where f failed
    np.testing.assert_array_equal(np.isnan(res.y), res.X[:, 0] > 1.0)
    assert np.isfinite(res.best_value) and res.x_best[0] <= 1.0
    assert res.best_value == np.nanmin(res.y)
    # failures are labelled bad, so suggestions avoid the failing third of the box: at most
    # 2 of 12 land there (uniform sampling would put 4 there on average)
    assert np.isnan(res.y[8:]).sum() <= 2


def test_maximize_is_minimize_of_the_negative():
    f = lambda x: float(np.sin(3 * x[0]) + x[0] ** 2)  # noqa: E731
    a = minimize(f, [[-2.0], [2.0]], n_iter=6, seed=4, **FAST)
    b = minimize(lambda x: -f(x), [[-2.0], [2.0]], n_iter=6, seed=4, maximize=True, **FAST)
    np.testing.assert_allclose(a.X, b.X)
    assert b.best_value == pytest.approx(-a.best_value)
    np.testing.assert_allclose(b.best_so_far, -a.best_so_far)


@pytest.mark.parametrize(
    ("make", "kwargs"),
    [
        (BORE, {"classifier": "mlp", "n_candidates": 100, "n_starts": 3}),
        (BORE, {"classifier": "rf", "n_candidates": 100, "n_starts": 3}),
        (GPLogEI, {"num_restarts": 2, "raw_samples": 16}),
        (RandomSearch, {}),
        (DREBOSSL, {"ssl": "label_spreading", "unlabeled": "uniform", **FAST}),
        (DREBOSSL, {"acquisition": "extrapolate", "bandwidth_start": "grid", **FAST}),
        (TPE, {}),
    ],
)
@pytest.mark.parametrize("pool", [False, True])
def test_every_optimiser_runs_in_both_scenarios(make, kwargs, pool):
    problem = get_problem("branin")
    if make is TPE and pool:
        with pytest.raises(ValueError, match="pool must be None"):
            TPE(problem.bounds, pool=problem.bounds)
        return
    P = None
    if pool:
        rng = np.random.default_rng(0)
        P = problem.bounds[0] + rng.random((30, 2)) * (problem.bounds[1] - problem.bounds[0])
    res = run_loop(make(problem.bounds, pool=P, seed=0, **kwargs), problem, 4, 3)
    assert res.X.shape == (7, 2)
    assert np.all(problem.bounds[0] <= res.X) and np.all(problem.bounds[1] >= res.X)
    assert res.best_value == pytest.approx(np.nanmin(res.y))
    if pool:
        assert len(np.unique(res.X, axis=0)) == 7
    assert len(res.asks) == 3 and all(a["n"] == 1 for a in res.asks)
    assert {a["branch"] for a in res.asks} <= {"random", "sure", "optimizer", "argmax"}


def test_asks_record_the_branch_the_sure_count_and_the_bandwidth():
    problem = get_problem("branin")
    res = minimize(problem, problem.bounds, n_init=5, n_iter=6, seed=0, **FAST)
    assert len(res.asks) == 6
    for a in res.asks:
        assert a["branch"] in ("sure", "optimizer")
        assert 0 <= a["n_sure"] <= FAST["n_candidates"]
        # the bandwidth lies in the official box carried into the unit cube: 225 * 10^+-5
        assert 225e-5 <= a["gamma"] <= 225e5
        assert (a["branch"] == "sure") == (a["n_sure"] >= 1)
    # certain=None never picks at random among sure candidates
    res = minimize(problem, problem.bounds, n_init=5, n_iter=3, seed=0, certain=None, **FAST)
    assert {a["branch"] for a in res.asks} == {"optimizer"}
    # BORE maximises by default; the 0.99 rule is an option; the forest takes the best candidate
    mlp = run_loop(BORE(problem.bounds, seed=0, n_candidates=100, n_starts=3), problem, 5, 2)
    assert {a["branch"] for a in mlp.asks} == {"optimizer"}
    rf = run_loop(BORE(problem.bounds, classifier="rf", seed=0, n_candidates=100), problem, 5, 2)
    assert {a["branch"] for a in rf.asks} == {"argmax"}
    rule = BORE(problem.bounds, classifier="rf", certain=0.99, seed=0, n_candidates=100)
    assert {a["branch"] for a in run_loop(rule, problem, 5, 2).asks} <= {"argmax", "sure"}


@pytest.mark.parametrize("acquisition", ["official", "extrapolate"])
def test_probability_after_tell(acquisition):
    problem = get_problem("branin")
    opt = DREBOSSL(problem.bounds, seed=0, acquisition=acquisition, **FAST)
    X = problem.bounds[0] + np.random.default_rng(0).random((8, 2)) * 15.0
    with pytest.raises(ValueError, match="both classes"):
        opt.probability(X[:2])
    opt.tell(X, [problem(x) for x in X])
    p = opt.probability(X)
    assert p.shape == (8,) and np.all((p >= 0) & (p <= 1))
    # the good points (the best third) are more probable than the bad ones
    good = np.asarray([problem(x) for x in X]) <= np.quantile(opt.y_, 0.33, method="nearest")
    assert p[good].mean() > p[~good].mean()
    np.testing.assert_allclose(
        p, class1_probability(opt.model_, opt.to_unit(X), acquisition=acquisition)
    )
    with pytest.raises(ValueError, match="2 columns"):
        opt.probability(np.zeros((1, 3)))


def test_suggestions_are_invariant_to_the_units_with_the_grid_start():
    """Bounds, unlabelled spread and objective scaled by 10 give the same unit-cube
    suggestions: the model works in the unit cube and the grid start is unit-free."""
    problem = get_problem("branin")
    f = problem.fn
    kwargs = {"bandwidth_start": "grid", "n_candidates": 300, "n_starts": 5}
    a = minimize(f, problem.bounds, n_init=5, n_iter=4, seed=2, **kwargs)
    b = minimize(
        lambda x: f(x / 10.0),
        10.0 * problem.bounds,
        n_init=5,
        n_iter=4,
        seed=2,
        unlabeled_std=10.0,
        **kwargs,
    )
    np.testing.assert_allclose(b.X / 10.0, a.X, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose([r["gamma"] for r in b.asks], [r["gamma"] for r in a.asks])


def test_gp_batch_suggestions_are_distinct():
    problem = get_problem("branin")
    opt = GPLogEI(problem.bounds, seed=0, num_restarts=2, raw_samples=32)
    X = problem.bounds[0] + np.random.default_rng(0).random((6, 2)) * 15.0
    opt.tell(X, [problem(x) for x in X])
    batch = opt.ask(3)
    assert batch.shape == (3, 2)
    assert len(np.unique(np.round(batch, 6), axis=0)) == 3


def test_problems_have_their_known_minima():
    assert get_problem("branin")(np.array([np.pi, 2.275])) == pytest.approx(0.397887, abs=1e-5)
    assert get_problem("six-hump-camel")(np.array([0.0898, -0.7126])) == pytest.approx(
        -1.0316, abs=1e-4
    )
    assert get_problem("beale")(np.array([3.0, 0.5])) == pytest.approx(0.0, abs=1e-12)
    assert get_problem("bukin6")(np.array([-10.0, 1.0])) == pytest.approx(0.0, abs=1e-12)
    assert get_problem("hartmann6").bounds.shape == (2, 6)
    with pytest.raises(ValueError, match="name"):
        get_problem("rosenbrock")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: DREBOSSL([[1.0, 0.0], [0.0, 1.0]]), "lower < upper"),
        (lambda: DREBOSSL([0.0, 1.0]), "2-dimensional"),
        (lambda: DREBOSSL([[0.0], [1.0], [2.0]]), r"\(2, d\)"),
        (lambda: DREBOSSL([[0.0], [1.0]], pool=np.zeros((5, 2))), "pool must have 1 columns"),
        (lambda: DREBOSSL([[0.0], [1.0]], pool=np.full((5, 1), 3.0)), "outside the bounds"),
        (lambda: DREBOSSL([[0.0], [1.0]], ssl="svm"), "ssl"),
        (lambda: DREBOSSL([[0.0], [1.0]], zeta=0.0), "zeta"),
        (lambda: DREBOSSL([[0.0], [1.0]]).tell(np.zeros((2, 2)), [1.0, 2.0]), "1 columns"),
        (lambda: DREBOSSL([[0.0], [1.0]]).tell(np.zeros((2, 1)), [1.0]), "rows"),
        (lambda: DREBOSSL([[0.0], [1.0]]).tell(np.zeros((1, 1)), [np.inf]), "inf"),
        (lambda: DREBOSSL([[0.0], [1.0]]).tell(np.zeros((1, 1)), "1.5"), "y must be numeric"),
        (lambda: DREBOSSL([[0.0], [1.0]]).tell([["a"]], [1.0]), "X must be numeric"),
        (lambda: DREBOSSL([[0.0], [1.0]]).ask(0), "n must"),
        (lambda: minimize(lambda x: np.inf, [[0.0], [1.0]], n_iter=1), "NaN for a failure"),
        (lambda: minimize(lambda x: "a", [[0.0], [1.0]], n_iter=1), "one real number"),
        (lambda: minimize(lambda x: 0.0, [[0.0], [1.0]], n_init=0), "n_init"),
        (lambda: DREBOSSL([[0.0], [1.0]]).result(), "no finite"),
    ],
)
def test_bad_input(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("cls", [DREBOSSL, BORE])
def test_candidates_that_cannot_fit_in_memory_are_refused_before_allocating(cls, monkeypatch):
    import icml25_core.validation

    monkeypatch.setattr(icml25_core.validation, "available_memory", lambda device="cpu": 2**30)
    wide = np.stack([np.zeros(10**6), np.ones(10**6)])  # 1000 candidates x 1e6 dims: 24 GB
    with pytest.raises(ValueError, match=r"n_candidates: this request needs at least 22\.4 GiB"):
        cls(wide)
    cls(wide, n_candidates=10)  # 240 MB fits
    cls([[0.0, 0.0], [1.0, 1.0]])  # the defaults on a small problem
