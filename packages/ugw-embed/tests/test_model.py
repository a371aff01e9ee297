"""The estimator: isometric inputs, marginals, spaces, inputs and errors."""

import numpy as np
import pytest
from sklearn.base import clone

from ugw_embed import JointEmbedding, check_metric, foscttm, make_space
from ugw_embed.experiments import make_views


def sheet(n, seed):
    rng = np.random.default_rng(seed)
    t, h = rng.uniform(0, 1.5 * np.pi, n), rng.uniform(0, 2, n)
    return np.stack([t * np.cos(t) / 5, h, t * np.sin(t) / 5], 1)


@pytest.fixture(scope="module")
def isometric_fit():
    X = sheet(60, 0)
    R = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0]
    model = JointEmbedding(grid=12, lam=[1.0, 10.0, 100.0], eps=5e-3, n_iter=12, seed=0)
    return model.fit(X, 3.0 * X @ R.T), X


def test_isometric_inputs_are_aligned(isometric_fit):
    model, _ = isometric_fit
    # same shape up to rotation and scale: stated margin FOSCTTM <= 0.05 (0 is perfect)
    assert foscttm(model.embedding1_, model.embedding2_) <= 0.05


def test_fixed_marginals_and_shapes(isometric_fit):
    model, X = isometric_fit
    n, k = X.shape[0], 144
    assert model.plan1_.shape == (n, k) and model.plan2_.shape == (n, k)
    np.testing.assert_allclose(model.plan1_.sum(1), np.full(n, 1 / n), atol=1e-5 / n)
    np.testing.assert_allclose(model.plan2_.sum(1), np.full(n, 1 / n), atol=1e-5 / n)
    np.testing.assert_allclose(model.zeta1_, model.plan1_.sum(0))
    assert model.embedding1_.shape == (n, 2)
    assert np.all((model.embedding1_ >= 0) & (model.embedding1_ <= 1))
    assert model.n_iter_ >= 1 and np.isfinite(model.distance_)


def test_distance_matrices_give_the_same_fit_as_points():
    X = sheet(30, 2)
    D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    kw = {"grid": 8, "lam": 10.0, "eps": 1e-2, "n_iter": 5, "seed": 0}
    a = JointEmbedding(**kw).fit(X, X)
    b = JointEmbedding(**kw).fit(D1=D, D2=D)
    np.testing.assert_allclose(a.plan1_, b.plan1_, atol=1e-12)


@pytest.mark.parametrize(("space", "dim"), [("sphere", 3), ("torus", 4), ("circle", 2)])
def test_curved_spaces_embed_onto_the_space(space, dim):
    X = sheet(25, 3)
    model = JointEmbedding(space=space, grid=8, lam=10.0, eps=1e-2, n_iter=4, seed=0).fit(X, X)
    E = model.embedding1_
    assert E.shape == (25, dim)
    if space in ("sphere", "circle"):
        np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, rtol=1e-12)
    else:
        np.testing.assert_allclose(np.linalg.norm(E[:, :2], axis=1), 1.0, rtol=1e-12)


def test_user_grid():
    g = np.linspace(0, 1, 6)
    pts = np.stack([g, g**2], 1)
    D = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    X = sheet(20, 4)
    model = JointEmbedding(space=(pts, D), lam=10.0, eps=1e-2, n_iter=3).fit(X, X)
    assert model.embedding1_.shape == (20, 2)


def test_sklearn_params_and_clone():
    model = JointEmbedding(lam=[1.0, 10.0], grid=9)
    params = model.get_params()
    assert params["lam"] == [1.0, 10.0] and params["grid"] == 9
    assert clone(model).get_params()["grid"] == 9


def test_spaces_are_metric():
    for name in ("plane", "sphere", "torus", "circle"):
        s = make_space(name, 6)
        check_metric(s.distances, name)
    assert make_space("plane", 5).size == 25
    assert make_space("circle", 5).size == 5


def test_views_share_points():
    X1, X2, s1, s2 = make_views(50, 5, seed=0)
    assert X1.shape == (45, 3) and X2.shape == (45, 3) and s1.size == s2.size == 40


