"""Snapshot sequences: checking them, building them from timestamped edges, and the
synthetic mixed-geometry graph of the claim experiment.

A *snapshot sequence* is a list of graphs over one node set, oldest first: PyG
:class:`~torch_geometric.data.Data` objects (``edge_index``; optionally ``num_nodes`` and
``n_id``, the global id of each local node) or bare ``(2, E)`` edge arrays. Every model
in this package reads edges as undirected and ignores self-loops.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from icml25_core import check_choice, check_scalar

__all__ = [
    "MixedGeometryGraph",
    "check_snapshots",
    "from_temporal_data",
    "load_edge_csv",
    "mixed_geometry_graph",
    "snapshots_from_edges",
]


def _edge_tensor(edge_index, where: str) -> torch.Tensor:
    ei = torch.as_tensor(np.asarray(edge_index) if not torch.is_tensor(edge_index) else edge_index)
    if ei.dtype.is_floating_point or ei.dtype == torch.bool or ei.dtype.is_complex:
        raise TypeError(f"{where} must hold integer node ids, got dtype {ei.dtype}")
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError(f"{where} must have shape (2, E), got {tuple(ei.shape)}")
    if ei.numel() and int(ei.min()) < 0:
        raise ValueError(f"{where} holds a negative node id ({int(ei.min())})")
    return ei.long().cpu()


def check_snapshots(snapshots, *, num_nodes: int | None = None) -> tuple[list[torch.Tensor], int]:
    """Validate a snapshot sequence and return its edges on one node set.

    Parameters
    ----------
    snapshots : sequence of torch_geometric.data.Data or (2, E) arrays
        Oldest first. Data objects with different ``num_nodes`` must carry ``n_id`` (the
        global id of each local node); without it their node sets cannot be aligned.
    num_nodes : int, optional
        Size N of the shared node set; default: the largest ``num_nodes`` / id + 1.

    Returns
    -------
    edge_indices : list of torch.Tensor, each (2, E_t)
        Undirected (both directions), coalesced, without self-loops, on CPU.
    num_nodes : int

    Raises
    ------
    ValueError
        Empty sequence, a snapshot without edges or with self-loops only, node ids out of
        range, differing node sets without ``n_id``.
    """
    if isinstance(snapshots, (Data, torch.Tensor, np.ndarray)) or not isinstance(
        snapshots, Sequence
    ):
        raise TypeError(
            "snapshots must be a list of torch_geometric Data objects or (2, E) edge arrays, "
            f"got {type(snapshots).__name__}"
        )
    if len(snapshots) == 0:
        raise ValueError("snapshots must hold at least one snapshot, got an empty sequence")
    raw, sizes = [], set()
    for t, snap in enumerate(snapshots):
        where = f"snapshots[{t}]"
        if isinstance(snap, Data):
            if snap.edge_index is None:
                raise ValueError(f"{where} has no edge_index")
            ei = _edge_tensor(snap.edge_index, f"{where}.edge_index")
            n_id = getattr(snap, "n_id", None)
            if n_id is not None:
                n_id = torch.as_tensor(n_id).long().cpu()
                if ei.numel() and int(ei.max()) >= len(n_id):
                    raise ValueError(f"{where}.edge_index refers to a node beyond its n_id")
                ei = n_id[ei]
            elif snap.num_nodes is not None:
                sizes.add(int(snap.num_nodes))
                if ei.numel() and int(ei.max()) >= snap.num_nodes:
                    raise ValueError(
                        f"{where}.edge_index refers to node {int(ei.max())} but the snapshot "
                        f"has num_nodes={snap.num_nodes}"
                    )
        else:
            ei = _edge_tensor(snap, where)
        raw.append((where, ei))
    if len(sizes) > 1:
        raise ValueError(
            f"snapshots have different node sets (num_nodes {sorted(sizes)}) and no mapping: "
            "give every Data an `n_id` with the global id of each local node, or build all "
            "snapshots over one node set"
        )
    largest = max((int(ei.max()) + 1 for _, ei in raw if ei.numel()), default=0)
    n = num_nodes if num_nodes is not None else max([largest, *sizes])
    check_scalar(n, "num_nodes", low=1, integer=True)
    if largest > n:
        raise ValueError(f"snapshots refer to node {largest - 1} but num_nodes={n}")
    out = []
    for where, ei in raw:
        if ei.shape[1] == 0:
            raise ValueError(f"{where} is empty (no edges); drop it or merge it with a neighbour")
        clean, _ = remove_self_loops(ei)
        if clean.shape[1] == 0:
            raise ValueError(f"{where} holds only self-loops; a link predictor needs edges")
        out.append(coalesce(to_undirected(clean, num_nodes=n), num_nodes=n))
    return out, n


def _bucket(time: np.ndarray, n_snapshots: int, bucket: str) -> np.ndarray:
    if bucket == "time":
        lo, hi = float(time.min()), float(time.max())
        if hi == lo:
            return np.zeros(len(time), dtype=np.int64)
        return np.minimum(((time - lo) / (hi - lo) * n_snapshots).astype(np.int64), n_snapshots - 1)
    ranks = np.argsort(np.argsort(time, kind="stable"), kind="stable")
    return (ranks * n_snapshots // len(time)).astype(np.int64)


def snapshots_from_edges(
    src, dst, time, *, n_snapshots: int, num_nodes: int | None = None, bucket: str = "time"
) -> list[Data]:
    """Bucket timestamped edges into ``n_snapshots`` snapshots over one node set.

    Parameters
    ----------
    src, dst : array_like of int, shape (E,)
        Endpoints (ids in ``0..N-1``).
    time : array_like of float, shape (E,)
        Timestamps.
    n_snapshots : int
        Number of snapshots T.
    num_nodes : int, optional
        N; default ``max id + 1``.
    bucket : {"time", "count"}
        ``"time"``: equal-width time windows; ``"count"``: equal numbers of edges.

    Returns
    -------
    list of torch_geometric.data.Data
        T snapshots with ``edge_index`` (undirected, coalesced) and ``num_nodes``.
    """
    check_scalar(n_snapshots, "n_snapshots", low=1, integer=True)
    check_choice(bucket, "bucket", ("time", "count"))
    src, dst = np.asarray(src), np.asarray(dst)
    time = np.asarray(time, dtype=np.float64)
    if not (src.shape == dst.shape == time.shape) or src.ndim != 1:
        raise ValueError(
            f"src, dst and time must be 1-d of one length, got {src.shape}, {dst.shape}, "
            f"{time.shape}"
        )
    if len(src) == 0:
        raise ValueError("src must hold at least one edge")
    if not np.isfinite(time).all():
        raise ValueError("time must be finite (no NaN or inf)")
    ei = _edge_tensor(np.stack([src, dst]), "(src, dst)")
    n = num_nodes if num_nodes is not None else int(ei.max()) + 1
    slot = _bucket(time, n_snapshots, bucket)
    out = []
    for t in range(n_snapshots):
        part = ei[:, torch.as_tensor(slot == t)]
        part = coalesce(to_undirected(part, num_nodes=n), num_nodes=n) if part.numel() else part
        out.append(Data(edge_index=part, num_nodes=n))
    return out


def load_edge_csv(
    path: str | Path,
    *,
    n_snapshots: int,
    src: str = "src",
    dst: str = "dst",
    time: str = "t",
    delimiter: str = ",",
    bucket: str = "time",
    encoding: str = "utf-8",
) -> tuple[list[Data], list[str]]:
    """Read a timestamped edge list (a csv with a header) into snapshots.

    Node labels may be any strings; they are numbered in order of first appearance.

    Parameters
    ----------
    path : path
        The csv file.
    n_snapshots, bucket
        As in :func:`snapshots_from_edges`.
    src, dst, time : str
        Column names.
    delimiter : str
        Field separator.
    encoding : str
        The file's text encoding (``"latin-1"``, ``"cp1252"``... for files not in UTF-8).

    Returns
    -------
    snapshots : list of torch_geometric.data.Data
    node_ids : list of str
        The label of node ``i`` at position ``i``.
    """
    path = Path(path)
    ids: dict[str, int] = {}
    s, d, ts = [], [], []
    try:
        with path.open(newline="", encoding=encoding) as fh:
            reader = csv.DictReader(fh, delimiter=delimiter)
            missing = [c for c in (src, dst, time) if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(
                    f"{path} has no column(s) {missing}; its header is {reader.fieldnames}"
                )
            for line, row in enumerate(reader, start=2):  # decoding errors come from here
                try:
                    ts.append(float(row[time]))
                except (TypeError, ValueError):
                    raise ValueError(
                        f"{path}, line {line}: time {row[time]!r} is not a number"
                    ) from None
                s.append(ids.setdefault(row[src], len(ids)))
                d.append(ids.setdefault(row[dst], len(ids)))
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path} is not valid {encoding} text ({err.reason} at byte {err.start}); pass "
            "the file's encoding, e.g. encoding='latin-1'"
        ) from None
    if not s:
        raise ValueError(f"{path} holds no edges")
    snaps = snapshots_from_edges(
        s, d, ts, n_snapshots=n_snapshots, num_nodes=len(ids), bucket=bucket
    )
    return snaps, list(ids)


def from_temporal_data(data, *, n_snapshots: int, bucket: str = "time") -> list[Data]:
    """Snapshots from PyG's :class:`~torch_geometric.data.TemporalData` (``src``, ``dst``,
    ``t``), as in :func:`snapshots_from_edges`."""
    for field in ("src", "dst", "t"):
        if getattr(data, field, None) is None:
            raise ValueError(f"data must be a TemporalData with `{field}`")
    n = getattr(data, "num_nodes", None)
    return snapshots_from_edges(
        data.src.cpu().numpy(),
        data.dst.cpu().numpy(),
        data.t.cpu().numpy(),
        n_snapshots=n_snapshots,
        num_nodes=int(n) if n is not None else None,
        bucket=bucket,
    )


@dataclass
class MixedGeometryGraph:
    """A synthetic temporal graph with a hierarchical and a flat region.

    Attributes
    ----------
    snapshots : list of torch_geometric.data.Data
        T snapshots over N nodes.
    region : numpy.ndarray of str, shape (N,)
        ``"tree"`` or ``"geometric"`` per node.
    arrival : numpy.ndarray of int, shape (N,)
        The snapshot at which each node joins.
    latent : torch.Tensor, shape (2, E)
        The final latent graph (every edge that exists at the end), undirected.
    """

    snapshots: list[Data]
    region: np.ndarray
    arrival: np.ndarray
    latent: torch.Tensor


def mixed_geometry_graph(
    n_nodes: int = 300,
    n_snapshots: int = 10,
    *,
    tree_fraction: float = 0.5,
    radius: float | None = None,
    observe: float = 0.7,
    initial: float = 0.4,
    bridges: int = 4,
    seed: int = 0,
) -> MixedGeometryGraph:
    r"""A growing preferential-attachment tree region beside a random geometric region.

    Nodes arrive over time: a fraction ``initial`` of each region at snapshot 0, the rest
    evenly over the later snapshots. A tree node attaches to one earlier tree node chosen
    with probability proportional to its degree + 1 (a growing scale-free tree); a
    geometric node gets a uniform position in the unit square and links to every present
    geometric node within ``radius``. ``bridges`` random tree-geometric edges join the
    regions at snapshot 0. A latent edge, once it exists, persists; each snapshot shows
    each existing edge independently with probability ``observe`` (activity), so a
    link predictor has to infer unobserved links from structure, not only remember them.

    Parameters
    ----------
    n_nodes, n_snapshots : int
        N and T.
    tree_fraction : float
        Share of nodes in the tree region.
    radius : float, optional
        Link radius of the geometric region; default: the radius that gives a mean degree
        of 6 there, :math:`\sqrt{6 / (\pi n_{geo})}`.
    observe : float
        Probability that an existing edge appears in a snapshot.
    initial : float
        Share of each region present at snapshot 0.
    bridges : int
        Edges between the regions.
    seed : int
        Randomness.

    Returns
    -------
    MixedGeometryGraph
    """
    check_scalar(n_nodes, "n_nodes", low=8, integer=True)
    check_scalar(n_snapshots, "n_snapshots", low=2, integer=True)
    for name, v in (("tree_fraction", tree_fraction), ("observe", observe), ("initial", initial)):
        check_scalar(v, name, low=0, high=1, low_inclusive=False)
    check_scalar(bridges, "bridges", low=0, integer=True)
    rng = np.random.default_rng(seed)
    n_tree = round(n_nodes * tree_fraction)
    if radius is None:
        radius = float(np.sqrt(6.0 / (np.pi * max(n_nodes - n_tree, 1))))
    check_scalar(radius, "radius", low=0, low_inclusive=False)
    region = np.array(["tree"] * n_tree + ["geometric"] * (n_nodes - n_tree))

    def arrivals(m: int) -> np.ndarray:
        first = max(2, round(m * initial))
        later = np.linspace(1, n_snapshots, m - first, endpoint=False).astype(np.int64)
        return np.concatenate([np.zeros(first, dtype=np.int64), later])

    arrival = np.concatenate([arrivals(n_tree), arrivals(n_nodes - n_tree)])
    born: list[tuple[int, int, int]] = []  # (u, v, snapshot the edge appears)
    degree = np.zeros(n_nodes)
    for i in range(1, n_tree):  # node i attaches to an earlier one (ids follow arrival)
        p = degree[:i] + 1.0
        j = int(rng.choice(i, p=p / p.sum()))
        born.append((i, j, int(arrival[i])))
        degree[i] += 1
        degree[j] += 1
    geo = np.arange(n_tree, n_nodes)
    pos = rng.random((len(geo), 2))
    for a in range(len(geo)):
        for b in range(a):
            if np.linalg.norm(pos[a] - pos[b]) <= radius:
                born.append((int(geo[a]), int(geo[b]), int(max(arrival[geo[a]], arrival[geo[b]]))))
    first_tree = np.flatnonzero(arrival[:n_tree] == 0)
    first_geo = geo[arrival[geo] == 0]
    for _ in range(bridges):
        born.append((int(rng.choice(first_tree)), int(rng.choice(first_geo)), 0))
    edges = np.array(born, dtype=np.int64)
    snapshots = []
    for t in range(n_snapshots):
        alive = edges[edges[:, 2] <= t]
        shown = alive[rng.random(len(alive)) < observe]
        ei = torch.as_tensor(shown[:, :2].T.copy())
        snapshots.append(Data(edge_index=to_undirected(ei, num_nodes=n_nodes), num_nodes=n_nodes))
    latent = to_undirected(torch.as_tensor(edges[:, :2].T.copy()), num_nodes=n_nodes)
    return MixedGeometryGraph(snapshots, region, arrival, latent)
