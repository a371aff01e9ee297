"""Labels, the semi-supervised model, the bandwidth rule, the acquisition's closed form."""

import json

import numpy as np
import pytest

from drebo_ssl import DREBOSSL, class1_probability, mean_entropy, quantile_labels, select_bandwidth
from drebo_ssl.ssl import class1_probability_grad, fit_ssl, unit_bandwidth_scale


def test_labels_follow_the_quantile_rule():
    rng = np.random.default_rng(0)
    y = rng.permutation(np.arange(30.0))
    labels, thr = quantile_labels(y, 0.33)
    assert thr == np.quantile(y, 0.33, method="nearest") == 10.0
    np.testing.assert_array_equal(labels, (y <= 10.0).astype(int))
    assert labels.sum() == 11
    # NaN (failed evaluations) with nan="bad": labelled bad, not part of the quantile
    labels, thr = quantile_labels(np.array([3.0, np.nan, 1.0, 2.0]), 0.5, nan="bad")
    assert thr == 2.0
    np.testing.assert_array_equal(labels, [0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"1 NaN value.*nan='bad'"):  # not silently
        quantile_labels(np.array([3.0, np.nan, 1.0, 2.0]), 0.5)
    with pytest.raises(ValueError, match="zeta"):
        quantile_labels(y, 1.0)
    with pytest.raises(ValueError, match="finite"):
        quantile_labels([np.nan], 0.5, nan="bad")
    with pytest.raises(TypeError, match="y must be numeric"):
        quantile_labels(["1.0", "2.0"], 0.5)


def _blobs(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([0.2 + 0.05 * rng.normal(size=(n, 2)), 0.8 + 0.05 * rng.normal(size=(n, 2))])
    labels = np.repeat([1, 0], n)
    return np.clip(X, 0, 1), labels


@pytest.mark.parametrize("kind", ["label_propagation", "label_spreading"])
def test_fully_labelled_model_reproduces_labels(kind):
    X, labels = _blobs()
    model = fit_ssl(kind, X, labels, gamma=20.0)
    np.testing.assert_array_equal(model.predict(X), labels)
    np.testing.assert_array_equal((class1_probability(model, X) > 0.5).astype(int), labels)


@pytest.mark.parametrize("acquisition", ["official", "extrapolate"])
@pytest.mark.parametrize("kind", ["label_propagation", "label_spreading"])
def test_probability_equals_sklearn_and_its_gradient(kind, acquisition):
    X, labels = _blobs()
    labels = labels.copy()
    labels[::3] = -1  # some unlabelled rows
    model = fit_ssl(kind, X, labels, gamma=10.0)
    Z = np.random.default_rng(1).random((25, 2))
    p = class1_probability(model, Z, acquisition=acquisition)
    np.testing.assert_allclose(p, model.predict_proba(Z)[:, 1], atol=1e-10)
    z, h = Z[3], 1e-6
    value, grad = class1_probability_grad(model, z, acquisition=acquisition)
    assert value == pytest.approx(p[3])

    def at(x):
        return class1_probability(model, x[None], acquisition=acquisition)[0]

    fd = [(at(z + h * e) - at(z - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-8)


def test_official_probability_is_zero_beyond_the_kernels_reach():
    X, labels = _blobs()
    model = fit_ssl("label_propagation", X, labels, gamma=2000.0)
    # (0.5, 0.5) lies within 0.5 of some row: exp(-2000 * 0.25) = 7e-218 > 0, in reach;
    # (0, 1), (-0.6, -0.6), (1.6, 1.6) lie >= 0.65 from every row: exp(-2000 * 0.42) = 0
    Z = np.array([[0.5, 0.5], [0.0, 1.0], [-0.6, -0.6], [1.6, 1.6], [0.2, 0.2]])
    with np.errstate(all="ignore"):
        sk = model.predict_proba(Z)[:, 1]
    assert np.isnan(sk[1:4]).all() and np.isfinite(sk[[0, 4]]).all()  # 0/0 beyond reach
    official = class1_probability(model, Z, acquisition="official")
    np.testing.assert_allclose(official, np.nan_to_num(sk, nan=0.0), atol=1e-10)
    np.testing.assert_array_equal(official[1:4], 0.0)
    assert official[4] > 0.99  # the centre of the good blob
    value, grad = class1_probability_grad(model, Z[2], acquisition="official")
    assert value == 0.0 and np.all(grad == 0.0)
    # extrapolated: far points take the label of the nearest rows (the good blob is at 0.2)
    far = class1_probability(model, Z, acquisition="extrapolate")
    assert far[2] > 0.99 and far[3] < 0.01 and far[4] > 0.99
    assert np.all(np.isfinite(far)) and np.all((far >= 0) & (far <= 1))


def test_an_isolated_point_counts_as_maximal_entropy():
    X, labels = _blobs(n=10)
    X = np.vstack([X, [[1.0, 0.0]]])  # one unlabelled point far from both blobs
    labels = np.concatenate([labels, [-1]])
    gamma = 5e3  # the isolated row's kernel to every other row underflows
    model = fit_ssl("label_propagation", X, labels, gamma)
    np.testing.assert_array_equal(model.label_distributions_[-1], 0.0)  # a zero row
    with np.errstate(all="ignore"):
        P = model.predict_proba(X)
    assert np.isnan(P[-1]).all() and np.isfinite(P[:-1]).all()
    Pc = np.clip(P[:-1], 1e-300, 1)
    expected = (-(Pc * np.log(Pc)).sum(1).sum() + np.log(2.0)) / len(X)
    assert mean_entropy("label_propagation", X, labels, gamma) == pytest.approx(expected)
    assert mean_entropy("label_propagation", X, labels, gamma) >= np.log(2.0) / len(X)


def test_unit_bandwidth_scale():
    assert unit_bandwidth_scale([[-5.0, 0.0], [10.0, 15.0]]) == pytest.approx(225.0)  # Branin
    assert unit_bandwidth_scale([[0.0, 0.0], [2.0, 8.0]]) == pytest.approx(16.0)  # (4 * 64)^0.5


@pytest.mark.parametrize("start", ["official", "grid"])
@pytest.mark.parametrize("kind", ["label_propagation", "label_spreading"])
def test_entropy_optimal_bandwidth_is_no_worse_than_its_start(kind, start):
    X, labels = _blobs(seed=2)
    labels = labels.copy()
    labels[np.random.default_rng(0).random(labels.size) < 0.7] = -1
    scale = 30.0
    gamma = select_bandwidth(kind, X, labels, scale=scale, start=start)
    if start == "official":
        assert scale * 1e-5 <= gamma <= scale * 1e5
        reference = [scale]
    else:
        assert 1e-5 <= gamma <= 1e5
        reference = 10.0 ** np.arange(-5.0, 6.0)
    best_start = min(mean_entropy(kind, X, labels, g) for g in reference)
    assert mean_entropy(kind, X, labels, gamma) <= best_start + 1e-12


def test_ask_tell_state_round_trip():
    f = lambda x: float(((x - 0.3) ** 2).sum())  # noqa: E731
    a = DREBOSSL([[-1.0, -1.0], [1.0, 1.0]], seed=3, n_candidates=200, n_starts=5)
    X0 = np.random.default_rng(0).uniform(-1, 1, (6, 2))
    a.tell(X0, [f(x) for x in X0])
    state = json.loads(json.dumps(a.state_dict()))
    b = DREBOSSL([[-1.0, -1.0], [1.0, 1.0]], seed=99, n_candidates=200, n_starts=5)
    b.load_state_dict(state)
    np.testing.assert_array_equal(a.ask(), b.ask())
    np.testing.assert_array_equal(a.X_, b.X_)
    with pytest.raises(ValueError, match="pool"):
        DREBOSSL([[-1.0, -1.0], [1.0, 1.0]], pool=np.zeros((4, 2))).load_state_dict(state)


@pytest.mark.parametrize("good", [0, 1])
def test_bore_mlp_gradient_is_exact(good):
    from sklearn.neural_network import MLPClassifier

    from drebo_ssl.baselines import mlp_value_and_grad

    rng = np.random.default_rng(0)
    X = rng.random((30, 2))
    y = (X.sum(1) < 0.8).astype(int)
    y = y if good else 1 - y  # class 1 as scikit-learn's positive or negative class
    clf = MLPClassifier((32, 32), max_iter=2000, random_state=0).fit(X, y)
    col = list(clf.classes_).index(1)
    h = 1e-6
    for z in rng.random((5, 2)):
        p, grad = mlp_value_and_grad(clf, z)
        assert p == pytest.approx(clf.predict_proba(z[None])[0, col], abs=1e-12)
        fd = [
            (
                clf.predict_proba((z + h * e)[None])[0, col]
                - clf.predict_proba((z - h * e)[None])[0, col]
            )
            / (2 * h)
            for e in np.eye(2)
        ]
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)
