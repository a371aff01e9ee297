"""TabICLClassifier mechanics on a tiny random checkpoint: probabilities, invariances,
labels, missing values, categoricals, the class hierarchy and bad input."""

import numpy as np
import pytest

from tabicl_lite import TabICLClassifier


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int) + 2 * (X[:, 2] > 0.5)
    return X, y


@pytest.fixture
def clf(tiny_model_path):
    return TabICLClassifier(n_estimators=3, model_path=tiny_model_path, device="cpu")


def test_probabilities_sum_to_one_and_predict_is_their_argmax(clf, data):
    X, y = data
    proba = clf.fit(X[:80], y[:80]).predict_proba(X[80:])
    assert proba.shape == (40, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X[80:]), clf.classes_[proba.argmax(axis=1)])


def test_invariance_to_training_row_order(clf, data):
    X, y = data
    a = clf.fit(X[:80], y[:80]).predict_proba(X[80:])
    perm = np.random.default_rng(1).permutation(80)
    b = clf.fit(X[:80][perm], y[:80][perm]).predict_proba(X[80:])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_no_test_leakage(clf, data):
    X, y = data
    clf.fit(X[:80], y[:80])
    a = clf.predict_proba(X[80:])
    Xc = X[80:].copy()
    Xc[7] = 50.0
    b = clf.predict_proba(Xc)
    keep = np.arange(40) != 7
    np.testing.assert_array_equal(a[keep], b[keep])
    # and test rows are predicted the same alone or in any batch
    alone = np.vstack([clf.predict_proba(X[80 + i : 81 + i]) for i in range(5)])
    np.testing.assert_allclose(alone, a[:5], rtol=0, atol=1e-6)


@pytest.mark.parametrize("hierarchy", [False, True])
def test_rows_go_through_in_bounded_blocks_with_the_same_result(tiny_model_path, data, hierarchy):
    """predict_proba on many rows never builds views of more than batch_size rows, and
    gives what one big block gives (12 classes exceed the tiny model's max_classes: the
    hierarchy path)."""
    X, y = data
    y = np.arange(120) % 12 if hierarchy else y
    kw = {"n_estimators": 2, "model_path": tiny_model_path, "device": "cpu"}
    big = TabICLClassifier(**kw).fit(X[:80], y[:80])
    small = TabICLClassifier(batch_size=7, **kw).fit(X[:80], y[:80])
    seen = []
    tables = small._tables
    small._tables = lambda rows: (seen.append(len(rows)), tables(rows))[1]
    np.testing.assert_allclose(small.predict_proba(X[80:]), big.predict_proba(X[80:]), atol=1e-6)
    assert max(seen) == 7 and sum(seen) == 40


def test_string_and_non_contiguous_labels_are_only_names(clf, data):
    """Labels that sort like 0..3 (strings, gaps) give exactly the predictions of 0..3."""
    X, y = data
    base = clf.fit(X[:80], y[:80]).predict_proba(X[80:])
    names = np.array(["cat", "dog", "emu", "yak"])[y]
    np.testing.assert_array_equal(clf.fit(X[:80], names[:80]).predict_proba(X[80:]), base)
    assert set(clf.predict(X[80:])) <= set(names)
    codes = np.array([3, 7, 10, 42])[y]
    np.testing.assert_array_equal(clf.fit(X[:80], codes[:80]).predict_proba(X[80:]), base)
    np.testing.assert_array_equal(clf.classes_, [3, 7, 10, 42])


def test_missing_values_are_accepted(clf, data):
    X, y = data
    X = X.copy()
    X[np.random.default_rng(2).random(X.shape) < 0.2] = np.nan
    proba = clf.fit(X[:80], y[:80]).predict_proba(X[80:])
    assert np.isfinite(proba).all()


def test_a_column_or_a_table_with_no_observed_value_is_missing_data(clf, data):
    X, y = data
    X = X.copy()
    X[:, 1] = np.nan  # nothing observed in this column: every normalizer skips it
    proba = clf.fit(X[:80], y[:80]).predict_proba(X[80:])
    assert np.isfinite(proba).all() and np.allclose(proba.sum(1), 1)
    blank = np.full((120, X.shape[1]), np.nan)
    proba = clf.fit(blank[:80], y[:80]).predict_proba(blank[80:])
    # identical (empty) rows: one prediction for all, and a probability distribution
    assert np.isfinite(proba).all() and np.allclose(proba, proba[0])
    assert np.allclose(proba.sum(1), 1)


