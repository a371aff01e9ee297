"""Spurious-Motif: synthetic graphs whose label is a motif and whose base graph is a
spurious correlate, generated offline with networkx (no download).

Each graph is a base graph (``circular-ladder``, ``ladder`` or ``wheel``) with a label motif
(``cycle``, ``house`` or ``grid``) attached by one edge; the label is the motif. In the
training and validation splits the base graph equals the label's partner with probability
``bias`` (else one of the other two, uniformly), so base and label are correlated; in the
test split the base is uniform (decorrelated). ``shift="severe"`` also doubles the size of
the test base graphs and triples the node-feature noise at test (node features are ones
plus Gaussian noise of std 0.1 in every split, 0.3 in a severe test split, followed by
8 random-walk return probabilities, PyG's ``AddRandomWalkPE``: without them a 3-layer GIN
cannot tell a motif edge from a base edge locally, and no subgraph method can localise the
motif; with them GSAT's and NeGo's masks do). The bases share the motifs' short cycles
(5- and 4-cycles in the circular ladder, 4-cycles in the ladder, triangles in the wheel),
so these encodings do not give the label away locally; with a tree base they did, and
ERM ignored the bias. ``edge_gt``
marks the motif's edges (ground truth for explanations),
``env`` is the base graph's index (the environment, for IRM / VREx).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import torch

from icml25_core import as_generator, check_choice, check_memory, check_scalar

from ._compat import quiet_pyg_import

with quiet_pyg_import():  # PyG's import calls the deprecated torch.jit.script
    from torch_geometric.data import Data
    from torch_geometric.transforms import AddRandomWalkPE

MOTIFS = ("cycle", "house", "grid")
BASES = ("circular-ladder", "ladder", "wheel")
N_RAW = 4
WALK_LENGTH = 8
N_FEATURES = N_RAW + WALK_LENGTH
NOISE = 0.1
# refusals before a request runs for hours: the largest base graph networkx builds here,
# and the resident memory a generated node costs, for the memory estimate (measured as the
# RSS growth of SpuriousMotif(num_graphs=600): 680 B per node at base_size 12, 1,400 at
# base_size 400; the larger, since large requests are the ones to refuse)
MAX_BASE_NODES = 100_000
BYTES_PER_NODE = 1400


_RWPE = AddRandomWalkPE(walk_length=WALK_LENGTH, attr_name=None)  # appended to x


def _motif(name: str) -> nx.Graph:
    if name == "cycle":
        return nx.cycle_graph(5)
    if name == "house":
        return nx.house_graph()
    return nx.grid_2d_graph(3, 3)


def _base(name: str, size: int, rng: np.random.Generator) -> nx.Graph:
    if name == "circular-ladder":
        return nx.circular_ladder_graph(max(3, size // 2))
    if name == "ladder":
        return nx.ladder_graph(max(2, size // 2))
    return nx.wheel_graph(size)


def make_graph(label: int, base: int, size: int, noise: float, rng: np.random.Generator) -> Data:
    """One graph: base ``BASES[base]`` of about ``size`` nodes plus motif ``MOTIFS[label]``."""
    check_scalar(label, "label", low=0, high=len(MOTIFS) - 1, integer=True)
    check_scalar(base, "base", low=0, high=len(BASES) - 1, integer=True)
    check_scalar(size, "size", low=3, high=MAX_BASE_NODES, integer=True)
    check_scalar(noise, "noise", low=0.0)  # finite, non-negative
    g = nx.convert_node_labels_to_integers(_base(BASES[base], size, rng))
    m = nx.convert_node_labels_to_integers(_motif(MOTIFS[label]), first_label=g.number_of_nodes())
    anchor = int(rng.integers(g.number_of_nodes()))
    motif_nodes = list(m.nodes)
    graph = nx.union(g, m)
    graph.add_edge(anchor, int(rng.choice(motif_nodes)))
    motif_edges = {frozenset(e) for e in m.edges}
    # relabel nodes in a random order so node ids carry no information
    perm = rng.permutation(graph.number_of_nodes())
    graph = nx.relabel_nodes(graph, {i: int(p) for i, p in enumerate(perm)})
    motif_edges = {frozenset(int(perm[u]) for u in e) for e in motif_edges}
    edges = np.array([(u, v) for u, v in graph.edges] + [(v, u) for u, v in graph.edges]).T
    gt = np.array([frozenset((u, v)) in motif_edges for u, v in edges.T], dtype=np.float32)
    n = graph.number_of_nodes()
    x = np.ones((n, N_RAW), dtype=np.float32)
    if noise > 0:
        x += noise * rng.normal(size=x.shape).astype(np.float32)
    data = Data(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(edges).long(),
        y=torch.tensor([label]),
        edge_gt=torch.from_numpy(gt),
        env=torch.tensor([base]),
        num_nodes=n,
    )
    return _RWPE(data)


@dataclass
class SpuriousMotif:
    """Train / validation / test splits of Spurious-Motif.

    Parameters
    ----------
    bias : float
        Probability that a training / validation graph's base graph is its label's
        partner, in [1/3, 1] (1/3: no correlation).
    shift : {"standard", "severe"}
        ``"severe"`` doubles the test base graphs' size and adds feature noise at test.
    num_graphs : int
        Training graphs; validation and test get a quarter each.
    seed : int
    base_size : int
        Nodes of a base graph in training (the test uses ``2 * base_size`` under "severe").

    Attributes
    ----------
    train, val, test : list of torch_geometric.data.Data
        Graphs with ``x`` (n, 4), ``edge_index``, ``y`` (1,), ``edge_gt`` (E,), ``env`` (1,).
    """

    bias: float = 0.7
    shift: str = "standard"
    num_graphs: int = 3000
    seed: int = 0
    base_size: int = 12
    train: list = field(init=False, repr=False)
    val: list = field(init=False, repr=False)
    test: list = field(init=False, repr=False)

    def __post_init__(self):
        check_scalar(self.bias, "bias", low=1 / 3, high=1.0)
        check_choice(self.shift, "shift", ("standard", "severe"))
        check_scalar(self.num_graphs, "num_graphs", low=3, integer=True)
        check_scalar(self.base_size, "base_size", low=5, integer=True)
        rng = as_generator(self.seed)
        severe = self.shift == "severe"
        n_eval = max(3, self.num_graphs // 4)
        largest = (2 if severe else 1) * self.base_size + 2
        if largest > MAX_BASE_NODES:
            raise ValueError(
                f"base_size={self.base_size} gives base graphs of up to {largest} nodes; "
                f"the generator builds each in networkx, so at most {MAX_BASE_NODES} are "
                "supported"
            )
        nodes = (self.num_graphs + n_eval) * (self.base_size + 7) + n_eval * (largest + 5)
        check_memory(
            nodes * BYTES_PER_NODE,
            "num_graphs * base_size",
            what=f"{self.num_graphs + 2 * n_eval} graphs of about {self.base_size} nodes",
        )
        self.train = self._split(self.num_graphs, self.bias, self.base_size, NOISE, rng)
        self.val = self._split(n_eval, self.bias, self.base_size, NOISE, rng)
        self.test = self._split(
            n_eval,
            1 / 3,
            2 * self.base_size if severe else self.base_size,
            3 * NOISE if severe else NOISE,
            rng,
        )

    @staticmethod
    def _split(n, bias, size, noise, rng):
        graphs = []
        for i in range(n):
            label = i % len(MOTIFS)
            if rng.random() < bias:
                base = label
            else:
                base = int(rng.choice([b for b in range(len(BASES)) if b != label]))
            jitter = int(rng.integers(-2, 3))
            graphs.append(make_graph(label, base, size + jitter, noise, rng))
        order = rng.permutation(n)
        return [graphs[i] for i in order]


def load_local_dataset(path) -> list[Data]:
    """Graphs from a PyG ``InMemoryDataset`` file on disk (e.g. a GOOD or DrugOOD split
    you have downloaded and processed, or one saved with ``InMemoryDataset.save``).

    The file is read with ``torch.load(weights_only=True)``: tensors and PyG's data classes
    only, never arbitrary pickled objects. A file that needs more is refused with an error
    rather than unpickled; re-save it with ``InMemoryDataset.save`` from a trusted session.

    Returns
    -------
    list of torch_geometric.data.Data
    """
    import pickle
    from pathlib import Path

    from torch_geometric.data import InMemoryDataset

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path must be a processed dataset file, got {str(path)!r}")
    try:
        out = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "global" not in str(err).lower():  # no class to allow: not a torch file at all
            raise ValueError(f"{path} is not a readable torch dataset file: {err}") from None
        raise ValueError(
            f"{path} holds objects beyond tensors and PyG data classes; refusing to unpickle "
            "it. Re-save it with InMemoryDataset.save in a trusted session."
        ) from err
    except (RuntimeError, EOFError, OSError, ValueError) as err:  # truncated, not a zip
        raise ValueError(f"{path} is not a readable torch dataset file: {err}") from None
    if not isinstance(out, tuple) or len(out) not in (2, 3):
        raise ValueError(f"{path} is not an InMemoryDataset file (data, slices[, class])")
    data, slices = out[0], out[1]
    cls = out[2] if len(out) == 3 else Data
    ds = InMemoryDataset()
    ds.data = cls.from_dict(data) if isinstance(data, dict) else data
    ds.slices = slices
    return [ds.get(i) for i in range(len(ds))]
