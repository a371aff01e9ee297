"""The evaluation protocol of HTGN-style temporal link prediction.

The last ``n_test`` snapshots are the test period. A model is fitted on the snapshots
before it (the last of those is its validation snapshot, see
:class:`~geo_tlp.estimators.TemporalLinkPredictor`), and each test snapshot's edges are
scored from the state after the last observed snapshot, against as many negative pairs
sampled with PyG's :func:`~torch_geometric.utils.negative_sampling`. *New* links are
test edges absent from every observed snapshot (``new_links="unseen"``) or from the last
one only (``"previous"``, HTGN's definition). Metrics: ROC AUC and average precision
(scikit-learn).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from icml25_core import check_choice, check_scalar

from .data import check_snapshots

__all__ = ["evaluate", "group_negatives", "link_metrics", "seeded", "undirected_pairs"]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch and Python's ``random`` (PyG's negative sampling draws from it) inside
    the block, and restore both generators' states afterwards."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)


def undirected_pairs(edge_index: torch.Tensor) -> torch.Tensor:
    """Each undirected edge once (``i < j``), shape (2, E/2) for a symmetric edge list."""
    return edge_index[:, edge_index[0] < edge_index[1]]


def _keys(pairs: torch.Tensor, n: int) -> np.ndarray:
    i, j = pairs.cpu().numpy()
    return np.minimum(i, j) * n + np.maximum(i, j)


def link_metrics(pos: np.ndarray, neg: np.ndarray) -> dict[str, float]:
    """ROC AUC and average precision of positive vs negative scores."""
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("link_metrics needs at least one positive and one negative score")
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
        raise ValueError("scores must be finite; the model produced NaN or inf")
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    s = np.r_[pos, neg]
    return {"auc": float(roc_auc_score(y, s)), "ap": float(average_precision_score(y, s))}


def group_negatives(
    edge_index: torch.Tensor, members: np.ndarray, count: int, *, seed: int = 0
) -> torch.Tensor:
    """``count`` node pairs drawn uniformly among non-edges with both ends in ``members``.

    Parameters
    ----------
    edge_index : torch.Tensor, shape (2, E)
        The edges to avoid.
    members : numpy.ndarray of int
        The group's node ids (at least 2).
    count : int
        Number of pairs.

    Returns
    -------
    torch.Tensor, shape (2, count)
    """
    members = np.asarray(members, dtype=np.int64)
    if len(members) < 2:
        raise ValueError("members must hold at least 2 nodes")
    n = int(max(int(edge_index.max()) if edge_index.numel() else 0, members.max())) + 1
    taken = set(_keys(edge_index, n).tolist())
    rng = np.random.default_rng(seed)
    out: list[tuple[int, int]] = []
    for _ in range(100):
        if len(out) >= count:
            break
        a = rng.choice(members, size=2 * count)
        b = rng.choice(members, size=2 * count)
        for i, j in zip(a.tolist(), b.tolist(), strict=True):
            key = min(i, j) * n + max(i, j)
            if i != j and key not in taken:
                out.append((i, j))
                if len(out) == count:
                    break
    if len(out) < count:
        raise ValueError("the group is too dense to draw that many negative pairs")
    return torch.as_tensor(np.array(out, dtype=np.int64).T.copy())


def evaluate(
    model,
    snapshots,
    *,
    n_test: int = 3,
    x=None,
    groups=None,
    new_links: str = "unseen",
    seed: int = 0,
) -> dict[str, float]:
    """Fit ``model`` on all but the last ``n_test`` snapshots and score the test period.

    Parameters
    ----------
    model : TemporalLinkPredictor
        An unfitted estimator (fitted in place).
    snapshots : sequence of Data or (2, E) arrays
        The whole sequence, oldest first.
    n_test : int
        Test snapshots at the end (HTGN: 3).
    x : array_like, optional
        Node features (N, F), passed to ``fit``.
    groups : array_like, shape (N,), optional
        A label per node (for example the region); adds ``"<label>/auc"`` and
        ``"<label>/ap"``, computed on the edges with both ends in the group against as many
        non-edges within the group.
    new_links : {"unseen", "previous"}
        What counts as a new link.
    seed : int
        Randomness of the negative samples.

    Returns
    -------
    dict
        ``auc``, ``ap``, ``new_auc``, ``new_ap`` (means over the test snapshots that have
        new links) and the group metrics, each averaged over the test snapshots.
    """
    check_scalar(n_test, "n_test", low=1, integer=True)
    check_choice(new_links, "new_links", ("unseen", "previous"))
    edges, n = check_snapshots(snapshots)
    if len(edges) < n_test + 2:
        raise ValueError(
            f"snapshots must hold at least n_test + 2 = {n_test + 2} snapshots (one to train, "
            f"one to validate, {n_test} to test), got {len(edges)}"
        )
    observed = edges[:-n_test]
    model.fit(observed, x=x, num_nodes=n)
    totals: dict[str, list[float]] = {}
    labels = None if groups is None else np.asarray(groups)
    if labels is not None and labels.shape != (n,):
        raise ValueError(f"groups must have shape ({n},) (one label per node), got {labels.shape}")
    for k, target in enumerate(edges[-n_test:]):
        t = len(observed) + k
        result = model.score(target, t=t, new_links=new_links, seed=seed + k)
        if labels is not None:
            pos_all = undirected_pairs(target)
            for label in np.unique(labels):
                members = np.flatnonzero(labels == label)
                inside = np.isin(pos_all[0].numpy(), members) & np.isin(pos_all[1].numpy(), members)
                pos = pos_all[:, torch.as_tensor(inside)]
                if pos.shape[1] == 0:
                    continue
                neg = group_negatives(target, members, pos.shape[1], seed=seed + k)
                m = link_metrics(model.predict_links(t, pos), model.predict_links(t, neg))
                result[f"{label}/auc"], result[f"{label}/ap"] = m["auc"], m["ap"]
        for key, value in result.items():
            if key != "n_new":
                totals.setdefault(key, []).append(value)
    return {key: float(np.mean(v)) for key, v in totals.items()}
