"""The network: oracles for order invariance, no leakage, standardization, rotary position."""

import numpy as np
import pytest
import torch

from tabicl_lite import TabICL, TabICLConfig
from tabicl_lite.layers import RotaryEmbedding
from tabicl_lite.model import standardize

from .conftest import TINY


def lite_config(generation: int = 1, **fields) -> TabICLConfig:
    """The lite sizes as a v1 network, or with every TabICL v2 mechanism."""
    lite = TabICLConfig.lite()
    if generation == 1:
        return TabICLConfig(**{**lite.__dict__, **fields})
    sizes = ("embed_dim", "col_blocks", "col_heads", "n_inducing", "row_blocks", "row_heads")
    sizes += ("icl_blocks", "icl_heads")
    return TabICLConfig.v2(**{k: getattr(lite, k) for k in sizes}, **fields)


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def model(request):
    torch.manual_seed(0)
    return TabICL(lite_config(request.param, standardize=True)).double().eval()


@pytest.fixture
def table():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(2, 60, 7, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (2, 40), generator=g)
    return X, y


@torch.no_grad()
def test_exact_invariance_to_training_row_order(model, table):
    X, y = table
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(2))
    Xp = X.clone()
    Xp[:, :40] = X[:, perm]
    a = model(X, y, n_classes=4)[..., :4]
    b = model(Xp, y[:, perm], n_classes=4)[..., :4]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@torch.no_grad()
def test_changing_a_test_row_leaves_other_test_rows_unchanged(model, table):
    X, y = table
    a = model(X, y, n_classes=4)[..., :4]
    Xc = X.clone()
    Xc[:, 55] = 100 * torch.randn(2, 7, dtype=torch.float64)
    b = model(Xc, y, n_classes=4)[..., :4]
    keep = [i for i in range(20) if i != 15]
    assert torch.equal(a[:, keep], b[:, keep])
    assert not torch.allclose(a[:, 15], b[:, 15])  # the changed row itself does move


@torch.no_grad()
def test_absent_classes_get_minus_infinity(model, table):
    X, y = table
    labels = torch.stack([y[0] % 3, y[1] % 2])  # each table's labels within its classes
    logits = model(X, labels, n_classes=torch.tensor([3, 2]))
    assert torch.isinf(logits[0, :, 3:]).all() and torch.isfinite(logits[0, :, :3]).all()
    assert torch.isinf(logits[1, :, 2:]).all() and torch.isfinite(logits[1, :, :2]).all()


def test_standardize_matches_numpy_with_missing_values():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, (1, 50, 4))
    X[0, rng.random((50, 4)) < 0.1] = np.nan
    Z = standardize(torch.from_numpy(X), 30, clip_z=1e9).numpy()
    mean = np.nanmean(X[0, :30], axis=0)
    std = np.nanstd(X[0, :30], axis=0, ddof=1)
    expected = np.nan_to_num((X[0] - mean) / (std + 1e-6))
    np.testing.assert_allclose(Z[0], expected, rtol=1e-10, atol=1e-12)
    assert np.abs(standardize(torch.from_numpy(X * 1e3), 30, clip_z=4.0).numpy()).max() <= 4.0


def test_rotary_embedding_depends_on_relative_position_only():
    rope = RotaryEmbedding(8, base=100.0)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g), torch.randn(8, generator=g)
    seq_q, seq_k = q.expand(10, 8), k.expand(10, 8)
    rq, rk = rope(seq_q), rope(seq_k)
    dots = rq @ rk.T  # (10, 10): <R_i q, R_j k> depends on i - j only
    torch.testing.assert_close(dots[3, 1], dots[7, 5])
    torch.testing.assert_close(dots[0, 4], dots[5, 9])
    torch.testing.assert_close(rq.norm(dim=1), seq_q.norm(dim=1))