def test_categorical_columns_with_strings(clf, data):
    X, y = data
    colours = np.array(["red", "green", "blue"])[np.random.default_rng(3).integers(0, 3, 120)]
    Xo = np.column_stack([X.astype(object), colours])
    clf.set_params(categorical_features=[5])
    proba = clf.fit(Xo[:80], y[:80]).predict_proba(Xo[80:])
    assert proba.shape == (40, 4)
    Xu = Xo[80:].copy()
    Xu[0, 5] = "purple"  # unseen category -> missing value, no error
    assert np.isfinite(clf.predict_proba(Xu)).all()
    with pytest.raises(ValueError, match="categorical_features"):
        TabICLClassifier(model_path=clf.model_path).fit(Xo[:80], y[:80])


def test_hierarchical_path_with_25_classes(tiny_model_path):
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(25), 6)
    X = rng.normal(size=(150, 3)) + y[:, None] * 0.1
    clf = TabICLClassifier(n_estimators=2, model_path=tiny_model_path).fit(X, y)
    assert clf.tree_ is not None and all(m.shift == 0 for m in clf.members_)
    proba = clf.predict_proba(X[:20])
    assert proba.shape == (20, 25)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


def test_ensemble_members_cover_normalizations_orders_and_shifts(clf, data):
    X, y = data
    clf.set_params(n_estimators=4, norm_methods=("none", "power", "quantile"))
    clf.fit(X, y)
    assert [m.norm for m in clf.members_] == ["none", "power", "quantile", "none"]
    orders = np.stack([m.features for m in clf.members_])
    assert all(sorted(o) == list(range(5)) for o in orders)
    assert len({tuple(o) for o in orders}) == 4  # cyclic shifts differ
    shifts = [m.shift for m in clf.members_]
    assert shifts == [(shifts[0] + i) % 4 for i in range(4)]
    assert np.isfinite(clf.predict_proba(X[:5])).all()


def test_fit_is_deterministic_under_random_state(clf, data):
    X, y = data
    a = clf.set_params(random_state=7).fit(X[:80], y[:80]).predict_proba(X[80:])
    b = clf.set_params(random_state=7).fit(X[:80], y[:80]).predict_proba(X[80:])
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("X", "y", "message"),
    [
        (np.zeros((4, 2)), np.array([0, 1, np.nan, 1]), "y contains NaN"),
        (np.zeros((4, 2)), np.array([1, 1, 1, 1]), "one class"),
        (np.zeros((2004, 1)), np.arange(2004) // 2, "hierarchy supports at most"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), np.array([0, 1]), "infinity"),
        (np.array([["a", 1.0], ["b", 2.0]], dtype=object), np.array([0, 1]), "categorical"),
    ],
)
def test_bad_input_at_fit(tiny_model_path, X, y, message):
    with pytest.raises(ValueError, match=message):
        TabICLClassifier(model_path=tiny_model_path).fit(X, y)


def test_bad_input_at_predict_and_bad_parameters(clf, data):
    X, y = data
    clf.fit(X, y)
    with pytest.raises(ValueError, match="5 features"):
        clf.predict(X[:, :3])
    with pytest.raises(ValueError, match="infinity"):
        clf.predict(np.full((1, 5), np.inf))
    for params, message in [
        ({"n_estimators": 0}, "n_estimators"),
        ({"norm_methods": ("zscore",)}, "norm_methods"),
        ({"softmax_temperature": 0}, "softmax_temperature"),
        ({"softmax_temperature": float("inf")}, "softmax_temperature"),
        ({"softmax_temperature": float("nan")}, "softmax_temperature"),
        ({"categorical_features": [9]}, "categorical_features"),
        ({"model_path": "/nonexistent"}, "model_path"),
    ]:
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            TabICLClassifier(**{"model_path": clf.model_path, **params}).fit(X, y)


