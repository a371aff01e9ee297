"""The official TabICL checkpoints (v1 and v2): conversion, the official preprocessing,
parity.

Three oracles:
* the official network itself (``tabicl`` 2.x, a dev dependency), built with the v1
  settings (which compute the paper's v1 function: checked against 0.1.4 when the
  converter was written, max |logit diff| 1.1e-6 in float32) and with the v2 classifier's
  settings, with random non-zero weights at a small and the official size;
* the official v1 CLASSIFIER (``tabicl`` 0.1.4, which cannot be installed beside 2.x):
  its probabilities on four tables, recorded by ``official/make_v1_reference.py`` with a
  small random checkpoint stored beside it;
* the official v2 classifier (``tabicl`` 2.2.0) run live on a small random v2 checkpoint.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from sklearn.datasets import load_breast_cancer, load_wine

from tabicl_lite import TabICLClassifier
from tabicl_lite import classifier as classifier_module
from tabicl_lite.convert import config_from_official, from_official_checkpoint, main
from tabicl_lite.model import mixed_radix_bases
from tabicl_lite.official import OFFICIAL_MEMBER_BATCH, latin_square, official_members

HERE = Path(__file__).parent / "official"


@functools.cache
def _reference_script():
    """``official/make_v1_reference.py`` as a module: the weights and the table the
    reference was recorded with are made by the same code here."""
    spec = importlib.util.spec_from_file_location(
        "make_v1_reference", HERE / "make_v1_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the v1 options and the v2 classifier checkpoint's, and the lite sizes
V1, V2 = _reference_script().OPTIONS[1], _reference_script().OPTIONS[2]
LITE = _reference_script().LITE
PAPER = dict(
    embed_dim=128,
    col_num_blocks=3,
    col_nhead=4,
    col_num_inds=128,
    row_num_blocks=3,
    row_nhead=8,
    icl_num_blocks=12,
    icl_nhead=4,
)
#: the v2 classifier's heads
V2_PAPER = {**PAPER, "col_nhead": 8, "icl_nhead": 8}


@pytest.fixture(scope="module")
def official_v2_checkpoint(tmp_path_factory):
    """A small official v2 network with random non-zero weights as an official ``.ckpt``
    file (the 2.x config keys, as ``tabicl.train`` writes them)."""
    official = pytest.importorskip("tabicl._model.tabicl")
    config = {**_reference_script().CONFIG, **V2}  # the stored v1 network's sizes
    net = official.TabICL(**config)
    _reference_script().randomize(net, seed=0)
    path = tmp_path_factory.mktemp("official") / "v2_tiny.ckpt"
    torch.save({"config": config, "state_dict": net.state_dict()}, path)
    return path


@pytest.fixture(scope="module")
def official_v1_checkpoint(tmp_path_factory):
    """The stored small v1 network as an official ``.ckpt`` file (0.1.x config keys)."""
    config = json.loads((HERE / "v1_tiny.json").read_text())
    path = tmp_path_factory.mktemp("official") / "v1_tiny.ckpt"
    torch.save({"config": config, "state_dict": load_file(HERE / "v1_tiny.safetensors")}, path)
    return path


# ---------------------------------------------------------------- network parity
def _official_network(config: dict, dtype: torch.dtype):
    """The official network of ``config`` with random non-zero weights, in ``dtype``; its
    one-hot label encoders cast to the weights' dtype (the official casts to float32
    only, so its float64 network fails on them)."""
    official = pytest.importorskip("tabicl._model.tabicl")
    net = official.TabICL(**config)
    _reference_script().randomize(net, seed=0)
    net = net.to(dtype).eval()
    encoders = [net.icl_predictor.y_encoder]
    if config.get("col_target_aware"):
        encoders.append(net.col_embedder.y_encoder)
    for enc in encoders:

        def one_hot_linear(y, enc=enc):
            one_hot = torch.nn.functional.one_hot(y.long(), enc.num_classes).to(enc.weight.dtype)
            return torch.nn.functional.linear(one_hot, enc.weight, enc.bias)

        enc.forward = one_hot_linear
    return net


def _cpu_inference():
    inference = pytest.importorskip("tabicl._model.inference_config")
    cfg = inference.InferenceConfig()
    cpu = {"use_amp": False, "device": torch.device("cpu")}
    cfg.update_from_dict({k: dict(cpu) for k in ("COL_CONFIG", "ROW_CONFIG", "ICL_CONFIG")})
    return cfg


@pytest.mark.parametrize(
    ("generation", "size"), [(1, "lite"), (1, "paper"), (2, "lite"), (2, "paper")]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_converted_network_computes_the_official_logits(generation, size, dtype):
    if generation == 1:
        config = {**(LITE if size == "lite" else PAPER), **V1}
    else:
        config = {**(LITE if size == "lite" else V2_PAPER), **V2}
    net = _official_network(config, dtype)
    ours = from_official_checkpoint({"config": config, "state_dict": net.state_dict()}).to(dtype)
    assert not ours.config.standardize and ours.config.generation == generation
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(2, 120, 7, generator=gen, dtype=dtype)
    y = torch.randint(0, 3, (2, 80), generator=gen)
    with torch.no_grad():
        want = net(X, y.to(dtype), return_logits=True, inference_config=_cpu_inference())
        got = ours(X, y)[..., :3]
    assert want.abs().max() > 0.1  # a network that computes something
    # float32: measured 1.2e-6 (v1) and 1.2e-6 / 1.5e-6 (v2, small / official size);
    # float64: 1.6e-8 (v1), 1.5e-8 / 2.4e-8 (v2) (the official computes RoPE angles in
    # float32)
    tol = 2e-5 if dtype == torch.float32 else 1e-6
    torch.testing.assert_close(got, want, atol=tol, rtol=0)


@pytest.mark.parametrize("n_classes", [4, 25, 120])
def test_v2_column_stage_with_many_classes_is_the_officials_mixed_radix_ensemble(n_classes):
    """Row representations of a target-aware network for 4, 25 (two digits, bases [5, 5])
    and 120 classes (three digits, [5, 5, 5]): equal to the official column and row stages."""
    config = {**LITE, **V2}
    net = _official_network(config, torch.float64)
    ours = from_official_checkpoint({"config": config, "state_dict": net.state_dict()})
    ours = ours.double()
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(1, 3 * n_classes + 20, 5, generator=gen, dtype=torch.float64)
    y = torch.arange(3 * n_classes)[torch.randperm(3 * n_classes, generator=gen)][None]
    y = y % n_classes
    cfg = _cpu_inference()
    with torch.no_grad():
        emb = net.col_embedder(X, y_train=y.double(), mgr_config=cfg.COL_CONFIG)
        want = net.row_interactor(emb, mgr_config=cfg.ROW_CONFIG)
        got = ours.represent(X, y.shape[1], y_train=y)
        other = ours.represent(X, y.shape[1], y_train=y.roll(1, dims=1))
    # measured 2.6e-8 / 3.5e-8 / 3.2e-8 (RoPE angles in float32 in the official)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert (other - want).abs().max() > 1e-3  # the labels reach the representations


def test_mixed_radix_bases_equal_the_officials():
    embedding = pytest.importorskip("tabicl._model.embedding")
    for max_classes in (2, 3, 5, 10):
        official = embedding.ColEmbedding(
            embed_dim=8,
            num_blocks=1,
            nhead=1,
            dim_feedforward=8,
            num_inds=2,
            target_aware=True,
            max_classes=max_classes,
        )
        for n in range(2, 1200):
            assert mixed_radix_bases(n, max_classes) == official._compute_mixed_radix_bases(n)
    assert mixed_radix_bases(25, 10) == [5, 5] and mixed_radix_bases(7, 10) == [7]


def test_converter_detects_the_generation_and_refuses_what_it_does_not_implement():
    config = {**LITE, **V1}
    v1_keys = {k: v for k, v in LITE.items()}  # a 0.1.x config: no 2.x key at all
    assert config_from_official(v1_keys).generation == 1
    v2 = config_from_official({**LITE, "col_nhead": 2, "row_rope_interleaved": False})
    # a 2.x config: the keys it omits take the 2.x constructor's defaults (v2 mechanisms)
    assert v2.generation == 2 and v2.target_aware and v2.feature_group == "same"
    assert not v2.col_affine and v2.icl_ssmax == "qassmax-mlp-elementwise"
    assert config_from_official({**config, "col_ssmax": True}).col_ssmax == (
        "qassmax-mlp-elementwise"
    )
    for key, value, message in [
        ("bias_free_ln", True, "LayerNorms without bias"),
        ("norm_first", False, "post-norm"),
        ("activation", "relu", "another activation"),
        ("col_feature_group", "valid", "col_feature_group='valid'"),
        ("icl_ssmax", "ssmax-mlp", "icl_ssmax='ssmax-mlp'"),
    ]:
        with pytest.raises(ValueError, match=message):
            from_official_checkpoint({"config": {**config, key: value}, "state_dict": {}})
    with pytest.raises(ValueError, match="col_affine=True needs feature_group='none'"):
        config_from_official({**config, "col_feature_group": "same"})
    # a v1 config with a v2 network's tensors (and the reverse): named leftovers / missing
    v2_net = _official_network({**LITE, **V2}, torch.float32)
    with pytest.raises(
        ValueError, match=r"no tensor 'col_embedder\.out_w\.weight': not the TabICL v1"
    ):
        from_official_checkpoint({"config": config, "state_dict": v2_net.state_dict()})
    state = load_file(HERE / "v1_tiny.safetensors")
    small = json.loads((HERE / "v1_tiny.json").read_text())
    with pytest.raises(ValueError, match="not the TabICL v2 network its config states"):
        from_official_checkpoint({"config": {**small, **V2}, "state_dict": state})
    with pytest.raises(ValueError, match="regression"):
        from_official_checkpoint({"config": {**config, "max_classes": 0}, "state_dict": {}})
    with pytest.raises(ValueError, match="unknown keys \\['colour'\\]"):
        from_official_checkpoint({"config": {**config, "colour": 1}, "state_dict": {}})
    state = load_file(HERE / "v1_tiny.safetensors")
    small = json.loads((HERE / "v1_tiny.json").read_text())
    broken = {k: v for k, v in state.items() if k != "icl_predictor.ln.weight"}
    with pytest.raises(ValueError, match=r"no tensor 'icl_predictor\.ln\.weight'"):
        from_official_checkpoint({"config": small, "state_dict": broken})
    with pytest.raises(ValueError, match=r"does not have: .*extra"):
        from_official_checkpoint(
            {
                "config": small,
                "state_dict": {**state, "extra": state["col_embedder.in_linear.bias"]},
            }
        )
    with pytest.raises(ValueError, match="tensors do not match its config"):
        from_official_checkpoint({"config": {**small, "embed_dim": 32}, "state_dict": state})
    nan = dict(state, **{"icl_predictor.ln.bias": torch.full((32,), float("nan"))})
    with pytest.raises(ValueError, match=r"icl\.norm\.bias"):
        from_official_checkpoint({"config": small, "state_dict": nan})


def test_checkpoint_files_are_read_without_unpickling_objects(tmp_path):
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match=r"junk.ckpt is not a readable torch checkpoint"):
        from_official_checkpoint(junk)
    evil = tmp_path / "evil.ckpt"
    torch.save({"config": {}, "state_dict": {}, "payload": Path("x")}, evil)
    with pytest.raises(ValueError, match=r"evil.ckpt is not a readable .*weights_only"):
        from_official_checkpoint(evil)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"{}")
    with pytest.raises(ValueError, match="pass the folder holding it"):
        TabICLClassifier(model_path=weights).fit(np.eye(4), [0, 1, 0, 1])
    plain = tmp_path / "plain.ckpt"
    torch.save({"weights": torch.zeros(2)}, plain)
    with pytest.raises(ValueError, match="needs 'config' and 'state_dict'"):
        TabICLClassifier(model_path=plain).fit(np.eye(4), [0, 1, 0, 1])


def test_command_line_conversion_gives_the_same_classifier(official_v1_checkpoint, tmp_path):
    out = tmp_path / "converted"
    main([str(official_v1_checkpoint), str(out)])
    assert json.loads((out / "config.json").read_text())["standardize"] is False
    X, y = load_wine(return_X_y=True)
    a = TabICLClassifier(model_path=official_v1_checkpoint, n_estimators=4).fit(X[::2], y[::2])
    b = TabICLClassifier(model_path=out, n_estimators=4).fit(X[::2], y[::2])
    assert a.preprocessing_ == b.preprocessing_ == "official"
    np.testing.assert_array_equal(a.predict_proba(X[1::2]), b.predict_proba(X[1::2]))
    with pytest.raises(FileExistsError):
        main([str(official_v1_checkpoint), str(tmp_path)])  # not a previous save: kept


def test_a_model_without_in_network_standardisation_refuses_missing_values(
    official_v1_checkpoint,
):
    model = from_official_checkpoint(official_v1_checkpoint)
    X = torch.randn(1, 20, 3)
    X[0, 3, 1] = float("nan")
    with pytest.raises(ValueError, match="standardize=False"):
        model(X, torch.zeros(1, 10, dtype=torch.long))


# ---------------------------------------------------------------- classifier parity
def _case(name: str, ref):
    if name == "wine":
        return (*load_wine(return_X_y=True), {})
    if name == "breast_cancer":
        norms = ("none", "power", "quantile", "quantile_rtdl", "robust")
        return (*load_breast_cancer(return_X_y=True), {"n_estimators": 10, "norm_methods": norms})
    if name == "classes25":
        return ref["classes25_X"], np.repeat(np.arange(25), 8), {"n_estimators": 6}
    return (*_reference_script().make_frame(), {"n_estimators": 12})


@pytest.mark.parametrize("name", ["wine", "breast_cancer", "classes25", "frame"])
def test_probabilities_equal_the_official_v1_classifier(name, official_v1_checkpoint):
    """The official 0.1.4 ``TabICLClassifier`` (random_state=42, AMP off) and ours with its
    preprocessing and its column-embedding shortcut: probabilities to 1e-6 (measured
    4e-8 - 8e-8). ``classes25`` is the hierarchical path; ``frame`` has string (with None),
    bool, category and nullable Int64 (with pd.NA) columns."""
    ref = np.load(HERE / "v1_reference.npz")
    X, y, params = _case(name, ref)
    train, test = ref[f"{name}_train"], ref[f"{name}_test"]

    def take(rows):
        return X.iloc[rows] if hasattr(X, "iloc") else X[rows]

    clf = TabICLClassifier(
        model_path=official_v1_checkpoint, random_state=42, official_shortcut=True, **params
    ).fit(take(train), y[train])
    assert clf.preprocessing_ == "official"
    assert len(clf.members_) == params.get("n_estimators", 32)
    want = ref[f"{name}_proba"]
    np.testing.assert_allclose(clf.predict_proba(take(test)), want, atol=1e-6, rtol=0)
    if name in ("wine", "breast_cancer"):  # the comparison can tell preprocessings apart
        lite = {"preprocessing": "lite", "norm_methods": ("none", "power")}
        for other in ({"official_shortcut": False}, lite):
            p = clf.set_params(**other).fit(take(train), y[train]).predict_proba(take(test))
            assert np.abs(p - want).max() > 1e-3


def _v2_case(name: str):
    """Table, split and settings of a v2 classifier comparison (the official's defaults
    otherwise: 8 members, none + power, Latin square, class shifts)."""
    if name == "wine":
        X, y = load_wine(return_X_y=True)
        params = {}
    elif name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
        norms = ("none", "power", "quantile", "quantile_rtdl", "robust")
        params = {"n_estimators": 10, "norm_methods": norms}
    else:  # 25 classes: mixed-radix column stage and the class hierarchy
        rng = np.random.default_rng(0)
        y = np.repeat(np.arange(25), 8)
        X = rng.normal(size=(200, 6)) + 0.1 * y[:, None]
        params = {"n_estimators": 6}
    order = np.random.default_rng(1).permutation(len(y))
    return X, y, order[: len(y) // 2], order[len(y) // 2 :], params


@pytest.fixture(scope="module")
def official_v2_probabilities(official_v2_checkpoint):
    """The official 2.2.0 classifier's probabilities (CPU, AMP off, random_state=42)."""
    sklearn_api = pytest.importorskip("tabicl")
    out = {}
    for name in ("wine", "breast_cancer", "classes25"):
        X, y, train, test, params = _v2_case(name)
        params = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
        clf = sklearn_api.TabICLClassifier(
            model_path=official_v2_checkpoint,
            device="cpu",
            use_amp=False,
            random_state=42,
            **params,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # n_quantiles above the row count
            out[name] = clf.fit(X[train], y[train]).predict_proba(X[test])
    return out


@pytest.mark.parametrize("name", ["wine", "breast_cancer", "classes25"])
def test_probabilities_equal_the_official_v2_classifier(
    name, official_v2_checkpoint, official_v2_probabilities, monkeypatch
):
    """The official 2.2.0 ``TabICLClassifier`` on a v2 checkpoint and ours with its
    preprocessing (the 2.x member design): probabilities to 1e-6 (measured 7e-8 - 1.2e-7).
    ``classes25`` runs the mixed-radix column stage and the class hierarchy."""
    X, y, train, test, params = _v2_case(name)
    want = official_v2_probabilities[name]
    clf = TabICLClassifier(model_path=official_v2_checkpoint, random_state=42, **params)
    clf.fit(X[train], y[train])
    assert clf.preprocessing_ == "official" and clf.model_.config.generation == 2
    assert len(clf.members_) == params.get("n_estimators", 8)  # 2.2.0's default: 8
    np.testing.assert_allclose(clf.predict_proba(X[test]), want, atol=1e-6, rtol=0)
    for mode in ("kv", "repr"):  # the cached context: the same probabilities
        cached = clf.set_params(kv_cache=mode).fit(X[train], y[train]).predict_proba(X[test])
        np.testing.assert_allclose(cached, want, atol=1e-6, rtol=0)
    clf.set_params(kv_cache=False)
    if name != "classes25":  # the comparison tells the member designs apart
        lite = clf.set_params(preprocessing="lite", norm_methods=("none", "power"))
        assert np.abs(lite.fit(X[train], y[train]).predict_proba(X[test]) - want).max() > 1e-3
        v2_design = classifier_module.official_members

        def first_generation(*args, **kwargs):  # 0.1.4's shifts on the same network
            return v2_design(*args, **{**kwargs, "generation": 1})

        monkeypatch.setattr(classifier_module, "official_members", first_generation)
        clf.set_params(preprocessing="auto", **params).fit(X[train], y[train])
        assert np.abs(clf.predict_proba(X[test]) - want).max() > 1e-4


def test_v2_checkpoint_refuses_the_v1_shortcut_and_converts_on_the_command_line(
    official_v2_checkpoint, tmp_path
):
    X, y = load_wine(return_X_y=True)
    with pytest.raises(ValueError, match="official v2 classifier embeds every member"):
        TabICLClassifier(model_path=official_v2_checkpoint, official_shortcut=True).fit(X, y)
    out = tmp_path / "converted"
    main([str(official_v2_checkpoint), str(out)])
    saved = json.loads((out / "config.json").read_text())
    assert saved["target_aware"] and saved["feature_group"] == "same"
    a = TabICLClassifier(model_path=official_v2_checkpoint, n_estimators=4).fit(X[::2], y[::2])
    b = TabICLClassifier(model_path=out, n_estimators=4).fit(X[::2], y[::2])
    np.testing.assert_array_equal(a.predict_proba(X[1::2]), b.predict_proba(X[1::2]))


def test_latin_square_and_the_official_member_design():
    import random

    square = np.array(latin_square(6, random.Random(3)))
    assert square.shape == (6, 6)
    assert all(sorted(row) == list(range(6)) for row in square)
    assert all(sorted(col) == list(range(6)) for col in square.T)

    def key(members):
        return [(m.norm, tuple(m.features), m.shift) for m in members]

    members = official_members(12, 6, 3, ("none", "power"), "latin", True, 42)
    assert key(members) == key(official_members(12, 6, 3, ("none", "power"), "latin", True, 42))
    assert key(members) != key(official_members(12, 6, 3, ("none", "power"), "latin", True, 7))
    assert [m.norm for m in members] == ["none"] * 6 + ["power"] * 6
    # each (order, shift) pair is used with both normalisers, in the same sequence
    assert [k[1:] for k in key(members)[:6]] == [k[1:] for k in key(members)[6:]]
    short = official_members(20, 6, 3, ("none",), "latin", True, 42, shortcut=True)
    plain = official_members(20, 6, 3, ("none",), "latin", True, 42)
    n = len(plain)  # 6 orders x 3 shifts: 18 members, fewer than asked (as the official)
    assert n == len(short) == 18
    for batch in np.array_split(np.arange(n), -(-n // OFFICIAL_MEMBER_BATCH)):
        p0 = plain[batch[0]].features
        np.testing.assert_array_equal(short[batch[0]].features, p0)
        for i in batch[1:]:  # P0[Pi^-1[P0]]: the reference's order, mapped back
            np.testing.assert_array_equal(short[i].features, p0[np.argsort(plain[i].features)[p0]])


def test_dataframes_with_missing_categories_and_nullable_integers(official_v1_checkpoint):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 90
    y = rng.integers(0, 3, n)
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n) + y,
            "colour": pd.array(rng.choice(["red", "green", None], n), dtype="string"),
            "flag": pd.array(rng.choice([True, False, None], n), dtype="boolean"),
            "size": pd.Categorical(rng.choice(["S", "M", None], n)),
            "count": pd.array(
                np.where(rng.random(n) < 0.2, None, rng.integers(0, 5, n)), dtype="Int64"
            ),
        }
    )
    for path, mode in [(official_v1_checkpoint, "official"), (None, "lite")]:
        clf = TabICLClassifier(n_estimators=4, model_path=path).fit(frame[:60], y[:60])
        assert clf.preprocessing_ == mode
        assert clf.categorical_mask_.tolist() == [False, True, True, True, False]
        unseen = frame[60:].copy()
        unseen.loc[unseen.index[0], "colour"] = "purple"  # unseen category: no error
        proba = clf.predict_proba(unseen)
        assert proba.shape == (30, 3) and np.isfinite(proba).all()
    dates = frame.assign(when=pd.date_range("2020-01-01", periods=n))
    with pytest.raises(ValueError, match=r"unsupported dtype.*when"):
        TabICLClassifier(model_path=official_v1_checkpoint).fit(dates, y)


