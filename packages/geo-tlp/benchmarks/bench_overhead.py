"""What the second geometry costs: one training epoch of geo-tlp (soft routing: both
branches, the gate and the mixed decoder) against the Euclidean-only network (the floor of
the same architecture) and the hyperbolic-only one, as the node count grows; plus the
one-off local-hyperbolicity preprocessing per snapshot sequence.

Mixed-geometry graphs with 6 snapshots (5 train), full-batch epochs with RiemannianAdam,
CPU. Run: ``icml25 bench geo-tlp`` (or ``--smoke``).
"""

from __future__ import annotations

import geoopt
import torch

from geo_tlp import GeoTLP, check_snapshots, hyperbolicity_sequence, mixed_geometry_graph
from geo_tlp.protocol import seeded, undirected_pairs
from icml25_core import BenchReport, compare, make_report


def _epoch(model: GeoTLP, train, deltas):
    pos = [undirected_pairs(ei) for ei in train]
    optim = geoopt.optim.RiemannianAdam(model.net_.parameters(), lr=1e-3)

    def run():
        optim.zero_grad()
        model._epoch_loss(model.net_, train, pos, deltas, None).backward()
        optim.step()

    return run


def _case(n: int, repeats: int):
    graph = mixed_geometry_graph(n, 6, seed=0)
    edges, _ = check_snapshots(graph.snapshots)
    deltas = torch.as_tensor(hyperbolicity_sequence(edges, n), dtype=torch.float32)
    models = {
        f"Euclidean only (epoch, N={n})": GeoTLP(routing="euclidean", epochs=1, device="cpu"),
        f"geo-tlp soft (epoch, N={n})": GeoTLP(epochs=1, device="cpu"),
        f"hyperbolic only (epoch, N={n})": GeoTLP(routing="hyperbolic", epochs=1, device="cpu"),
    }
    for model in models.values():
        model.fit(graph.snapshots)
    with seeded(0):
        epochs = compare(
            {name: _epoch(m, edges[:-1], deltas[:-1]) for name, m in models.items()},
            reference=f"Euclidean only (epoch, N={n})",
            label=f"training epoch, N={n}",
            size=n,
            repeats=repeats,
        )
    prep = compare(
        {
            f"one epoch, Euclidean only (N={n})": _epoch(
                models[f"Euclidean only (epoch, N={n})"], edges[:-1], deltas[:-1]
            ),
            f"local hyperbolicity, 6 snapshots (N={n})": lambda: hyperbolicity_sequence(edges, n),
        },
        reference=f"one epoch, Euclidean only (N={n})",
        label=f"preprocessing, N={n}",
        size=n,
        repeats=max(1, repeats // 2),
    )
    return [epochs, prep]


def run(smoke: bool = False) -> BenchReport:
    sizes, repeats = ([40], 1) if smoke else ([150, 300, 600, 1200], 7)
    comparisons = [c for n in sizes for c in _case(n, repeats)]
    notes = [
        "ratio > 1: slower than the Euclidean-only network of the same widths (32/16)",
        "geo-tlp runs both branches; hyperbolic only runs the HGCN branch alone",
        "local hyperbolicity is computed once per fit (k = 2, 1000 quadruples per ball)",
    ]
    return make_report("geo-tlp overhead", comparisons, "geo-tlp", "torch", "geoopt", notes=notes)


if __name__ == "__main__":
    run().render()