def test_long_predictions_show_progress_and_give_the_same_probabilities(
    tiny_model_path, data, monkeypatch
):
    import tabicl_lite.classifier as module

    X, y = data
    shown = []

    def recording_track(items, description, total=None):
        shown.append((description, total))
        return iter(items)

    monkeypatch.setattr(module, "track", recording_track)
    clf = TabICLClassifier(n_estimators=2, batch_size=4, model_path=tiny_model_path).fit(X, y)
    auto = clf.predict_proba(X[:40])  # 10 blocks: the bar shows by default
    assert shown == [("predict 40 rows", 10)]
    few = clf.predict_proba(X[:36])  # 9 blocks: no bar
    assert len(shown) == 1
    np.testing.assert_array_equal(few, auto[:36])
    quiet = clf.set_params(progress=False).predict_proba(X[:40])
    assert len(shown) == 1
    np.testing.assert_array_equal(quiet, auto)
    clf.set_params(progress=True).predict_proba(X[:4])
    assert shown[-1] == ("predict 4 rows", 1)


def test_dataframe_with_named_categorical_columns(tiny_model_path, data):
    pd = pytest.importorskip("pandas")
    X, y = data
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    frame["colour"] = rng.choice(["red", "green", "blue"], size=len(frame))
    frame["size"] = pd.Categorical(rng.choice(["S", "M", "L"], size=len(frame)))
    clf = TabICLClassifier(
        n_estimators=2, categorical_features=["colour", "size"], model_path=tiny_model_path
    ).fit(frame.iloc[:80], y[:80])
    np.testing.assert_array_equal(clf.feature_names_in_, frame.columns)
    assert clf.categorical_mask_.tolist() == [False] * 5 + [True, True]
    proba = clf.predict_proba(frame.iloc[80:])
    assert proba.shape == (40, 4) and np.isfinite(proba).all()
    with pytest.raises(ValueError, match="not a column"):
        TabICLClassifier(categorical_features=["shape"], model_path=tiny_model_path).fit(frame, y)


def test_normalizer_treats_training_and_test_rows_alike():
    """Passthrough decided on the training rows applies to test rows too; other columns are
    the fitted transform, row by row."""
    from sklearn.preprocessing import PowerTransformer

    from tabicl_lite.preprocessing import Normalizer

    rng = np.random.default_rng(0)
    X = rng.lognormal(size=(50, 3))
    norm = Normalizer("power").fit(X)
    assert not norm.passthrough_.any()
    expected = PowerTransformer().fit(X).transform(X[:5])
    np.testing.assert_allclose(norm.transform(X[:5]), expected)
    np.testing.assert_array_equal(norm.transform(X[:5])[2], norm.transform(X[2:3])[0])
    norm.passthrough_ = np.array([False, True, False])
    out = norm.transform(X[:5])
    np.testing.assert_array_equal(out[:, 1], X[:5, 1])


def test_parameters_are_keyword_only_and_validated_the_scikit_learn_way(tiny_model_path, data):
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(TypeError):
        TabICLClassifier(4)  # keyword-only, as scikit-learn estimators
    X, y = data
    for params, name in [
        ({"batch_size": 0}, "batch_size"),
        ({"feature_shuffle": "yes"}, "feature_shuffle"),
    ]:
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of TabICLClassifier"):
            TabICLClassifier(model_path=tiny_model_path, **params).fit(X, y)


def test_load_model_reloads_a_checkpoint_saved_again_in_place(tmp_path, tiny_config):
    import torch

    from tabicl_lite import TabICL, load_model

    folder = tmp_path / "model"
    torch.manual_seed(0)
    TabICL(tiny_config).save_pretrained(folder)
    first = load_model(folder, device="cpu")
    assert load_model(folder, device="cpu") is first  # cached while the files are the same
    torch.manual_seed(1)
    TabICL(tiny_config).save_pretrained(folder, overwrite=True)
    second = load_model(folder, device="cpu")
    assert second is not first
    want = TabICL.from_pretrained(folder).state_dict()
    for key, value in second.state_dict().items():
        assert torch.equal(value, want[key])


