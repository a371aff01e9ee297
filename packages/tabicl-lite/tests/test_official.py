"""The official TabICL v1 checkpoints: conversion, the official preprocessing, parity.

Two oracles:
* the official network itself (``tabicl`` 2.x, a dev dependency, built with the v1
  settings, which compute the paper's v1 function: checked against 0.1.4 when the
  converter was written, max |logit diff| 1.1e-6 in float32), with random non-zero
  weights at the lite and the paper's size;
* the official v1 CLASSIFIER (``tabicl`` 0.1.4, which cannot be installed beside 2.x):
  its probabilities on four tables, recorded by ``official/make_v1_reference.py`` with a
  small random checkpoint stored beside it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from sklearn.datasets import load_breast_cancer, load_wine

from tabicl_lite import TabICLClassifier
from tabicl_lite.convert import from_official_checkpoint, main
from tabicl_lite.official import OFFICIAL_MEMBER_BATCH, latin_square, official_members

HERE = Path(__file__).parent / "official"
V1 = dict(
    col_affine=True,
    col_feature_group=False,
    col_target_aware=False,
    col_ssmax="none",
    icl_ssmax="none",
    row_rope_interleaved=True,
)
LITE = dict(
    embed_dim=32,
    col_num_blocks=2,
    col_nhead=2,
    col_num_inds=32,
    row_num_blocks=2,
    row_nhead=4,
    icl_num_blocks=4,
    icl_nhead=4,
)
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


@pytest.fixture(scope="module")
def official_v1_checkpoint(tmp_path_factory):
    """The stored small v1 network as an official ``.ckpt`` file (0.1.x config keys)."""
    config = json.loads((HERE / "v1_tiny.json").read_text())
    path = tmp_path_factory.mktemp("official") / "v1_tiny.ckpt"
    torch.save({"config": config, "state_dict": load_file(HERE / "v1_tiny.safetensors")}, path)
    return path


# ---------------------------------------------------------------- network parity
@pytest.mark.parametrize("size", ["lite", "paper"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_converted_network_computes_the_official_logits(size, dtype):
    official = pytest.importorskip("tabicl._model.tabicl")
    inference = pytest.importorskip("tabicl._model.inference_config")
    config = {**(LITE if size == "lite" else PAPER), **V1}
    net = official.TabICL(**config)
    _reference_script().randomize(net)
    net = net.to(dtype).eval()
    enc = net.icl_predictor.y_encoder  # the official casts one-hot labels to float32 only

    def one_hot_linear(y, enc=enc):
        one_hot = torch.nn.functional.one_hot(y.long(), enc.num_classes).to(enc.weight.dtype)
        return torch.nn.functional.linear(one_hot, enc.weight, enc.bias)

    enc.forward = one_hot_linear
    ours = from_official_checkpoint({"config": config, "state_dict": net.state_dict()}).to(dtype)
    assert not ours.config.standardize
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(2, 120, 7, generator=gen, dtype=dtype)
    y = torch.randint(0, 3, (2, 80), generator=gen)
    cfg = inference.InferenceConfig()
    cpu = {"use_amp": False, "device": torch.device("cpu")}
    cfg.update_from_dict({k: dict(cpu) for k in ("COL_CONFIG", "ROW_CONFIG", "ICL_CONFIG")})
    with torch.no_grad():
        want = net(X, y.to(dtype), return_logits=True, inference_config=cfg)
        got = ours(X, y)[..., :3]
    assert want.abs().max() > 0.1  # a network that computes something
    # float32: measured 1.2e-6 at both sizes; float64: 1.6e-8 (the official computes
    # RoPE angles in float32)
    tol = 2e-5 if dtype == torch.float32 else 1e-6
    torch.testing.assert_close(got, want, atol=tol, rtol=0)


def test_converter_refuses_v2_regression_and_other_architectures():
    config = {**LITE, **V1}
    with pytest.raises(ValueError, match="col_target_aware=True: a TabICL v2 setting"):
        from_official_checkpoint({"config": {**config, "col_target_aware": True}, "state_dict": {}})
    with pytest.raises(ValueError, match="regression"):
        from_official_checkpoint({"config": {**config, "max_classes": 0}, "state_dict": {}})
    with pytest.raises(ValueError, match="unknown keys \\['colour'\\]"):
        from_official_checkpoint({"config": {**config, "colour": 1}, "state_dict": {}})
    state = load_file(HERE / "v1_tiny.safetensors")
    small = json.loads((HERE / "v1_tiny.json").read_text())
    broken = {k: v for k, v in state.items() if k != "icl_predictor.ln.weight"}
    with pytest.raises(ValueError, match=r"no tensor 'icl_predictor\.ln\.weight'"):
        from_official_checkpoint({"config": small, "state_dict": broken})
    with pytest.raises(ValueError, match=r"does not have .*extra"):
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
    with pytest.raises(ValueError, match="every feature of X is constant"):
        TabICLClassifier(model_path=official_v1_checkpoint).fit(np.ones((10, 2)), [0, 1] * 5)
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