@pytest.mark.parametrize(
    ("kwargs", "fit", "error", "match"),
    [
        ({}, {"X1": np.eye(5), "X2": None}, ValueError, "exactly one of X2"),
        (
            {},
            {"X1": np.full((5, 2), np.nan), "X2": np.ones((5, 2))},
            ValueError,
            "X1 must be finite",
        ),
        ({}, {"X1": np.zeros((0, 2)), "X2": np.ones((5, 2))}, ValueError, "X1 must not be empty"),
        (
            {},
            {"X1": np.eye(4), "X2": np.eye(3), "w1": np.ones(3)},
            ValueError,
            r"w1 must have one weight per point \(4\)",
        ),
        (
            {},
            {"X1": np.eye(4), "X2": np.eye(3), "w2": -np.ones(3)},
            ValueError,
            "w2 must be strictly positive",
        ),
        (
            {},
            {"D1": np.array([[0, 1], [2, 0.0]]), "D2": np.eye(2)},
            ValueError,
            "D1 must be symmetric",
        ),
        (
            {},
            {
                "D1": np.array([[0, 1, 5], [1, 0, 1], [5, 1, 0.0]]),
                "D2": np.ones((2, 2)) - np.eye(2),
            },
            ValueError,
            "triangle inequality",
        ),
        (
            {"lam": [10.0, 1.0]},
            {"X1": np.eye(3), "X2": np.eye(3)},
            ValueError,
            "lam schedule must be increasing",
        ),
        (
            {"eps": 0.0},
            {"X1": np.eye(3), "X2": np.eye(3)},
            ValueError,
            "'eps' parameter of JointEmbedding must be",
        ),
        (
            {"space": "cube"},
            {"X1": np.eye(3), "X2": np.eye(3)},
            ValueError,
            "'space' parameter of JointEmbedding",
        ),
        (
            {"grid": 400, "max_memory_gb": 1.0},
            {"X1": np.eye(3), "X2": np.eye(3)},
            MemoryError,
            "needs about .* GiB",
        ),
    ],
)
def test_bad_input(kwargs, fit, error, match):
    with pytest.raises(error, match=match):
        JointEmbedding(**kwargs).fit(**fit)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_divergence_is_reported_not_returned():
    X = sheet(20, 5)
    with pytest.raises(FloatingPointError, match="increase eps or lower lam"):
        JointEmbedding(grid=6, lam=1e300, eps=1e-300, n_iter=2).fit(X, X)


def test_plane_defaults_fit_two_views_of_a_3d_spiral():
    """Issue 31: plane, grid 20, n_iter 20, otherwise defaults, two isometric 60-point views
    of a 3-D spiral (view 2 = 0.5 x rotated view 1 + noise 0.01) raised "the multi-marginal
    Sinkhorn diverged at lam=1000, eps=0.001" (an overflow in the residual after a large
    cost change, not a divergence of the log-domain updates)."""
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(0)
    t = np.linspace(0, 4 * np.pi, 60)
    X = np.c_[np.cos(3 * t), np.sin(3 * t), t]
    Y = 0.5 * X @ Rotation.random(random_state=0).as_matrix().T + 0.01 * rng.normal(size=X.shape)
    model = JointEmbedding(space="plane", grid=20, n_iter=20, seed=0).fit(X, Y)
    assert np.isfinite(model.objective_)
    assert foscttm(model.embedding1_, model.embedding2_) < 0.05  # measured 0.023


def test_parameters_are_keyword_only_and_validated_the_scikit_learn_way():
    with pytest.raises(TypeError):
        JointEmbedding("plane")  # keyword-only, as scikit-learn estimators
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'n_iter' parameter of JointEmbedding"):
        JointEmbedding(n_iter=0).fit(X1=np.eye(3), X2=np.eye(3))
    assert JointEmbedding(grid=7).get_params()["grid"] == 7


def test_perturbed_start_leaves_the_symmetric_saddle():
    """Seed 0 of the quick profile's views ended with one view mirrored from the paper's
    product start (FOSCTTM 0.471 in 0.1.x); the default perturbed start aligns both views
    (it does on 9 of seeds 0-9; seed 9 still mirrors, see the README), and the start is the
    product coupling up to 1e-3 relative noise, with view 1's marginal."""
    X1, X2, s1, s2 = make_views(160, 10, seed=0)
    settings = {"grid": 15, "lam": [1.0, 10.0, 100.0], "eps": 5e-3, "n_iter": 15, "seed": 0}
    model = JointEmbedding(**settings).fit(X1, X2)
    assert model.init == "perturbed"
    assert foscttm(model.embedding1_[s1], model.embedding2_[s2]) < 0.03

    from ugw_embed.model import _perturbed_product

    xi = np.full(5, 0.2)
    P = _perturbed_product(xi, 7, np.random.default_rng(0))
    np.testing.assert_allclose(P.sum(1), xi, rtol=1e-12)
    assert 0 < np.abs(P / np.outer(xi, np.full(7, 1 / 7)) - 1).max() < 1e-2


