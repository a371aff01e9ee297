"""nego-graph: training time per epoch and peak memory, NeGo vs ERM and GSAT, and the
growth with graph size.

One epoch over 300 Spurious-Motif graphs (batch 64, width 32) for base graphs of about 12,
24 and 48 nodes (smoke: 12 and 24, 60 graphs). Ratios are to ERM, the cheapest model with
the same GIN; the slope is the growth of epoch time with the base-graph size.

Run: ``icml25 bench nego-graph`` (or ``--smoke``).
"""

from __future__ import annotations

import torch
from torch_geometric.loader import DataLoader

from icml25_core import BenchReport, compare, make_report
from nego_graph import ERM, GSAT, NeGo, SpuriousMotif
from nego_graph.datasets import N_FEATURES


def _epoch(model, loader):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def go():
        model.train()
        for batch in loader:
            logits, aux = model(batch)
            loss, _ = model.loss(batch, logits, aux)
            opt.zero_grad()
            loss.backward()
            opt.step()

    return go


def run(smoke: bool = False) -> BenchReport:
    sizes = (12, 24) if smoke else (12, 24, 48)
    n = 60 if smoke else 300
    comparisons = []
    for size in sizes:
        data = SpuriousMotif(bias=0.7, num_graphs=n, seed=0, base_size=size)
        loader = DataLoader(data.train, batch_size=64)
        torch.manual_seed(0)
        comparisons.append(
            compare(
                {
                    "ERM": _epoch(ERM(N_FEATURES, 3, hidden=32), loader),
                    "GSAT": _epoch(GSAT(N_FEATURES, 3, hidden=32), loader),
                    "NeGo": _epoch(NeGo(N_FEATURES, 3, hidden=32), loader),
                },
                reference="ERM",
                label=f"epoch, {n} graphs, base ~{size} nodes",
                size=size,
                repeats=1 if smoke else 3,
                warmup=0 if smoke else 1,
            )
        )
    notes = [
        "time of one training epoch; ratio to ERM on the same GIN; peak = traced heap",
        "slope: growth of epoch time with the base graph's size",
    ]
    return make_report(
        "nego-graph: NeGo vs ERM and GSAT",
        comparisons,
        "nego-graph",
        "torch-geometric",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