@pytest.mark.parametrize("kv_cache", [True, "repr"])
@pytest.mark.parametrize("hierarchy", [False, True])
def test_a_cached_training_context_gives_the_uncached_probabilities(
    tiny_model_path, data, kv_cache, hierarchy
):
    """kv_cache runs the training rows once at fit; every later block of test rows and
    every later call gives the uncached probabilities (12 classes: the hierarchy, which
    keeps representations only)."""
    X, y = data
    y = np.arange(120) % 12 if hierarchy else y
    kw = {"n_estimators": 3, "model_path": tiny_model_path, "device": "cpu", "batch_size": 7}
    plain = TabICLClassifier(**kw).fit(X[:80], y[:80])
    cached = TabICLClassifier(kv_cache=kv_cache, **kw).fit(X[:80], y[:80])
    assert plain.context_ is None
    keeps_kv = kv_cache is True and not hierarchy
    assert (cached.context_.keys_values is not None) == keeps_kv
    expected = plain.predict_proba(X[80:])
    for _ in range(2):
        np.testing.assert_allclose(cached.predict_proba(X[80:]), expected, rtol=0, atol=1e-6)


def test_bfloat16_autocast_is_close_to_float32(tiny_model_path, data):
    X, y = data
    kw = {"n_estimators": 3, "model_path": tiny_model_path, "device": "cpu"}
    exact = TabICLClassifier(**kw).fit(X[:80], y[:80]).predict_proba(X[80:])
    for kv_cache in (False, True):
        amp = TabICLClassifier(use_amp=True, kv_cache=kv_cache, **kw).fit(X[:80], y[:80])
        proba = amp.predict_proba(X[80:])
        assert proba.dtype == np.float64
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
        assert 0 < np.abs(proba - exact).max() < 0.05  # bfloat16 rounding, not a no-op


def test_yeo_johnson_in_column_blocks_is_the_same_fit():
    """Fitted block by block, the standardised Yeo-Johnson transform equals sklearn's fit
    over all columns (its parameters are per column): the same lambdas, the same output
    to rounding (numpy's vectorised column sums differ in the last bit with the width)."""
    from sklearn.preprocessing import PowerTransformer

    from tabicl_lite.preprocessing import ColumnBlocks

    X = np.random.default_rng(1).lognormal(size=(40, 7))
    whole = PowerTransformer().fit(X)
    blocks = ColumnBlocks(PowerTransformer, "fit", block=3, progress=False).fit(X)
    assert len(blocks.parts_) == 3
    lambdas = np.concatenate([part.lambdas_ for part in blocks.parts_])
    np.testing.assert_array_equal(lambdas, whole.lambdas_)
    np.testing.assert_allclose(blocks.transform(X[:9]), whole.transform(X[:9]), rtol=1e-12)


@pytest.mark.parametrize("preprocessing", ["lite", "official"])
def test_wide_fits_show_progress_over_column_blocks(
    tiny_model_path, data, monkeypatch, preprocessing
):
    """A Yeo-Johnson fit over 10 or more column blocks shows a bar (2,000 columns at the
    default block of 200; 10 columns at a block of 1 here); the probabilities do not depend
    on the blocks (to float32 rounding)."""
    import tabicl_lite.preprocessing as module

    X, y = data
    X = np.hstack([X, X**2])  # 10 columns
    shown = []

    def recording_track(items, description, total=None):
        shown.append((description, total))
        return iter(items)

    monkeypatch.setattr(module, "track", recording_track)
    params = {
        "n_estimators": 2,
        "model_path": tiny_model_path,
        "norm_methods": ("power",),
        "preprocessing": preprocessing,
    }
    reference = TabICLClassifier(**params).fit(X, y).predict_proba(X[:8])
    assert shown == []  # one block of 200 columns: no bar
    monkeypatch.setattr(module, "POWER_BLOCK", 1)
    blocked = TabICLClassifier(**params).fit(X, y).predict_proba(X[:8])
    assert shown == [("fit Yeo-Johnson, 10 columns", 10)]
    np.testing.assert_allclose(blocked, reference, rtol=1e-6, atol=1e-7)
    TabICLClassifier(**params, progress=False).fit(X, y)
    assert len(shown) == 1
    monkeypatch.setattr(module, "POWER_BLOCK", 2)
    TabICLClassifier(**params, progress=True).fit(X, y)
    assert shown[-1] == ("fit Yeo-Johnson, 10 columns", 5)
