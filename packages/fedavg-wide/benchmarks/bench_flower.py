"""What the Flower app costs over the plain loop, how a FedAvg round grows with width, and
what the jvp linearization saves over an explicit Jacobian.

1. Rounds/s: the same FedAvg run (digits 0/1, 10 clients, pathological split, tau = 5,
   NTK MLP of width 256) as the plain loop (:func:`fedavg_wide.FedAvg`), on Flower's
   simulation runtime with the in-process engine, and (full run only: ~18 s of Ray
   start-up) with Flower's Ray engine; each app run includes its start-up, as a user pays
   it.
2. One FedAvg round against width (one hidden layer, 256 to 4096): the fitted log-log
   slope (1 = linear in the parameter count).
3. The linearized model at width 1024: a forward of ``linearize(model)`` (one
   ``torch.func.jvp``) against the explicit first-order model ``f0 + J (theta - theta0)``
   with ``J`` from ``torch.func.jacrev`` (what a Jacobian-materialising implementation
   does), peak memory recorded.

Run: ``icml25 bench fedavg-wide`` (or ``--smoke``).
"""

from __future__ import annotations

import torch
from torch.func import functional_call, jacrev

from fedavg_wide import MLP, FedAvg, Settings, build_model, federated_data, linearize, simulate
from icml25_core import BenchReport, compare, make_report


def _app_vs_loop(rounds: int, repeats: int, ray: bool):
    settings = {"width": 256, "depth": 1, "num_server_rounds": rounds, "local_steps": 5, "lr": 1.0}
    s = Settings(**settings)
    clients, test = federated_data(s, 10)

    def loop():
        FedAvg(build_model(s), clients, s.lr, s.local_steps, rounds, test=test)

    candidates = {
        f"plain loop ({rounds} rounds)": loop,
        f"Flower in-process engine ({rounds} rounds)": lambda: simulate(settings, 10),
    }
    if ray:
        candidates[f"Flower Ray engine ({rounds} rounds)"] = lambda: simulate(
            settings, 10, engine="ray"
        )
    return compare(
        candidates,
        reference=f"plain loop ({rounds} rounds)",
        label="FedAvg run, 10 clients",
        repeats=repeats,
        warmup=0 if ray else 1,
    )


def _round_vs_width(widths, repeats: int):
    s = Settings()
    clients, _ = federated_data(s, 10)
    out = []
    for w in widths:
        model = MLP(64, 1, w, depth=1, seed=0)
        out.append(
            compare(
                {"one FedAvg round (tau=5)": lambda m=model: FedAvg(m, clients, 1.0, 5, 1)},
                reference="one FedAvg round (tau=5)",
                label=f"width {w}",
                size=w,
                repeats=repeats,
                memory=False,
            )
        )
    return out


def _linearization(width: int, repeats: int):
    model = MLP(64, 1, width, depth=1, seed=0)
    x = federated_data(Settings(), 10)[1][0]
    lin = linearize(model)
    with torch.no_grad():
        for p in lin.net.parameters():
            p.add_(1e-3)
    theta0 = {n: p.detach() for n, p in model.named_parameters()}
    delta = {n: p.detach() - theta0[n] for n, p in lin.net.named_parameters()}

    def explicit():
        jac = jacrev(lambda p: functional_call(model, p, (x,)))(theta0)
        return model(x) + sum(
            (jac[n].reshape(len(x), 1, -1) @ delta[n].reshape(-1, 1)).squeeze(-1) for n in jac
        )

    def jvp():
        with torch.no_grad():
            return lin(x)

    torch.testing.assert_close(jvp(), explicit().detach(), rtol=1e-4, atol=1e-5)
    return compare(
        {"explicit Jacobian (jacrev)": explicit, "linearize (jvp)": jvp},
        reference="explicit Jacobian (jacrev)",
        label=f"linearized forward, width {width}, {len(x)} inputs",
        repeats=repeats,
    )


def run(smoke: bool = False) -> BenchReport:
    if smoke:
        comparisons = [_app_vs_loop(1, 1, ray=False), *_round_vs_width([64, 128], 1)]
        comparisons.append(_linearization(64, 1))
    else:
        comparisons = [_app_vs_loop(5, 3, ray=True)]
        comparisons += _round_vs_width([256, 512, 1024, 2048, 4096], 5)
        comparisons.append(_linearization(1024, 5))
    notes = [
        "ratio > 1: slower than the reference (the plain loop; the explicit Jacobian)",
        "a Flower run includes its runtime start-up (and Ray's, for the Ray engine)",
        "slope of one round against width: 1 = linear in the parameter count",
    ]
    return make_report("fedavg-wide", comparisons, "fedavg-wide", "torch", "flwr", notes=notes)


if __name__ == "__main__":
    run().render()
