"""Loaders: timestamped edges bucketed into snapshots, csv with string ids, TemporalData."""

import numpy as np
import pytest
import torch
from torch_geometric.data import TemporalData

from geo_tlp import from_temporal_data, load_edge_csv, mixed_geometry_graph, snapshots_from_edges


def test_equal_time_and_equal_count_buckets():
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    time = np.array([0.0, 1.0, 2.0, 10.0])
    by_time = snapshots_from_edges(src, dst, time, n_snapshots=2)
    assert [s.edge_index.shape[1] for s in by_time] == [6, 2]  # undirected: both directions
    by_count = snapshots_from_edges(src, dst, time, n_snapshots=2, bucket="count")
    assert [s.edge_index.shape[1] for s in by_count] == [4, 4]
    assert all(s.num_nodes == 4 for s in by_count)


def test_csv_with_string_ids(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("u,v,when\nalice,bob,1\nbob,carol,2\ncarol,alice,3\n", encoding="utf-8")
    snaps, ids = load_edge_csv(path, n_snapshots=3, src="u", dst="v", time="when")
    assert ids == ["alice", "bob", "carol"]
    assert torch.equal(snaps[2].edge_index, torch.tensor([[0, 2], [2, 0]]))
    with pytest.raises(ValueError, match=r"no column\(s\) \['t'\]"):
        load_edge_csv(path, n_snapshots=3, src="u", dst="v")
    path.write_text("src,dst,t\na,b,soon\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_edge_csv(path, n_snapshots=1)


def test_csv_that_is_not_utf8_is_named_with_the_encoding_to_pass(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_bytes("src,dst,t\nZ\u00fcrich,Gen\u00e8ve,1\nGen\u00e8ve,Bern,2\n".encode("latin-1"))
    with pytest.raises(
        ValueError, match=r"edges\.csv is not valid utf-8 text .*encoding='latin-1'"
    ):
        load_edge_csv(path, n_snapshots=2)
    snaps, ids = load_edge_csv(path, n_snapshots=2, encoding="latin-1")
    assert ids == ["Z\u00fcrich", "Gen\u00e8ve", "Bern"] and len(snaps) == 2


def test_temporal_data_is_bucketed():
    data = TemporalData(
        src=torch.tensor([0, 1, 2]), dst=torch.tensor([1, 2, 0]), t=torch.tensor([0, 5, 9])
    )
    snaps = from_temporal_data(data, n_snapshots=3)
    assert [s.edge_index.shape[1] for s in snaps] == [2, 2, 2]


def test_mixed_geometry_graph_structure():
    g = mixed_geometry_graph(80, 5, seed=1)
    assert len(g.snapshots) == 5 and g.region.shape == (80,)
    tree = np.flatnonzero(g.region == "tree")
    ei = g.latent
    inside = np.isin(ei[0].numpy(), tree) & np.isin(ei[1].numpy(), tree)
    assert inside.sum() // 2 == len(tree) - 1  # the tree region is a tree
    grows = [s.edge_index.shape[1] for s in g.snapshots]
    assert grows[-1] > grows[0]
