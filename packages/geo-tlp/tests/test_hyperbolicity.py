"""Gromov delta oracles: trees and complete graphs are 0-hyperbolic, the 4-cycle is
1-hyperbolic; sampling gives a lower bound; per-node values separate the regions."""

import networkx as nx
import numpy as np
import pytest

from geo_tlp import gromov_delta, hyperbolicity_sequence, local_hyperbolicity


def _dist(graph):
    return np.asarray(nx.floyd_warshall_numpy(graph))


@pytest.mark.parametrize(
    "graph", [nx.balanced_tree(2, 4), nx.random_labeled_tree(30, seed=1), nx.path_graph(9)]
)
def test_tree_metrics_have_delta_zero(graph):
    assert gromov_delta(_dist(graph)) == 0.0


def test_complete_graph_has_delta_zero():
    assert gromov_delta(_dist(nx.complete_graph(7))) == 0.0


def test_four_cycle_has_delta_one_and_relative_one():
    D = _dist(nx.cycle_graph(4))
    assert gromov_delta(D) == 1.0
    assert gromov_delta(D, relative=True) == 1.0  # 2 * 1 / diameter 2


def test_grid_delta_matches_the_closed_form():
    # the n x n grid (L1 metric on the lattice) has four-point delta n - 1
    assert gromov_delta(_dist(nx.grid_2d_graph(4, 4))) == 3.0


def test_sampled_delta_is_a_lower_bound_and_exact_when_the_sample_covers_all():
    D = _dist(nx.watts_strogatz_graph(20, 4, 0.3, seed=0))
    exact = gromov_delta(D)
    assert gromov_delta(D, samples=50, seed=3) <= exact
    assert gromov_delta(D, samples=10**6) == exact


def test_bad_distance_matrices_are_refused():
    with pytest.raises(ValueError, match="symmetric"):
        gromov_delta(np.array([[0, 1, 2, 3], [2, 0, 1, 1], [2, 1, 0, 1], [3, 1, 1, 0.0]]))
    with pytest.raises(ValueError, match="square"):
        gromov_delta(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        gromov_delta(np.full((4, 4), np.nan))


def test_local_hyperbolicity_is_zero_on_a_tree_and_high_on_a_grid():
    tree = nx.balanced_tree(3, 3)
    grid = nx.convert_node_labels_to_integers(nx.grid_2d_graph(6, 6))
    d_tree = local_hyperbolicity(np.array(tree.edges()).T, tree.number_of_nodes())
    d_grid = local_hyperbolicity(np.array(grid.edges()).T, 36)
    assert np.nanmax(d_tree) == 0.0
    assert np.nanmin(d_grid) > 0.3
    assert ((d_grid >= 0) & (d_grid <= 1)).all()


def test_isolated_nodes_are_undefined_and_filled_causally():
    e0 = np.array([[0, 1, 2], [1, 2, 3]])  # a path 0-1-2-3; node 4 isolated
    e1 = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])  # the 4-cycle
    assert np.isnan(local_hyperbolicity(e0, 5)[4])
    seq = hyperbolicity_sequence([e0, e1, e0], 5)
    assert seq.shape == (3, 5) and not np.isnan(seq).any()
    assert seq[1, 0] == 1.0  # the cycle
    # node 4 is never defined: the snapshot's mean; others keep values only from the past
    assert seq[0, 4] == pytest.approx(np.nanmean(local_hyperbolicity(e0, 5)))
    np.testing.assert_array_equal(hyperbolicity_sequence([e0, e1], 5), seq[:2])
