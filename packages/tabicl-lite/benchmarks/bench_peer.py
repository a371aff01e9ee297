"""tabicl-lite against the official ``tabicl`` package (PyPI) and HistGradientBoosting.

1. Forward pass, one table, 20 features, 500 test rows, n_train in {1K, 10K, 50K}: our
   :class:`~tabicl_lite.TabICL` vs the official ``tabicl.TabICL`` built at the same size
   (embed 32; column 2 blocks / 2 heads / 32 inducing points; row 2 blocks / 4 heads /
   4 CLS; ICL 4 blocks / 4 heads) with the paper's v1 options (no SSMax, no feature
   grouping, no target-aware column embedding), random weights, eval mode, no gradient,
   float32 on both sides (the official forward autocasts to bfloat16 unless told not to,
   on CPU too: turned off here, as its classifier does on CPU).
   Time and peak memory; slopes give the growth with n_train. Our column+row stages are
   also timed alone (they should grow linearly; the ICL stage grows with n_train²).
2. ``fit`` + ``predict_proba`` of the scikit-learn classifiers on a prior table
   (20 features, 3 classes, n_train in {500, 5000}, 1000 test rows): ours (the shipped
   checkpoint, 8 members) vs the official ``TabICLClassifier`` loading a local random-
   weight checkpoint file of the same size (8 members; nothing is downloaded; float32) vs
   ``HistGradientBoostingClassifier`` (defaults); ours also with ``kv_cache=True`` and the
   test rows in 4 blocks (the training rows run once instead of once per block).

Run: ``icml25 bench tabicl-lite`` (or ``--smoke``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier

from icml25_core import BenchReport, compare, make_report
from tabicl_lite import TabICL, TabICLClassifier, TabICLConfig, sample_table

N_FEATURES = 20
N_TEST = 500


def official_config(cfg: TabICLConfig) -> dict:
    """The official ``tabicl.TabICL`` keyword arguments for the same size, v1 options."""
    return {
        "max_classes": cfg.max_classes,
        "embed_dim": cfg.embed_dim,
        "col_num_blocks": cfg.col_blocks,
        "col_nhead": cfg.col_heads,
        "col_num_inds": cfg.n_inducing,
        "col_feature_group": False,
        "col_target_aware": False,
        "col_ssmax": "none",
        "row_num_blocks": cfg.row_blocks,
        "row_nhead": cfg.row_heads,
        "row_num_cls": cfg.n_cls,
        "row_rope_base": cfg.rope_base,
        "icl_num_blocks": cfg.icl_blocks,
        "icl_nhead": cfg.icl_heads,
        "icl_ssmax": "none",
        "ff_factor": cfg.ff_factor,
    }


def _table(n_train: int, n_test: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return sample_table(rng, n_train + n_test, N_FEATURES, 3)


def _forward_cases(ours: TabICL, theirs, n_train: int):
    X, y = _table(n_train, N_TEST)
    X = torch.from_numpy(np.nan_to_num(X)).unsqueeze(0)
    y_train = torch.from_numpy(y[:n_train]).unsqueeze(0)

    @torch.inference_mode()
    def run_ours():
        ours(X, y_train, n_classes=3)

    from tabicl._model.inference_config import InferenceConfig

    fp32 = InferenceConfig()  # the official default autocasts to bfloat16, on CPU too
    fp32.update_from_dict(
        {k: {"use_amp": False} for k in ("COL_CONFIG", "ROW_CONFIG", "ICL_CONFIG")}
    )

    @torch.inference_mode()
    def run_theirs():
        theirs(X, y_train, inference_config=fp32)

    @torch.inference_mode()
    def run_embedding():
        ours.row(ours.col(X, n_train))

    return {"tabicl-lite": run_ours, "tabicl (official)": run_theirs}, run_embedding


def _classifier_cases(n_train: int, official_ckpt: Path):
    from tabicl import TabICLClassifier as OfficialClassifier

    X, y = _table(n_train, 1000, seed=1)
    X_train, y_train, X_test = X[:n_train], y[:n_train], X[n_train:]

    def ours():
        TabICLClassifier(n_estimators=8).fit(X_train, y_train).predict_proba(X_test)

    def ours_cached():
        clf = TabICLClassifier(n_estimators=8, kv_cache=True, batch_size=250)
        clf.fit(X_train, y_train).predict_proba(X_test)

    def theirs():
        OfficialClassifier(
            n_estimators=8,
            model_path=official_ckpt,
            allow_auto_download=False,
            device="cpu",
            use_amp=False,
        ).fit(X_train, y_train).predict_proba(X_test)

    def hgb():
        HistGradientBoostingClassifier(random_state=0).fit(X_train, y_train).predict_proba(X_test)

    return {
        "HistGradientBoosting": hgb,
        "tabicl-lite classifier": ours,
        "tabicl-lite classifier, kv_cache=True, 4 blocks of 250 rows": ours_cached,
        "tabicl classifier (official, random weights)": theirs,
    }


def run(smoke: bool = False) -> BenchReport:
    # the network class is private in tabicl 2.x (wrapped by its classifiers)
    from tabicl._model.tabicl import TabICL as OfficialTabICL

    sizes = (200, 500) if smoke else (1000, 10_000, 50_000)
    fit_sizes = (100,) if smoke else (500, 5000)
    cfg = TabICLConfig.lite()
    torch.manual_seed(0)
    ours = TabICL(cfg).eval()
    theirs = OfficialTabICL(**official_config(cfg)).eval()
    comparisons = []
    for n in sizes:
        cases, embedding = _forward_cases(ours, theirs, n)
        big = n >= 50_000
        comparisons.append(
            compare(
                cases,
                reference="tabicl (official)",
                label=f"forward, n_train={n}",
                size=n,
                repeats=1 if big or smoke else 3,
                warmup=0 if big or smoke else 1,
                memory=True,
            )
        )
        comparisons.append(
            compare(
                {"tabicl-lite column+row stages": embedding},
                reference="tabicl-lite column+row stages",
                label=f"column+row stages, n_train={n}",
                size=n,
                repeats=1 if big or smoke else 3,
                warmup=0,
                memory=False,
            )
        )
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "official-random.ckpt"
        torch.save({"config": official_config(cfg), "state_dict": theirs.state_dict()}, ckpt)
        for n in fit_sizes:
            comparisons.append(
                compare(
                    _classifier_cases(n, ckpt),
                    reference="HistGradientBoosting",
                    label=f"fit+predict_proba, n_train={n}, 1000 test rows",
                    size=n,
                    repeats=1 if smoke else 3,
                    warmup=0 if smoke else 1,
                    memory=not smoke,
                )
            )
    notes = [
        f"forward rows: one table, {N_FEATURES} features, {N_TEST} test rows, random "
        "weights at equal size; ratio to the official tabicl.TabICL",
        "column+row stage rows: our first two stages alone (slope = growth with n_train)",
        "fit+predict rows: 8-member ensembles; ratio to HistGradientBoosting (defaults)",
        "peak memory: traced heap or resident-set growth (Linux), whichever is larger",
    ]
    return make_report(
        "tabicl-lite vs official tabicl and HistGradientBoosting",
        comparisons,
        "tabicl-lite",
        "tabicl",
        "scikit-learn",
        "torch",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
