"""tabicl-lite against the official TabICL code on the same weights, and HistGradientBoosting.

The official package is whichever ``tabicl`` imports: 2.x from this workspace (the code
users run today), or the paper's v1 code, 0.1.4, which cannot join the lock; install it
into a folder of its own and put that first on the path::

    uv pip install --no-deps --target /tmp/tabicl014 tabicl==0.1.4 einops
    PYTHONPATH=/tmp/tabicl014 uv run --locked python packages/tabicl-lite/benchmarks/bench_peer.py

Both sides run THE SAME WEIGHTS: an official network at the lite size (embed 32; column 2
blocks / 2 heads / 32 inducing points; row 2 blocks / 4 heads / 4 CLS; ICL 4 blocks / 4
heads), random non-zero weights, written as an official checkpoint and converted by
:func:`tabicl_lite.convert.from_official_checkpoint`; twice with 2.x: with the v1 options
(no SSMax, feature grouping or target-aware embedding) and with the released v2
classifier's (QASSMax, "same" feature groups of 3, target-aware column embedding,
half-split RoPE). 0.1.4 builds the v1 network only. Float32 on both sides: the official
forward autocasts to bfloat16 unless told not to, on CPU too (turned off here, as the
official classifier does on CPU); the same torch threads (pinned, noted).

1. Network forward, one table, 20 features, 500 test rows, n_train in {1K, 10K, 50K} (v2:
   {1K, 10K}; ``--smoke``: 100 and 200 (v2: 100), and 100 test rows): ours vs the
   official module. The max difference of the class probabilities is recorded beside the
   times.
2. Classifier end to end (``fit`` + ``predict_proba``, 500 test rows, official
   preprocessing on both sides (ours follows the checkpoint's generation: 0.1.4's for
   v1, 2.2.0's for v2; the official runs its own version's), the same number of
   members: 8 at 1K and 10K, 1 at 50K, where 8 members would take minutes per call;
   ``--smoke``: 100 rows, 2 members): ours with ``model_path=`` the checkpoint vs the
   official ``TabICLClassifier`` with the same file (nothing is downloaded); ours with
   ``kv_cache=True`` too; ``HistGradientBoostingClassifier`` (defaults) for scale, once
   per table.

Interleaved repetitions (5; 1 with ``--smoke``) after a warm-up; ratios to the official;
the per-repetition ratio spread is noted. Peak memory is the resident-set growth.
Run: ``icml25 bench tabicl-lite`` (or ``--smoke``).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import tempfile
from pathlib import Path

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier

from icml25_core import BenchReport, compare, make_report
from tabicl_lite import TabICLClassifier, sample_table
from tabicl_lite.convert import from_official_checkpoint

N_FEATURES = 20
N_TEST = 500
#: training-set sizes per network generation, (full, smoke): v2 embeds every member's
#: columns (no sharing across members on either side), so its classifier stops at 10K
SIZES = {1: ((1000, 10_000, 50_000), (100, 200)), 2: ((1000, 10_000), (100,))}


class Official:
    """The importable official package: its network class, classifier and settings."""

    def __init__(self):
        import tabicl
        from tabicl.__about__ import __version__

        self.version = __version__
        self.v1 = __version__.startswith("0.")
        if self.v1:
            from tabicl.model.inference_config import InferenceConfig
            from tabicl.model.tabicl import TabICL
        else:  # the network and its config are private in 2.x
            from tabicl._model.inference_config import InferenceConfig
            from tabicl._model.tabicl import TabICL
        self.network, self.classifier = TabICL, tabicl.TabICLClassifier
        self._accepted = inspect.signature(TabICL).parameters
        #: the networks this version builds: v1 always, v2 from 2.x on
        self.generations = (1,) if self.v1 else (1, 2)
        self.fp32 = InferenceConfig()
        sections = ("COL_CONFIG", "ROW_CONFIG", "ICL_CONFIG")
        self.fp32.update_from_dict({k: {"use_amp": False} for k in sections})

    def config(self, generation: int) -> dict:
        """The lite network's constructor arguments with ``generation``'s options."""
        reference = _reference_script()
        options = {**reference.LITE, **reference.OPTIONS[generation]}
        return {k: v for k, v in options.items() if k in self._accepted}

    def random_network(self, generation: int, seed: int = 0):
        """Random non-zero weights (the official initialises output projections at zero,
        which would make every row's prediction the same), drawn by the same function as
        the tests' official reference: ``tests/official/make_v1_reference.randomize``."""
        torch.manual_seed(seed)
        net = self.network(**self.config(generation))
        _reference_script().randomize(net, seed=None)
        return net.eval()


@functools.cache
def _reference_script():
    """``tests/official/make_v1_reference.py`` as a module: the official settings and the
    weight randomisation the tests use."""
    path = Path(__file__).parents[1] / "tests" / "official" / "make_v1_reference.py"
    spec = importlib.util.spec_from_file_location("make_v1_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table(n_train: int, n_test: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A prior table; labels made contiguous over the training rows' classes (the official
    network counts the classes it sees)."""
    X, y = sample_table(np.random.default_rng(seed), n_train + n_test, N_FEATURES, 3)
    classes = np.unique(y[:n_train])
    return X, np.searchsorted(classes, y).clip(0, classes.size - 1)


def _forward_case(
    official: Official, generation: int, theirs, ours, n_train: int, n_test: int, repeats: int
):
    X, y = _table(n_train, n_test)
    X = torch.from_numpy(np.nan_to_num(X)).float().unsqueeze(0)
    y_train = torch.from_numpy(y[:n_train]).unsqueeze(0)

    k = int(y_train.max()) + 1

    @torch.inference_mode()
    def run_ours():
        return ours(X, y_train)[..., :k]

    @torch.inference_mode()
    def run_theirs():
        return theirs(X, y_train.float(), inference_config=official.fp32)

    diff = (run_ours().softmax(-1) - run_theirs().softmax(-1)).abs().max().item()
    ours_name, theirs_name = (
        f"tabicl-lite v{generation}",
        f"tabicl {official.version} v{generation}",
    )
    return compare(
        {ours_name: run_ours, theirs_name: run_theirs},
        reference=theirs_name,
        label=f"v{generation} forward, n_train={n_train}",
        size=n_train,
        repeats=repeats,
        warmup=int(repeats > 1),
        memory=True,
        extra={ours_name: {"max |prob diff|": diff}},
    )


def _classifier_case(
    official: Official,
    generation: int,
    ckpt: Path,
    n_train: int,
    n_test: int,
    members: int,
    repeats: int,
):
    X, y = _table(n_train, n_test, seed=1)
    X_train, y_train, X_test = X[:n_train], y[:n_train], X[n_train:]
    out = {}

    def ours(**kw):
        def run():
            clf = TabICLClassifier(
                n_estimators=members, model_path=ckpt, device="cpu", random_state=42, **kw
            )
            out[kw.get("kv_cache", False)] = clf.fit(X_train, y_train).predict_proba(X_test)

        return run

    def theirs():
        clf = official.classifier(
            n_estimators=members,
            model_path=ckpt,
            allow_auto_download=False,
            use_amp=False,
            device="cpu",
            random_state=42,
        )
        out["official"] = clf.fit(X_train, y_train).predict_proba(X_test)

    def hgb():
        HistGradientBoostingClassifier(random_state=0).fit(X_train, y_train).predict_proba(X_test)

    tag = f"v{generation}, {members} member{'s' * (members > 1)}"
    names = {
        "ours": f"tabicl-lite {tag}",
        "cached": f"tabicl-lite kv_cache=True {tag}",
        "official": f"tabicl {official.version} {tag}",
    }
    candidates = {names["ours"]: ours(), names["cached"]: ours(kv_cache=True)}
    candidates[names["official"]] = theirs
    if generation == 1:  # the same tables for both networks: timed once, for scale
        candidates["HistGradientBoosting"] = hgb

    def extra(_timings):
        return {
            names["ours"]: {"max |prob diff|": float(np.abs(out[False] - out["official"]).max())},
            names["cached"]: {"max |prob diff|": float(np.abs(out[True] - out["official"]).max())},
        }

    return compare(
        candidates,
        reference=names["official"],
        label=f"v{generation} fit+predict_proba, n_train={n_train}, {n_test} test rows",
        size=n_train,
        repeats=repeats,
        warmup=1 if 1000 <= n_train < 50_000 else 0,
        memory=True,
        extra=extra,
    )


def _spread(comparison) -> str:
    """Min-max of the per-repetition ratios to the reference (repetitions are paired)."""
    ref = comparison.timings[comparison.reference].times
    parts = []
    for name, timing in comparison.timings.items():
        if name != comparison.reference:
            ratios = np.asarray(timing.times) / np.asarray(ref)
            parts.append(f"{name} {ratios.min():.2f}-{ratios.max():.2f}")
    return f"{comparison.label}: ratio spread " + "; ".join(parts)


def run(smoke: bool = False) -> BenchReport:
    official = Official()
    threads = torch.get_num_threads()
    torch.set_num_threads(threads)  # pinned for the whole run, both sides
    repeats, n_test = (1, 100) if smoke else (5, N_TEST)
    comparisons = []
    with tempfile.TemporaryDirectory() as tmp:
        for generation in official.generations:
            sizes = SIZES[generation][smoke]
            theirs = official.random_network(generation)
            ckpt = Path(tmp) / f"official-v{generation}-random.ckpt"
            config = official.config(generation)
            torch.save({"config": config, "state_dict": theirs.state_dict()}, ckpt)
            ours = from_official_checkpoint(ckpt)
            for n in sizes:
                comparisons.append(
                    _forward_case(official, generation, theirs, ours, n, n_test, repeats)
                )
            for n in sizes[:1] if smoke else sizes:
                members = 2 if smoke else 8 if n < 50_000 else 1
                comparisons.append(
                    _classifier_case(official, generation, ckpt, n, n_test, members, repeats)
                )
    notes = [
        f"official: tabicl {official.version}; torch threads {threads}; float32 both sides",
        f"forward rows: one table, {N_FEATURES} features, {n_test} test rows, the same random "
        "weights (official checkpoint converted); ratio to the official network",
        "fit+predict rows: official preprocessing on both sides, same checkpoint and members; "
        "ratio to the official classifier",
        "peak memory: resident-set growth (Linux) over the timed runs",
        *(_spread(c) for c in comparisons),
    ]
    return make_report(
        f"tabicl-lite vs official tabicl {official.version} (same weights) and "
        "HistGradientBoosting",
        comparisons,
        "tabicl-lite",
        "tabicl",
        "scikit-learn",
        "torch",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