@torch.no_grad()
def test_output_does_not_depend_on_the_number_of_features_padding(model):
    """A fixed-width row vector whatever H is: tables with 3 and 30 features both work."""
    for h in (1, 3, 30):
        out = model(torch.randn(1, 25, h, dtype=torch.float64), torch.randint(0, 2, (1, 20)))
        assert out.shape == (1, 5, 10)


def test_save_load_round_trip_gives_identical_logits(tmp_path, table):
    torch.manual_seed(3)
    model = TabICL(TINY).eval()
    X, y = (t.float() if t.is_floating_point() else t for t in table)
    path = model.save_pretrained(tmp_path / "m")
    loaded = TabICL.from_pretrained(path)
    assert loaded.config == TINY
    with torch.no_grad():
        assert torch.equal(model(X, y), loaded(X, y))


@pytest.mark.parametrize("at", ["between-files", "between-renames"])
def test_a_save_killed_part_way_leaves_the_previous_checkpoint(tmp_path, table, at):
    """SIGKILL while ``save_pretrained(overwrite=True)`` replaces a checkpoint (after its
    first file, or between the two renames): the previous files survive byte for byte
    and give the same logits."""
    from icml25_core.testing import kill_during_save

    torch.manual_seed(3)
    model = TabICL(TINY).eval()
    path = model.save_pretrained(tmp_path / "m")
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    script = (
        "import torch\nfrom tabicl_lite import TabICL\n"
        f"m = TabICL.from_pretrained({str(path)!r})\n"
        "with torch.no_grad():\n"
        "    for p in m.parameters():\n"
        "        p.add_(1.0)\n"
        f"m.save_pretrained({str(path)!r}, overwrite=True)\n"
    )
    kill_during_save(script, path, at=at)
    loaded = TabICL.from_pretrained(path).eval()
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    X, y = (t.float() if t.is_floating_point() else t for t in table)
    with torch.no_grad():
        assert torch.equal(model(X, y), loaded(X, y))


def test_bad_inputs_raise_clear_errors(tmp_path):
    model = TabICL(TINY)
    with pytest.raises(ValueError, match="n_train"):
        model(torch.randn(1, 5, 2), torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="X must be"):
        model(torch.randn(5, 2), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(
        FileNotFoundError, match=r"folder without config\.json and model\.safetensors"
    ):
        TabICL.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="row_heads"):
        TabICLConfig(embed_dim=12, row_heads=4)


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [
        ("col_heads", 0, ValueError, "col_heads must be >= 1"),
        ("icl_blocks", -1, ValueError, "icl_blocks must be >= 1"),
        ("clip_z", -1.0, ValueError, "clip_z must be > 0"),
        ("max_classes", 1, ValueError, "max_classes must be >= 2"),
        ("col_heads", 3, ValueError, r"embed_dim \(32\) must be a multiple of col_heads"),
        ("icl_heads", 3, ValueError, r"icl_dim \(128\) must be a multiple of icl_heads"),
        ("row_blocks", 2.5, TypeError, "row_blocks must be an integer"),
        ("standardize", "yes", TypeError, "standardize must be True or False"),
    ],
)
def test_a_config_a_network_cannot_have_is_refused_naming_the_field(field, value, error, match):
    # also what a hand-edited checkpoint config.json meets on load
    with pytest.raises(error, match=match):
        TabICLConfig(**{**TabICLConfig.lite().__dict__, field: value})


