"""The vectorized lock-step simulation against a straightforward per-agent Python loop.

Both run FedQ-Hoeffding on the same random MDP for the same episodes per agent. The loop
is what one would write first: agents step one by one, episode after episode, the round
trigger checked after every episode, and the server applying its Case 1 / Case 2 update
visit by visit. The ratio is episodes per second; growth with M and S is swept. The
loop's final regret is reported next to the vectorized one (different random streams: the
same algorithm gives similar, not equal, figures).

Run: ``icml25 bench fedq-gap`` (or ``--smoke``).
"""

from __future__ import annotations

import math

import numpy as np

from fedq_gap import FedQHoeffding, random_mdp
from icml25_core import BenchReport, compare, make_report


def loop_fedq_hoeffding(mdp, M: int, T: int, *, c: float = 0.1, seed: int = 0) -> float:
    """FedQ-Hoeffding with plain Python loops; returns the per-agent regret."""
    H, S, A = mdp.H, mdp.S, mdp.A
    rng = np.random.default_rng(seed)
    Q = np.full((H, S, A), float(H))
    V = np.zeros((H + 1, S))
    V[:H] = H
    N = np.zeros((H, S, A), dtype=np.int64)
    iota = math.log(2 * S * A * (H * T + H * M) * (1 + 1 / (H * (H + 1))) / 0.01)
    i0 = 2 * M * H * (H + 1)
    cdf = np.cumsum(mdp.P, axis=-1)
    done, regret = 0, 0.0
    while done < T:
        pi = Q.argmax(2)
        per_episode = mdp.regret(pi)
        visits = [[] for _ in range(M)]  # per agent: (h, s, v) in order
        local = np.zeros((M, H, S), dtype=np.int64)
        episodes = 0
        while done + episodes < T:
            trigger = False
            for m in range(M):
                s = mdp.s0
                for h in range(H):
                    a = pi[h, s]
                    nxt = min(int((rng.random() > cdf[h, s, a]).sum()), S - 1)
                    visits[m].append((h, s, V[h + 1, nxt]))
                    local[m, h, s] += 1
                    if local[m, h, s] >= max(1, N[h, s, a] // (M * H * (H + 1))):
                        trigger = True
                    s = nxt
            episodes += 1
            if trigger:
                break
        grouped: dict[tuple[int, int], list[float]] = {}
        for m in range(M):
            for h, s, v in visits[m]:
                grouped.setdefault((h, s), []).append(v)
        for (h, s), values in grouped.items():
            a = pi[h, s]
            t0 = int(N[h, s, a])
            if t0 < i0:
                for v in values:
                    N[h, s, a] += 1
                    t = N[h, s, a]
                    alpha = (H + 1) / (H + t)
                    bonus = c * math.sqrt(H**3 * iota / t)
                    Q[h, s, a] = (1 - alpha) * Q[h, s, a] + alpha * (mdp.R[h, s, a] + v + bonus)
            else:
                keep, extra = 1.0, 0.0
                for i in range(len(values)):
                    t = t0 + i + 1
                    alpha = (H + 1) / (H + t)
                    extra = (1 - alpha) * extra + alpha * c * math.sqrt(H**3 * iota / t)
                    keep *= 1 - alpha
                mean = sum(values) / len(values)
                Q[h, s, a] = keep * Q[h, s, a] + (1 - keep) * (mdp.R[h, s, a] + mean) + extra
                N[h, s, a] += len(values)
        V[:H] = np.minimum(H, Q.max(2))
        done += episodes
        regret += episodes * per_episode
    return regret


def _case(H: int, S: int, A: int, M: int, T: int, repeats: int):
    mdp = random_mdp(H, S, A, seed=0)
    out: dict[str, dict[str, float]] = {}

    def vectorized():
        out["vectorized"] = {"regret": float(FedQHoeffding(mdp, M=M, c=0.1).run(T).regret([T])[0])}

    def loop():
        out["python loop"] = {"regret": loop_fedq_hoeffding(mdp, M, T)}

    def measured(timings):
        return {
            name: {**out[name], "episodes_per_s": M * T / timing.median}
            for name, timing in timings.items()
        }

    return compare(
        {"python loop": loop, "vectorized": vectorized},
        reference="python loop",
        label=f"(H,S,A)=({H},{S},{A}) M={M} T={T}",
        size=M * S,
        repeats=repeats,
        warmup=0,
        extra=measured,
    )


def run(smoke: bool = False) -> BenchReport:
    T = 200 if smoke else 20_000
    repeats = 1 if smoke else 2
    cases = (
        [(2, 2, 2, 2), (5, 3, 2, 10)]
        if smoke
        else [
            (5, 3, 2, 2),
            (5, 3, 2, 10),
            (5, 3, 2, 40),
            (5, 6, 2, 10),
            (5, 12, 2, 10),
        ]
    )
    comparisons = [_case(H, S, A, M, T, repeats) for H, S, A, M in cases]
    notes = [
        "ratio < 1: the vectorized simulation is faster than the per-agent Python loop",
        "episodes_per_s counts all agents' episodes; c = 0.1; the same MDP for both",
        "regret differs between the two only through their random streams",
    ]
    return make_report(
        "fedq-gap: vectorized vs loop", comparisons, "fedq-gap", "numpy", notes=notes
    )


if __name__ == "__main__":
    run().render()
