"""The class tree: structure and the product rule along paths."""

import numpy as np
import pytest

from tabicl_lite import build_tree
from tabicl_lite.hierarchy import tree_log_proba


def _leaves(node):
    if not node.children:
        return [int(node.classes[0])]
    return [c for child in node.children for c in _leaves(child)]


def _max_fanout(node):
    return max([len(node.children)] + [_max_fanout(c) for c in node.children])


@pytest.mark.parametrize("n_classes", [2, 10, 11, 25, 100, 101, 1000])
def test_every_class_is_one_leaf_and_nodes_have_at_most_max_classes_children(n_classes):
    tree = build_tree(n_classes, 10)
    assert sorted(_leaves(tree)) == list(range(n_classes))
    assert _max_fanout(tree) <= 10


def test_more_classes_than_the_hierarchy_supports_is_refused():
    with pytest.raises(ValueError, match="at most max_classes"):
        build_tree(1001, 10)


def test_probabilities_multiply_along_the_path():
    """With a classifier that answers fixed group probabilities, class probabilities are
    the products along the path and sum to 1."""
    n_classes = 25
    tree = build_tree(n_classes, 10)
    y = np.repeat(np.arange(n_classes), 3)
    calls = []

    def classify(rows, groups, k):
        calls.append((rows, groups, k))
        p = np.arange(1, k + 1, dtype=float)
        return np.log(np.tile(p / p.sum(), (2, 1)))  # 2 test rows

    logp = tree_log_proba(tree, y, n_classes, classify)
    prob = np.exp(logp)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0)
    # root: 3 groups (9, 8, 8 classes); class 0 is child 0 of group 0
    root_p = np.array([1, 2, 3]) / 6
    first = np.arange(1, 10) / 45
    assert prob[0, 0] == pytest.approx(root_p[0] * first[0])
    # each internal node sees only the training rows of its classes, labelled by group
    root_rows, root_groups, root_k = calls[0]
    assert root_k == 3 and root_rows.size == y.size
    assert set(root_groups) == {0, 1, 2}
    for rows, groups, k in calls[1:]:
        assert rows.size == 3 * k and groups.max() == k - 1


def test_leading_axes_are_carried():
    tree = build_tree(12, 10)
    y = np.repeat(np.arange(12), 2)

    def classify(rows, groups, k):
        return np.full((4, 5, k), -np.log(k))  # 4 members, 5 test rows, uniform

    logp = tree_log_proba(tree, y, 12, classify)
    assert logp.shape == (4, 5, 12)
    np.testing.assert_allclose(np.exp(logp).sum(-1), 1.0)


@pytest.mark.parametrize("n_classes", [0, -3, 1])
def test_a_tree_needs_two_classes(n_classes):
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        build_tree(n_classes, 10)