def test_official_preprocessing_drops_constant_columns_and_imputes_means(official_v1_checkpoint):
    X, y = load_wine(return_X_y=True)
    X = np.column_stack([X[:, :4], np.full(len(X), 7.0)])
    X[::5, 1] = np.nan
    clf = TabICLClassifier(model_path=official_v1_checkpoint, n_estimators=4).fit(X, y)
    assert clf.keep_.tolist() == [True] * 4 + [False]
    assert clf.train_tables_.shape == (2, len(X), 4)  # one table per normalization
    np.testing.assert_allclose(clf.impute_[1], np.nanmean(X[:, 1]))
    # every feature constant: the first is kept (as tabicl 2.x; 0.1.4 failed)
    constant = TabICLClassifier(model_path=official_v1_checkpoint, n_estimators=2)
    proba = constant.fit(np.ones((10, 2)), [0, 1] * 5).predict_proba(np.ones((3, 2)))
    assert constant.keep_.tolist() == [True, False] and np.isfinite(proba).all()
    with pytest.raises(ValueError, match=r"norm_methods must be .* preprocessing='lite'"):
        TabICLClassifier(norm_methods=("robust",)).fit(X, y)


def test_hierarchy_embeds_the_table_once_per_block(official_v1_checkpoint, monkeypatch):
    """> max_classes classes: the column and row stages run once per block of test rows,
    every tree node runs only the in-context stage on the representations."""
    ref = np.load(HERE / "v1_reference.npz")
    X, y = ref["classes25_X"], np.repeat(np.arange(25), 8)
    clf = TabICLClassifier(model_path=official_v1_checkpoint, n_estimators=2).fit(X, y)
    calls = {"represent": 0, "col": 0}
    represent, col_forward = clf.model_.represent, clf.model_.col.forward

    def counting_represent(*args, **kwargs):
        calls["represent"] += 1
        return represent(*args, **kwargs)

    def counting_col(*args, **kwargs):
        calls["col"] += 1
        return col_forward(*args, **kwargs)

    monkeypatch.setattr(clf.model_, "represent", counting_represent)
    monkeypatch.setattr(clf.model_.col, "forward", counting_col)
    clf.set_params(batch_size=16).predict_proba(X[:40])
    assert calls["represent"] == 3  # 40 rows in blocks of 16
    assert calls["col"] == 3  # the columns fit one chunk: one column pass per block
