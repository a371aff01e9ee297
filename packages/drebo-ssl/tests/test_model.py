"""Labels, the semi-supervised model, the bandwidth rule, the acquisition's closed form."""

import json

import numpy as np
import pytest

from drebo_ssl import DREBOSSL, class1_probability, mean_entropy, quantile_labels, select_bandwidth
from drebo_ssl.ssl import class1_probability_grad, fit_ssl


def test_labels_follow_the_quantile_rule():
    rng = np.random.default_rng(0)
    y = rng.permutation(np.arange(30.0))
    labels, thr = quantile_labels(y, 0.33)
    assert thr == np.quantile(y, 0.33, method="nearest") == 10.0
    np.testing.assert_array_equal(labels, (y <= 10.0).astype(int))
    assert labels.sum() == 11
    # NaN: labelled bad, not part of the quantile
    labels, thr = quantile_labels(np.array([3.0, np.nan, 1.0, 2.0]), 0.5)
    assert thr == 2.0
    np.testing.assert_array_equal(labels, [0, 0, 1, 1])
    with pytest.raises(ValueError, match="zeta"):
        quantile_labels(y, 1.0)
    with pytest.raises(ValueError, match="finite"):
        quantile_labels([np.nan], 0.5)


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


@pytest.mark.parametrize("kind", ["label_propagation", "label_spreading"])
def test_closed_form_probability_equals_sklearn_and_its_gradient(kind):
    X, labels = _blobs()
    labels = labels.copy()
    labels[::3] = -1  # some unlabelled rows
    model = fit_ssl(kind, X, labels, gamma=10.0)
    Z = np.random.default_rng(1).random((25, 2))
    np.testing.assert_allclose(
        class1_probability(model, Z), model.predict_proba(Z)[:, 1], atol=1e-10
    )
    z, h = Z[3], 1e-6
    p, grad = class1_probability_grad(model, z)
    assert p == pytest.approx(class1_probability(model, z[None])[0])
    fd = [
        (
            class1_probability(model, (z + h * e)[None])[0]
            - class1_probability(model, (z - h * e)[None])[0]
        )
        / (2 * h)
        for e in np.eye(2)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-8)


def test_probability_stays_defined_where_kernels_underflow():
    X, labels = _blobs()
    model = fit_ssl("label_propagation", X, labels, gamma=20.0)
    model.gamma = 1e5  # every exp(-gamma d^2) underflows far from the data
    p = class1_probability(model, np.array([[0.5, 0.5], [0.0, 1.0]]))
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))


@pytest.mark.parametrize("kind", ["label_propagation", "label_spreading"])
def test_entropy_optimal_bandwidth_is_no_worse_than_one(kind):
    X, labels = _blobs(seed=2)
    labels = labels.copy()
    labels[np.random.default_rng(0).random(labels.size) < 0.7] = -1
    gamma = select_bandwidth(kind, X, labels)
    assert 1e-5 <= gamma <= 1e5
    assert mean_entropy(kind, X, labels, gamma) <= mean_entropy(kind, X, labels, 1.0) + 1e-12


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