def test_symmetry_restart_fixes_the_seed_that_ends_mirrored():
    """Seed 9 of the quick views ends with view 2 mirrored even from the perturbed start
    (FOSCTTM 0.518, objective 1.0728); trying the grid's 7 symmetries on view 2's plan finds
    the aligned minimum (measured FOSCTTM 0.007, objective 1.0637)."""
    X1, X2, s1, s2 = make_views(160, 10, seed=9)
    settings = {"grid": 15, "lam": [1.0, 10.0, 100.0], "eps": 5e-3, "n_iter": 15, "seed": 9}
    model = JointEmbedding(symmetry_restarts=True, **settings).fit(X1, X2)
    assert foscttm(model.embedding1_[s1], model.embedding2_[s2]) < 0.03
    assert model.objective_ < 1.07


@pytest.mark.parametrize(
    ("space", "count"), [("plane", 7), ("torus", 7), ("circle", 1), ("sphere", 0)]
)
def test_grid_symmetries_are_isometries_of_the_grid(space, count):
    from ugw_embed import grid_symmetries

    grid = make_space(space, 6)
    perms = grid_symmetries(grid)
    assert len(perms) == count
    for p in perms:
        assert sorted(p.tolist()) == list(range(grid.size))  # a permutation
        assert not np.array_equal(p, np.arange(grid.size))  # not the identity
        np.testing.assert_allclose(grid.distances[np.ix_(p, p)], grid.distances, atol=1e-9)


def test_complex_input_is_refused_not_truncated():
    X = np.random.default_rng(0).random((10, 2))
    with pytest.raises(TypeError, match="X2 must be real, got complex"):
        JointEmbedding(grid=4, seed=0).fit(X, X + 1j)
    with pytest.raises(TypeError, match="E1 must be real"):
        foscttm(X + 1j, X)


def test_gw_baseline_refuses_bad_input_naming_the_argument():
    from ugw_embed import gw_barycentric_alignment

    rng = np.random.default_rng(0)
    X1, X2 = rng.normal(size=(20, 3)), rng.normal(size=(25, 2))
    nan = X1.copy()
    nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="X1 must be finite"):
        gw_barycentric_alignment(nan, X2)
    with pytest.raises(TypeError, match="X2 must be real"):
        gw_barycentric_alignment(X1, X2 + 1j)
    with pytest.raises(ValueError, match="X2 must hold at least two distinct points"):
        gw_barycentric_alignment(X1, np.ones((5, 2)))
    with pytest.raises(ValueError, match="X1 must be 2-dimensional"):
        gw_barycentric_alignment(X1[:, 0], X2)
    with pytest.raises(TypeError, match="max_iter must be an integer"):
        gw_barycentric_alignment(X1, X2, max_iter=2.5)
    E1, _, G = gw_barycentric_alignment(X1, X2, epsilon=5e-2)
    assert np.isfinite(E1).all() and E1.shape == (20, 2)
    np.testing.assert_allclose(G.sum(), 1.0, rtol=1e-6)


def test_max_len_scales_the_target_space():
    """max_len=1 is the default; the official notebooks' 1.3 changes the solution and still
    aligns isometric views; nonsense is refused naming the argument."""
    X = sheet(60, 0)
    R = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0]
    kw = {"grid": 12, "lam": [1.0, 10.0, 100.0], "eps": 5e-3, "n_iter": 12, "seed": 0}
    base = JointEmbedding(**kw).fit(X, 3.0 * X @ R.T)
    same = JointEmbedding(max_len=1.0, **kw).fit(X, 3.0 * X @ R.T)
    np.testing.assert_array_equal(same.plan1_, base.plan1_)
    wide = JointEmbedding(max_len=1.3, **kw).fit(X, 3.0 * X @ R.T)
    assert np.abs(wide.plan1_ - base.plan1_).max() > 1e-4
    assert foscttm(wide.embedding1_, wide.embedding2_) <= 0.05
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_len"):
            JointEmbedding(max_len=bad, **kw).fit(X, X)
