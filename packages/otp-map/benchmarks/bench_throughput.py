"""otp-map: training and sampling throughput, OTP against SemiDualOT and POT.

1. Training: OTP vs SemiDualOT (the same loop without noise) for a fixed number of steps
   on Gaussian data of dimension d in {2, 16, 64, 256}, default networks (MLP 256x3),
   batch 256. The ratio is OTP's overhead; the slope is the growth of time with d.
2. Sampling: ``transport`` of 100 000 points, OTP (1 and 8 samples per point) vs SemiDualOT.
3. Out-of-sample mapping, the job a user might do with POT instead: POT's
   ``ot.da.EMDTransport`` (exact OT on the training samples plus a nearest-neighbour
   barycentric map for new points) vs OTP trained with the quick experiment's settings,
   on gaussian+segment -> 8 Gaussians with 2000 training points; time of fit + mapping
   2000 new source points, and W2 of the mapped points to a fresh target sample.

Run: ``icml25 bench otp-map`` (or ``--smoke``).
"""

from __future__ import annotations

import numpy as np
import ot
import torch

from icml25_core import BenchReport, compare, make_report
from otp_map import OTP, SemiDualOT
from otp_map.experiments import SPURIOUS_SOLUTIONS, make_model, make_task
from otp_map.metrics import wasserstein2


def _training(smoke: bool) -> list:
    dims = (2, 8) if smoke else (2, 16, 64, 256)
    steps = 10 if smoke else 200
    out = []
    for d in dims:
        rng = np.random.default_rng(0)
        src, tgt = rng.normal(size=(4096, d)), rng.normal(size=(4096, d)) + 1.0
        rates: dict = {}

        def fit(cls, rates=rates, src=src, tgt=tgt):
            def go():
                cls(seed=0).fit(src, tgt, n_iter=steps, batch_size=256)
                rates.setdefault(cls.__name__, steps)

            return go

        comp = compare(
            {"SemiDualOT": fit(SemiDualOT), "OTP": fit(OTP)},
            reference="SemiDualOT",
            label=f"train {steps} steps, d={d}",
            size=d,
            repeats=1 if smoke else 3,
            warmup=0 if smoke else 1,
            extra=lambda timings: {
                n: {"steps_per_s": steps / t.median} for n, t in timings.items()
            },
        )
        out.append(comp)
    return out


def _sampling(smoke: bool) -> list:
    n = 1000 if smoke else 100_000
    rng = np.random.default_rng(0)
    src, tgt = rng.normal(size=(2048, 2)), rng.normal(size=(2048, 2))
    otp = OTP(seed=0).fit(src, tgt, n_iter=5, batch_size=64)
    snot = SemiDualOT(seed=0).fit(src, tgt, n_iter=5, batch_size=64)
    x = torch.as_tensor(rng.normal(size=(n, 2)), dtype=torch.float32)
    comp = compare(
        {
            "SemiDualOT": lambda: snot.transport(x),
            "OTP": lambda: otp.transport(x, seed=0),
            "OTP 8 samples": lambda: otp.transport(x, n_samples=8, seed=0),
        },
        reference="SemiDualOT",
        label=f"transport {n} points",
        repeats=3,
        warmup=1,
        extra=lambda timings: {
            name: {"points_per_s": n * (8 if "8" in name else 1) / t.median}
            for name, t in timings.items()
        },
    )
    return [comp]


def _peer(smoke: bool) -> list:
    cfg = SPURIOUS_SOLUTIONS.config("quick")
    cfg["n_iter"] = 20 if smoke else cfg["n_iter"]
    n = 300 if smoke else 2000
    src, target = make_task("gaussian+segment->8-gaussians", 2 * n, seed=0)
    train, new = src[:n], src[n:]
    tgt, fresh = target(n, 1), target(n, 2)
    quality: dict = {}

    def pot():
        mapping = ot.da.EMDTransport().fit(Xs=train, Xt=tgt)
        quality["POT EMDTransport"] = {"w2": wasserstein2(mapping.transform(Xs=new), fresh)}

    def otp():
        model = make_model("OTP", cfg, 0, train, tgt)
        model.fit(train, tgt, n_iter=cfg["n_iter"], batch_size=256)
        quality["OTP"] = {"w2": wasserstein2(model.transport(new, seed=0), fresh)}

    # the floor: w2 between two fresh target samples of the same size
    floor = wasserstein2(target(n, 3), fresh)
    comp = compare(
        {"POT EMDTransport": pot, "OTP": otp},
        reference="POT EMDTransport",
        label=f"fit + map {n} new points",
        repeats=1,
        warmup=0,
        memory=not smoke,
        extra=lambda timings: {k: {**v, "w2_floor": floor} for k, v in quality.items()},
    )
    return [comp]


def run(smoke: bool = False) -> BenchReport:
    torch.manual_seed(0)
    comparisons = _training(smoke) + _sampling(smoke) + _peer(smoke)
    notes = [
        "train rows: OTP's time over SemiDualOT's for the same steps (the cost of the noise); "
        "slope: growth of time with the dimension d",
        "transport row: 100k points through the trained map network; OTP 8 samples draws 8 "
        "plan samples per point",
        "last row: POT's exact OT + barycentric out-of-sample map vs OTP (quick settings) on "
        "a degenerate source; w2 of the mapped new points to a fresh target sample",
    ]
    return make_report(
        "otp-map: OTP vs SemiDualOT vs POT", comparisons, "otp-map", "pot", "torch", notes=notes
    )


if __name__ == "__main__":
    run().render()
