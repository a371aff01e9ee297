"""The SCM prior: shapes, labels, determinism, categorical and missing features."""

import numpy as np
import pytest

from tabicl_lite import PriorConfig, sample_batch, sample_table


def test_table_shapes_labels_and_determinism():
    X, y = sample_table(np.random.default_rng(0), 200, 7, 4)
    assert X.shape == (200, 7) and X.dtype == np.float32
    assert y.shape == (200,) and set(np.unique(y)) <= set(range(4))
    X2, y2 = sample_table(np.random.default_rng(0), 200, 7, 4)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)


def test_tree_and_mlp_scms_and_categorical_features():
    mlp = PriorConfig(p_mlp=1.0, p_categorical=0.0, p_missing=0.0)
    tree = PriorConfig(p_mlp=0.0, p_categorical=1.0, p_missing=0.0)
    Xm, _ = sample_table(np.random.default_rng(1), 300, 5, 3, mlp)
    Xt, _ = sample_table(np.random.default_rng(1), 300, 5, 3, tree)
    assert np.isfinite(Xm).all() and np.isfinite(Xt).all()
    # every feature categorical: small sets of integer codes
    for j in range(5):
        codes = np.unique(Xt[:, j])
        assert codes.size <= 10 and np.array_equal(codes, np.round(codes))


def test_missing_values_appear_when_asked():
    cfg = PriorConfig(p_missing=1.0)
    X, _ = sample_table(np.random.default_rng(2), 400, 6, 2, cfg)
    assert 0 < np.isnan(X).mean() < 0.2


def test_batch_has_every_class_among_training_rows():
    X, y, k = sample_batch(np.random.default_rng(3), 6, 120, 4, n_train=80, max_classes=10)
    assert X.shape == (6, 120, 4) and y.shape == (6, 120)
    for b in range(6):
        assert np.array_equal(np.unique(y[b, :80]), np.arange(k[b]))
        test = y[b, 80:]
        assert np.all((test == -100) | ((test >= 0) & (test < k[b])))


def test_prior_depends_on_its_inputs():
    """Features carry information about the label: a shallow tree beats chance on average."""
    from sklearn.model_selection import cross_val_score
    from sklearn.tree import DecisionTreeClassifier

    scores = []
    for seed in range(10):
        X, y = sample_table(np.random.default_rng(seed), 400, 8, 2, PriorConfig(p_missing=0))
        scores.append(cross_val_score(DecisionTreeClassifier(max_depth=4), X, y, cv=3).mean())
    assert np.mean(scores) > 0.6


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_classes"):
        sample_table(np.random.default_rng(0), 10, 2, 1)
    with pytest.raises(TypeError, match="rng must be None, a non-negative integer"):
        sample_table("abc", 10, 2, 2)
    # an integer seeds a new stream, as numpy.random.default_rng does
    X0, y0 = sample_table(0, 30, 3, 2)
    X1, y1 = sample_table(np.random.default_rng(0), 30, 3, 2)
    np.testing.assert_array_equal(X0, X1)
    np.testing.assert_array_equal(y0, y1)
    with pytest.raises(ValueError, match="n_train"):
        sample_batch(np.random.default_rng(0), 2, 10, 2, n_train=10)
    with pytest.raises(ValueError, match="p_mlp"):
        PriorConfig(p_mlp=2.0)
