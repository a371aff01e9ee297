"""Training cost of sciLaMA against scVI (scvi-tools), the model a single-cell user would
otherwise train: seconds per epoch and peak memory at 700, 10,000 and 100,000 synthetic
cells (765 genes, as pbmc68k_reduced), and the log-log slope of time in cells.

Both train on every cell (no validation split), batch 128, on the CPU. sciLaMA uses its
defaults (hidden 900/400, latent 50, direct mode) with a 384-d gene embedding per gene
(the size of the offline text model's; the cost does not depend on the values). scVI uses
its defaults (hidden 128, latent 10, one layer) on the counts. Each timed call is one
epoch through the library's own ``train`` (scVI builds a Lightning trainer per call,
which is part of what a user pays). Smoke size: 300 and 600 cells.

Run: ``icml25 bench scilama`` (or ``--smoke``).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from icml25_core import BenchReport, compare, make_report
from scilama import SciLaMA, synthetic_cells


def _case(n_cells: int, repeats: int, smoke: bool):
    import scvi

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("scvi").setLevel(logging.ERROR)
    n_genes = 765
    adata = synthetic_cells(n_cells, n_genes, seed=0)
    emb = pd.DataFrame(
        np.random.default_rng(1).normal(size=(n_genes, 384)).astype(np.float32),
        index=adata.var_names,
    )
    sizes = {"hidden": (32, 16), "latent_dim": 8} if smoke else {}
    sci = SciLaMA(adata, emb, **sizes)
    peer = adata.copy()
    scvi.model.SCVI.setup_anndata(peer, layer="counts")
    model = scvi.model.SCVI(peer, **({"n_hidden": 16, "n_latent": 8} if smoke else {}))

    def scilama_epoch():
        sci.train("direct", max_epochs=1, validation_size=0.0, progress=False)

    def scvi_epoch():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.train(max_epochs=1, train_size=1.0, enable_progress_bar=False)

    return compare(
        {"scVI": scvi_epoch, "sciLaMA": scilama_epoch},
        reference="scVI",
        label=f"one epoch, {n_cells} cells",
        size=n_cells,
        repeats=repeats,
        warmup=1,
        extra=lambda _: {
            "sciLaMA": {"parameters": sum(p.numel() for p in sci.network_.parameters())},
            "scVI": {"parameters": sum(p.numel() for p in model.module.parameters())},
        },
    )


def run(smoke: bool = False) -> BenchReport:
    cases = [(300, 1), (600, 1)] if smoke else [(700, 3), (10_000, 2), (100_000, 1)]
    comparisons = [_case(n, r, smoke) for n, r in cases]
    notes = [
        "ratio > 1: slower per epoch than scVI; every sciLaMA step also encodes all 765 genes",
        "CPU; memory is the resident-set growth during the epoch",
        "smoke: tiny widths for both models",
    ]
    return make_report(
        "scilama vs scVI training cost",
        comparisons,
        "scilama",
        "scvi-tools",
        "torch",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
