"""Hierarchical classification for more classes than the network's ``max_classes``.

The classes are split into a tree whose nodes have at most ``max_classes`` children; the
network classifies a test row among the children of each internal node, using as context
only the training rows whose class lies under that node, and the class probability is the
product of the probabilities along its path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from icml25_core import check_scalar

MAX_DEPTH = 3


@dataclass
class Node:
    """A node of the class tree: the classes under it and its children (empty for a leaf)."""

    classes: np.ndarray
    children: list[Node] = field(default_factory=list)


def build_tree(n_classes: int, max_classes: int) -> Node:
    """Split ``range(n_classes)`` into a tree of nodes with at most ``max_classes`` children.

    A node with at most ``max_classes`` classes has one leaf child per class; a larger node
    is split into ``min(max_classes, ceil(n / max_classes))`` contiguous groups of nearly
    equal size.

    Raises
    ------
    ValueError
        If ``n_classes`` needs more than :data:`MAX_DEPTH` levels (``max_classes ** 3``).
    """
    check_scalar(n_classes, "n_classes", low=2, integer=True)
    check_scalar(max_classes, "max_classes", low=2, integer=True)
    if n_classes > max_classes**MAX_DEPTH:
        raise ValueError(
            f"y has {n_classes} classes; the hierarchy supports at most max_classes ** "
            f"{MAX_DEPTH} = {max_classes**MAX_DEPTH}"
        )
    return _split(np.arange(n_classes), max_classes)


def _split(classes: np.ndarray, max_classes: int) -> Node:
    if classes.size <= max_classes:
        return Node(classes, [Node(classes[i : i + 1]) for i in range(classes.size)])
    n_groups = min(max_classes, math.ceil(classes.size / max_classes))
    return Node(classes, [_split(g, max_classes) for g in np.array_split(classes, n_groups)])


def tree_log_proba(
    node: Node,
    y: np.ndarray,
    n_classes: int,
    classify: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
) -> np.ndarray:
    """Log-probabilities of all classes for the test rows by descending the tree.

    Parameters
    ----------
    node : Node
        Root of :func:`build_tree`.
    y : ndarray, shape (n_train,)
        Encoded training labels.
    n_classes : int
    classify : callable
        ``classify(train_index, labels, k) -> (..., n_test, k)`` log-probabilities of the
        test rows over ``k`` groups, given the training rows ``train_index`` labelled
        ``labels`` in ``[0, k)`` (leading axes, e.g. ensemble members, are carried along).

    Returns
    -------
    ndarray, shape (..., n_test, n_classes)
    """
    out = None
    stack = [(node, 0.0)]
    while stack:
        current, prefix = stack.pop()
        if not current.children:
            continue
        group_of = np.full(n_classes, -1)
        for g, child in enumerate(current.children):
            group_of[child.classes] = g
        index = np.flatnonzero(group_of[y] >= 0)
        logp = classify(index, group_of[y[index]], len(current.children))
        if out is None:
            out = np.zeros((*logp.shape[:-1], n_classes))
        for g, child in enumerate(current.children):
            here = prefix + logp[..., g]
            if child.children:
                stack.append((child, here))
            else:
                out[..., child.classes[0]] = here
    return out