def test_the_network_called_directly_checks_its_inputs():
    model = TabICL(TINY).eval()
    X, y = torch.randn(1, 8, 3), torch.zeros(1, 5, dtype=torch.long)
    y[0, 0] = 1
    cases = [
        (lambda: model(X.double(), y), TypeError, "X must have the model's dtype torch.float32"),
        (lambda: model(X.masked_fill(X > 1, float("inf")), y), ValueError, "infinite"),
        (lambda: model(X, y.float()), TypeError, "y_train must hold integer class labels"),
        (lambda: model(X, y + TINY.max_classes), ValueError, r"y_train must hold labels in \[0"),
        (lambda: model(X, y - 2), ValueError, r"y_train must hold labels in \[0"),
        (lambda: model(X, y, n_classes=1), ValueError, r"n_classes must be integers in \[2"),
        (lambda: model(X, y + 1, n_classes=2), ValueError, "labels in"),  # label 2 of 2
        (lambda: model(X, y, n_classes=TINY.max_classes + 1), ValueError, "n_classes"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
    with torch.no_grad():  # NaN is a missing value when the model standardises
        assert torch.isfinite(model(X.masked_fill(X > 1, float("nan")), y, 2)[..., :2]).all()


@torch.no_grad()
def test_chunked_column_and_row_stages_equal_one_pass(table):
    torch.manual_seed(4)
    X, y = table
    whole = TabICL(TabICLConfig.lite(), chunk_cells=10**9).double().eval()
    chunked = TabICL(TabICLConfig.lite(), chunk_cells=50).double().eval()
    chunked.load_state_dict(whole.state_dict())
    torch.testing.assert_close(chunked(X, y, 4), whole(X, y, 4), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("generation", [1, 2])
@pytest.mark.parametrize("standardize", [True, False])
@pytest.mark.parametrize("keys_values", [True, False])
@torch.no_grad()
def test_a_cached_context_gives_the_full_forward(table, standardize, keys_values, generation):
    """forward_context(test rows, context(training rows)) is forward(all rows): the
    training rows never read a test row, so running them once is exact (float64, chunked
    column and row stages included)."""
    X, y = table
    if standardize:
        X = X.clone()
        X[0, 3, 2] = X[1, 50, 4] = float("nan")  # missing in a training and a test row
    torch.manual_seed(5)
    model = TabICL(lite_config(generation, standardize=standardize), chunk_cells=90)
    model = model.double().eval()
    context = model.context(X[:, :40], y, keys_values=keys_values)
    assert (context.keys_values is not None) == keys_values
    cached = model.forward_context(X[:, 40:], context, 4)
    torch.testing.assert_close(cached, model(X, y, 4), rtol=1e-12, atol=1e-12)
    # test rows one at a time against the same context: the same logits
    alone = torch.cat(
        [model.forward_context(X[:, 40 + i : 41 + i], context, 4) for i in range(3)], 1
    )
    torch.testing.assert_close(alone, cached[:, :3], rtol=1e-12, atol=1e-12)
    rows = model.represent_context(X[:, 40:], context)
    full = model.represent(X, 40, y_train=y)
    torch.testing.assert_close(rows, full[:, 40:], rtol=1e-12, atol=1e-12)


@torch.no_grad()
def test_the_context_holds_what_its_docstring_says(model, table):
    X, y = table
    full, light = model.context(X[:, :40], y), model.context(X[:, :40], y, keys_values=False)
    cfg = model.config
    assert [tuple(s.shape) for s in full.summaries] == [
        (2, 7, 1, cfg.n_inducing, cfg.embed_dim)
    ] * 2
    assert full.rows.shape == (2, 40, cfg.icl_dim) and full.n_train == 40
    kv_numbers = 2 * cfg.icl_blocks * 2 * 40 * cfg.icl_dim  # 2 tables
    assert full.nbytes - light.nbytes == kv_numbers * 8  # float64
    with pytest.raises(ValueError, match=r"X must be \(B, T, H\) = \(2, T, 7\)"):
        model.forward_context(X[:, 40:, :5], full)
    with pytest.raises(ValueError, match="X_train must be"):
        model.context(X[:, :40], y[:, :30])


@torch.no_grad()
def test_views_share_each_tables_column_embedding_and_give_the_stacked_logits(model):
    """forward(X, views=(tables, columns)) equals forward on the stacked views (column
    orders, a repeated column, a subset), with and without a context; the column stage
    of a v1 network runs on the tables, not on the views."""
    g = torch.Generator().manual_seed(7)
    X = torch.randn(2, 50, 6, generator=g, dtype=torch.float64)
    X[0, 5, 1] = float("nan")
    tables = torch.tensor([0, 0, 1, 1, 0])
    columns = torch.stack([torch.randperm(6, generator=g) for _ in range(5)])
    columns[4] = torch.tensor([0, 0, 3, 5, 2, 1])
    y = torch.randint(0, 3, (5, 35), generator=g)
    stacked = torch.stack([X[t][:, c] for t, c in zip(tables, columns, strict=True)])
    expected = model(stacked, y, 3)
    seen = []
    model.col.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[0]))
    views = (tables, columns)
    torch.testing.assert_close(model(X, y, 3, views=views), expected, rtol=1e-12, atol=1e-12)
    # v1: the two tables, not the five views; v2: the column stage depends on the order
    # (feature groups) and the labels (target-aware), so every view is embedded
    assert set(seen) == ({2} if model.config.generation == 1 else {5})
    for keys_values in (True, False):
        context = model.context(X[:, :35], y, keys_values=keys_values, views=views)
        cached = model.forward_context(X[:, 35:], context, 3)
        torch.testing.assert_close(cached, expected, rtol=1e-12, atol=1e-12)
    subset = (tables[:2], columns[:2, :4])
    torch.testing.assert_close(
        model(X, y[:2], 3, views=subset),
        model(stacked[:2, :, :4], y[:2], 3),
        rtol=1e-12,
        atol=1e-12,
    )
    with pytest.raises(ValueError, match=r"views' columns must be int64 indices in \[0, 6\)"):
        model(X, y, 3, views=(tables, columns + 6))
    with pytest.raises(ValueError, match=r"views' tables must be int64 indices in \[0, 2\)"):
        model(X, y, 3, views=(tables + 1, columns))


@pytest.mark.parametrize("standardize", [True, False])
@torch.no_grad()
def test_v2_context_with_more_classes_than_max_classes(standardize):
    """A target-aware network with 25 classes (two mixed-radix digits): the context keeps
    one inducing summary per digit and represent_context equals represent; the labels
    reach the column stage (other labels, other representations)."""
    torch.manual_seed(3)
    model = TabICL(lite_config(2, standardize=standardize), chunk_cells=200).double().eval()
    g = torch.Generator().manual_seed(8)
    X = torch.randn(2, 90, 5, generator=g, dtype=torch.float64)
    y = torch.arange(75).repeat(2, 1) % 25
    context = model.context(X[:, :75], y, keys_values=False)
    assert context.summaries[0].shape[:3] == (2, 5, 2)
    rows = model.represent_context(X[:, 75:], context)
    full = model.represent(X, 75, y_train=y)
    torch.testing.assert_close(rows, full[:, 75:], rtol=1e-12, atol=1e-12)
    assert (model.represent(X, 75, y_train=y.flip(1)) - full).abs().max() > 1e-3
    with pytest.raises(ValueError, match="y_train is required: the model's column stage"):
        model.represent(X, 75)
    with pytest.raises(TypeError, match="integer class labels"):
        model.represent(X, 75, y_train=y.double())


def test_v2_config_refuses_what_is_not_implemented():
    with pytest.raises(ValueError, match="feature_group must be one of"):
        TabICLConfig.v2(feature_group="valid")
    with pytest.raises(ValueError, match="col_ssmax must be one of"):
        TabICLConfig.v2(col_ssmax="ssmax")
    with pytest.raises(ValueError, match="col_affine=True needs feature_group='none'"):
        TabICLConfig.v2(col_affine=True)
    with pytest.raises(TypeError, match="target_aware must be True or False"):
        TabICLConfig.v2(target_aware=1)
    assert TabICLConfig().generation == 1 and TabICLConfig.v2().generation == 2
