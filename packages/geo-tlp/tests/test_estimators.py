"""Estimators: defaults work, predictions are causal, embeddings are permutation
equivariant, saves round-trip, bad input is refused by name."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from geo_tlp import EvolveGCN, GeoTLP, GeoTLPNet, StaticGAE, evaluate

FAST = {"epochs": 15, "patience": 15, "hidden": 8, "dim": 4, "device": "cpu"}


def test_defaults_learn_the_easy_graph(small_graph):
    result = evaluate(GeoTLP(device="cpu"), small_graph.snapshots, groups=small_graph.region)
    assert result["auc"] > 0.7  # measured 0.747 (1 and 2 threads alike)
    assert {"ap", "tree/auc", "geometric/auc"} <= set(result)


@pytest.mark.parametrize(
    "model",
    [
        GeoTLP(routing="hard", **FAST),
        GeoTLP(routing="euclidean", **FAST),
        EvolveGCN(**FAST),
        StaticGAE(**FAST),
    ],
    ids=["hard", "euclidean", "evolvegcn", "gae"],
)
def test_every_model_fits_and_scores(small_graph, model):
    model.fit(small_graph.snapshots[:-1])
    scores = model.score(small_graph.snapshots[-1])
    assert 0 <= scores["auc"] <= 1 and scores["n_new"] >= 0
    # the kept weights are the best validation epoch's, not the last or lowest-loss one
    val = [entry["val_auc"] for entry in model.log_]
    assert model.best_val_auc_ == max(val) == val[model.best_epoch_]


def test_routing_follows_local_hyperbolicity(small_graph):
    model = GeoTLP(**FAST).fit(small_graph.snapshots)
    alpha = model.routing_weights()
    assert (
        alpha[small_graph.region == "tree"].mean()
        > alpha[small_graph.region == "geometric"].mean() + 0.2
    )


def _edit(snapshots, t, seed=5):
    g = torch.Generator().manual_seed(seed)
    edited = list(snapshots)
    n = snapshots[0].num_nodes
    extra = torch.randint(0, n, (2, 40), generator=g)
    ei = torch.cat([snapshots[t].edge_index, extra, extra.flip(0)], dim=1)
    edited[t] = Data(edge_index=ei, num_nodes=n)
    return edited


def test_predictions_for_t_ignore_snapshot_t_and_later(small_graph):
    snaps = small_graph.snapshots
    model = GeoTLP(**FAST).fit(snaps[:4])
    pairs = torch.randint(0, 60, (2, 30), generator=torch.Generator().manual_seed(0))
    base = model.predict_links(3, pairs, history=snaps)
    for t in (3, 4):  # editing snapshot t or t+1 leaves scores for t unchanged
        np.testing.assert_array_equal(model.predict_links(3, pairs, history=_edit(snaps, t)), base)
    assert not np.allclose(model.predict_links(3, pairs, history=_edit(snaps, 2)), base)


def test_node_embeddings_are_permutation_equivariant():
    torch.manual_seed(0)
    n = 15
    net = GeoTLPNet(n, in_channels=3, hidden=6, dim=4).double().eval()
    x = torch.randn(n, 3, dtype=torch.float64)
    ei = torch.randint(0, n, (2, 40))
    ei = torch.cat([ei, ei.flip(0)], 1)
    delta = torch.rand(n, dtype=torch.float64)
    perm = torch.randperm(n)
    inv = torch.argsort(perm)  # node i is called inv[i] after relabelling
    with torch.no_grad():
        a = net.embeddings(net.step(net.init_state(), ei, delta, x))
        b = net.embeddings(net.step(net.init_state(), inv[ei], delta[perm], x[perm]))
    for key in ("e", "p", "alpha"):
        torch.testing.assert_close(b[key], a[key][perm])


def test_save_and_load_round_trip(small_graph, tmp_path):
    model = GeoTLP(**FAST).fit(small_graph.snapshots[:-1])
    pairs = np.array([[0, 1, 2, 40], [3, 4, 50, 55]])
    path = model.save_pretrained(tmp_path / "model")
    loaded = GeoTLP.from_pretrained(path)
    np.testing.assert_allclose(
        loaded.predict_links(9, pairs), model.predict_links(9, pairs), rtol=1e-6
    )
    assert loaded.get_params() == model.get_params()
    with pytest.raises(FileExistsError, match="overwrite"):
        model.save_pretrained(path)
    with pytest.raises(ValueError, match="not a EvolveGCN"):
        EvolveGCN.from_pretrained(path)
    (path / "history.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"history\.safetensors"):
        GeoTLP.from_pretrained(path)


def test_network_from_pretrained_of_a_tiny_config(tmp_path):
    net = GeoTLPNet(7, hidden=4, dim=2, routing="soft")
    net.save_pretrained(tmp_path / "net")
    again = GeoTLPNet.from_pretrained(tmp_path / "net")
    for (k, v), (_, w) in zip(net.state_dict().items(), again.state_dict().items(), strict=True):
        torch.testing.assert_close(v, w, msg=k)


def test_bad_input_is_refused_by_name(small_graph):
    snaps = small_graph.snapshots
    model = GeoTLP(**FAST)
    with pytest.raises(ValueError, match="different node sets"):
        model.fit([snaps[0], Data(edge_index=snaps[1].edge_index, num_nodes=80), snaps[2]])
    with pytest.raises(ValueError, match=r"snapshots\[1\] holds only self-loops"):
        model.fit([snaps[0], torch.tensor([[1, 2], [1, 2]]), snaps[2]])
    with pytest.raises(ValueError, match=r"snapshots\[2\] is empty"):
        model.fit([snaps[0], snaps[1], torch.zeros(2, 0, dtype=torch.long)])
    with pytest.raises(ValueError, match="at least 3 snapshots"):
        model.fit(snaps[:2])
    with pytest.raises(ValueError, match="routing"):
        GeoTLP(routing="spherical").fit(snaps)
    with pytest.raises(ValueError, match="x must have shape"):
        model.fit(snaps, x=np.zeros((3, 2)))
    with pytest.raises(RuntimeError, match="not fitted"):
        model.predict_links(1, [(0, 1)])
    model.fit(snaps[:3])
    with pytest.raises(ValueError, match="pairs must hold node ids"):
        model.predict_links(1, [(0, 600)])
    with pytest.raises(ValueError, match="pairs must be an integer array"):
        model.predict_links(1, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"pairs given as a list must be a list of \(u, v\) pairs"):
        model.predict_links(1, [[0, 1, 2], [3, 4, 5]])
    with pytest.raises(ValueError, match=r"t must be <= 2, got 99"):
        model.routing_weights(99)
    with pytest.raises(ValueError, match="threshold must be finite"):
        GeoTLP(threshold=float("nan"), **FAST).fit(snaps[:3])


def test_a_list_of_pairs_is_read_as_pairs_and_an_array_as_edge_index(small_graph):
    """The README's predict_links(3, [[0, 1], [2, 50]]) scores (0, 1) and (2, 50)."""
    model = GeoTLP(**FAST).fit(small_graph.snapshots[:3])
    as_list = model.predict_links(3, [[0, 1], [2, 50]])
    np.testing.assert_array_equal(as_list, model.predict_links(3, np.array([[0, 2], [1, 50]])))
    np.testing.assert_array_equal(as_list, model.predict_links(3, [(0, 1), (2, 50)]))


def test_estimator_json_that_disagrees_with_the_network_is_named(small_graph, tmp_path):
    import json

    path = GeoTLP(**FAST).fit(small_graph.snapshots[:3]).save_pretrained(tmp_path / "m")
    meta = json.loads((path / "estimator.json").read_text())
    meta["params"]["hidden"] = 16
    (path / "estimator.json").write_text(json.dumps(meta))
    with pytest.raises(
        ValueError,
        match=r"estimator\.json disagrees with the saved network: hidden=16 \(the network has 8\)",
    ):
        GeoTLP.from_pretrained(path)


def test_snapshots_with_a_node_mapping_are_aligned(small_graph):
    snap = small_graph.snapshots[0]
    keep = torch.unique(snap.edge_index)
    local = torch.searchsorted(keep, snap.edge_index)
    mapped = Data(edge_index=local, num_nodes=len(keep), n_id=keep)
    from geo_tlp import check_snapshots

    (a, b), n = check_snapshots([snap, mapped])
    assert n == 60 and torch.equal(a, b)
