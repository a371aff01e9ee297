r"""FedQ-Hoeffding and FedQ-Bernstein (Zheng, Gao, Xue & Yang, arXiv 2312.15023), the
algorithms whose gap-dependent regret and communication Zhang, Zheng & Xue (ICML 2025)
analyse, and the single-agent UCB-Hoeffding baseline (Jin et al., NeurIPS 2018).

:math:`M` agents explore the same MDP with the policy the server broadcast; all agents
are simulated in lock-step with NumPy, a whole round at a time. Round :math:`k`:

1. The server broadcasts :math:`\pi^k` (greedy in :math:`Q`), :math:`V^k` and the visit
   counts :math:`N_h(s, a)`.
2. Every agent runs episodes with :math:`\pi^k`. The round ends, after the current
   episode, as soon as one agent has visited some :math:`(h, s, \pi^k_h(s))` at least
   :math:`\max\{1, \lfloor \tilde C N_h(s, a) / M \rfloor\}` times,
   :math:`\tilde C = 1 / (H(H+1))`.
3. Agents upload, per visited triple, their visit count, the reward and the mean of
   :math:`V^k_{h+1}(s')` over the visits (Case 1: every value).
4. With :math:`t_{k-1} = N`, :math:`t_k = N + n` (:math:`n` new visits),
   :math:`\alpha_t = \frac{H+1}{H+t}` and
   :math:`\theta_t = \alpha_t \prod_{i=t+1}^{t_k} (1 - \alpha_i)`, the server updates
   :math:`a = \pi^k_h(s)`:

   - Case 1, :math:`N < i_0 = 2 M H (H+1)`: one step
     :math:`Q \leftarrow (1-\alpha_t) Q + \alpha_t (r + v_t + b_t)` per visit, in agent
     order. Equivalently
     :math:`Q \leftarrow \prod_t (1-\alpha_t) Q + \sum_t \theta_t (r + v_t + b_t)`.
   - Case 2, otherwise: with :math:`\bar v` the mean over all new visits and
     :math:`\alpha^{agg} = 1 - \prod_t (1-\alpha_t) = \sum_t \theta_t`,
     :math:`Q \leftarrow (1 - \alpha^{agg}) Q + \alpha^{agg} (r + \bar v) + \beta / 2`,
     with :math:`\beta = 2 \sum_t \theta_t b_t`.

   Then :math:`V_h(s) = \min\{H, \max_a Q_h(s, a)\}` and :math:`\pi` is greedy.

Hoeffding bonus: :math:`b_t = c \sqrt{H^3 \iota / t}`. The papers leave the constant
:math:`c` unspecified; it dominates the early phase. :math:`\iota = \log(2 S A (T_0 + H M)
(1 + \tilde C) / p)` with :math:`T_0 = H T` the steps per agent. Regret is exact: each
round's policy is deterministic, so its per-episode regret
:math:`V^\star_1(s_1) - V^{\pi^k}_1(s_1)` comes from dynamic programming.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from icml25_core import check_choice, check_scalar

from .mdp import TabularMDP


@dataclass
class RunResult:
    """One run: the rounds, their policies' exact regret and the communication.

    Attributes
    ----------
    M : int
        Agents.
    episodes : numpy.ndarray of int, shape (K,)
        Episodes per agent completed at the end of each round (cumulative).
    round_regret : numpy.ndarray, shape (K,)
        Per-episode regret :math:`V^\\star_1(s_1) - V^{\\pi^k}_1(s_1)` of each round's
        policy.
    uploads : numpy.ndarray of int, shape (K,)
        Numbers uploaded by all agents up to the end of each round (cumulative).
    federated : bool
        ``False`` for the single-agent baseline, whose "rounds" are its episodes.
    """

    M: int
    episodes: np.ndarray
    round_regret: np.ndarray
    uploads: np.ndarray
    federated: bool = True

    @property
    def rounds(self) -> int:
        """Communication rounds."""
        return int(self.episodes.size)

    @property
    def T(self) -> int:
        """Episodes per agent."""
        return int(self.episodes[-1])

    def regret(self, t=None) -> np.ndarray:
        """Cumulative regret **per agent** after ``t`` episodes per agent (array-like;
        default: at every round end). Multiply by ``M`` for the total regret."""
        lengths = np.diff(self.episodes, prepend=0)
        cum = np.concatenate([[0.0], np.cumsum(lengths * self.round_regret)])
        if t is None:
            return cum[1:]
        t = np.asarray(t)
        if np.any(t < 0) or np.any(t > self.T):
            raise ValueError(f"t must be within [0, {self.T}] episodes")
        k = np.searchsorted(self.episodes, t, side="left")  # round containing episode t
        k = np.minimum(k, self.rounds - 1)
        start = np.where(k > 0, self.episodes[np.maximum(k - 1, 0)], 0)
        return cum[k] + (t - start) * self.round_regret[k]

    def rounds_at(self, t) -> np.ndarray:
        """Rounds started by the time ``t`` episodes per agent are done (array-like)."""
        return np.searchsorted(self.episodes, np.asarray(t), side="left") + 1


def _segment_cumsum(x: np.ndarray, start: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sums of ``x`` restarted at every segment ``start``."""
    total = np.cumsum(x)
    before = np.concatenate([[0.0], total])[start]
    return total - before[seg]


def _check_learner(mdp, c, p, iota) -> None:
    """The settings every learner here shares: the MDP, the bonus constant, the failure
    probability and an optional iota."""
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    check_scalar(c, "c", low=0.0)
    check_scalar(p, "p", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    if iota is not None:
        check_scalar(iota, "iota", low=0.0, low_inclusive=False)


class _FederatedQ:
    """Shared simulation and server of FedQ-Hoeffding and FedQ-Bernstein."""

    uploads_per_triple = 3  # reward, count, mean of V_{h+1}

    def __init__(
        self,
        mdp: TabularMDP,
        M: int = 10,
        *,
        c: float = 1.0,
        p: float = 0.01,
        seed: int = 0,
        sync: str = "rule",
        iota: float | None = None,
        i0: int | None = None,
    ) -> None:
        _check_learner(mdp, c, p, iota)
        check_scalar(seed, "seed", low=0, integer=True)
        check_scalar(M, "M", low=1, integer=True)
        if i0 is not None:
            check_scalar(i0, "i0", low=0, integer=True)
        check_choice(sync, "sync", ("rule", "episode"))
        self.mdp, self.M, self.c, self.p, self.seed, self.sync = mdp, M, c, p, seed, sync
        self.iota = iota
        self.i0 = 2 * M * mdp.H * (mdp.H + 1) if i0 is None else i0
        self._cdf = np.cumsum(mdp.P, axis=-1)

    # -- the server's statistics ---------------------------------------------------
    def _reset(self, T: int) -> None:
        mdp = self.mdp
        H, S, A = mdp.H, mdp.S, mdp.A
        self.Q_ = np.full((H, S, A), float(H))
        self.V_ = np.zeros((H + 1, S))
        self.V_[:H] = H
        self.N_ = np.zeros((H, S, A), dtype=np.int64)
        self.sum_v_ = np.zeros((H, S, A))
        self.sum_v2_ = np.zeros((H, S, A))
        c_tilde = 1.0 / (H * (H + 1))
        self.iota_ = (
            self.iota
            if self.iota is not None
            else math.log(2 * S * A * (H * T + H * self.M) * (1 + c_tilde) / self.p)
        )
        self.rng_ = np.random.default_rng(self.seed)

    @property
    def policy_(self) -> np.ndarray:
        """The greedy policy :math:`\\pi_h(s) = \\arg\\max_a Q_h(s, a)`, shape ``(H, S)``
        (ties to the lowest action)."""
        return self.Q_.argmax(2)

    def _bonus(self, t: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Bonus ``b_t`` per visit; ``W`` the empirical variance of ``V_{h+1}`` the visit
        sees (used by the Bernstein bonus only)."""
        raise NotImplementedError

    # -- one round ---------------------------------------------------------------------
    def _episodes(self, pi: np.ndarray, E: int) -> np.ndarray:
        """States of ``E`` episodes of every agent under ``pi``: ``(E, M, H + 1)``."""
        mdp = self.mdp
        states = np.empty((E, self.M, mdp.H + 1), dtype=np.int64)
        states[:, :, 0] = mdp.s0
        for h in range(mdp.H):
            s = states[:, :, h]
            cdf = self._cdf[h, s, pi[h, s]]
            u = self.rng_.random((E, self.M, 1))
            states[:, :, h + 1] = np.minimum((u > cdf).sum(-1), mdp.S - 1)
        return states

    def _round(self, remaining: int) -> np.ndarray:
        """Simulate one round; its episodes' states ``(E, M, H + 1)``.

        Episodes are simulated in chunks of doubling size (1, 2, 4, ...) until one agent
        reaches a threshold; episodes simulated past the trigger are discarded unseen, so
        the work is at most about twice the round's length.
        """
        mdp, M = self.mdp, self.M
        H, S = mdp.H, mdp.S
        pi = self.policy_
        rows = np.arange(S)
        n_pi = self.N_[np.arange(H)[:, None], rows[None], pi]  # (H, S)
        threshold = np.maximum(1, n_pi // (M * H * (H + 1))).ravel()
        # every episode visits (0, s0): the round is over after that many episodes at most
        longest = 1 if self.sync == "episode" else int(threshold[mdp.s0])
        longest = min(remaining, longest)
        if longest == 1:
            return self._episodes(pi, 1)
        pieces, carried, done, chunk = [], np.zeros((M, H * S), dtype=np.int64), 0, 1
        while done < longest:
            E = min(chunk, longest - done)
            states = self._episodes(pi, E)
            flat = np.arange(H)[None, None, :] * S + states[:, :, :H]  # (E, M, H)
            index = (np.arange(E)[:, None, None] * M + np.arange(M)[None, :, None]) * (H * S) + flat
            counts = np.bincount(index.ravel(), minlength=E * M * H * S).reshape(E, M, H * S)
            cumulative = carried + np.cumsum(counts, axis=0)
            hit = (cumulative >= threshold).any(axis=(1, 2))
            if hit.any():
                pieces.append(states[: int(hit.argmax()) + 1])
                break
            pieces.append(states)
            carried, done, chunk = cumulative[-1], done + E, 2 * chunk
        return np.concatenate(pieces)

    def _update(self, states: np.ndarray) -> int:
        """The server's update from one round's states; returns the numbers uploaded.

        Vectorized over all visited triples: the visits are sorted by triple (stable, so
        agent-major within a triple) and every per-visit quantity is computed in one
        pass, with segment sums for the products and weights.
        """
        mdp, M = self.mdp, self.M
        H, S = mdp.H, mdp.S
        pi = self.policy_
        by_agent = states.transpose(1, 0, 2)  # (M, E, H + 1): agent-major visit order
        steps = np.broadcast_to(np.arange(H), by_agent[:, :, :H].shape)
        key = (steps * S + by_agent[:, :, :H]).ravel()
        values = self.V_[steps + 1, by_agent[:, :, 1:]].ravel()
        agent = np.broadcast_to(np.arange(M)[:, None, None], steps.shape).ravel()
        order = np.argsort(key, kind="stable")
        key, values, agent = key[order], values[order], agent[order]
        triples, start, n = np.unique(key, return_index=True, return_counts=True)
        h, s = triples // S, triples % S
        a = pi[h, s]
        t0 = self.N_[h, s, a]
        seg = np.repeat(np.arange(triples.size), n)
        t = (t0[seg] + np.arange(key.size) - start[seg] + 1).astype(np.float64)
        alpha = (H + 1) / (H + t)
        first = t == 1  # alpha_1 = 1: the product over a segment holding it is 0
        log_keep = np.log1p(-np.where(first, 0.0, alpha))
        running = _segment_cumsum(log_keep, start, seg)
        seg_total = running[start + n - 1]
        theta = alpha * np.exp(seg_total[seg] - running)
        keep = np.where(t0 == 0, 0.0, np.exp(seg_total))
        # empirical variance of V_{h+1} per visit (Case 1) or at the round's end (Case 2)
        case1 = t0 < self.i0
        prior_v, prior_v2 = self.sum_v_[h, s, a], self.sum_v2_[h, s, a]
        sum_v = prior_v[seg] + _segment_cumsum(values, start, seg)
        sum_v2 = prior_v2[seg] + _segment_cumsum(values**2, start, seg)
        end_v, end_v2 = sum_v[start + n - 1], sum_v2[start + n - 1]
        count = np.where(case1[seg], t, (t0 + n)[seg].astype(np.float64))
        mean = np.where(case1[seg], sum_v, end_v[seg]) / count
        mean2 = np.where(case1[seg], sum_v2, end_v2[seg]) / count
        bonus = self._bonus(t, np.maximum(mean2 - mean**2, 0.0))
        weight = np.add.reduceat(theta, start)
        weighted_v = np.add.reduceat(theta * values, start)
        mean_v = np.add.reduceat(values, start) / n
        r = mdp.R[h, s, a]
        self.Q_[h, s, a] = (
            keep * self.Q_[h, s, a]
            + weight * r
            + np.where(case1, weighted_v, weight * mean_v)
            + np.add.reduceat(theta * bonus, start)
        )
        self.N_[h, s, a] += n
        self.sum_v_[h, s, a], self.sum_v2_[h, s, a] = end_v, end_v2
        self.V_[:H] = np.minimum(H, self.Q_.max(2))
        new_agent = np.ones(key.size, dtype=np.int64)
        new_agent[1:] = (agent[1:] != agent[:-1]) | (seg[1:] != seg[:-1])
        agents = np.add.reduceat(new_agent, start)
        uploads = np.where(case1, n + 2 * agents, self.uploads_per_triple * agents)
        return int(uploads.sum())

    def run(self, T: int) -> RunResult:
        """Learn from scratch for ``T`` episodes per agent.

        Returns
        -------
        RunResult
            Rounds, exact per-round regret and uploads; the final Q, V, N and policy stay
            on the learner (``Q_``, ``V_``, ``N_``, ``policy_``).
        """
        check_scalar(T, "T", low=1, integer=True)
        self._reset(T)
        episodes, regrets, uploads = [], [], []
        done, sent = 0, 0
        cache: dict[bytes, float] = {}
        while done < T:
            pi = self.policy_
            key = pi.tobytes()
            if key not in cache:
                cache[key] = self.mdp.regret(pi)
            states = self._round(T - done)
            sent += self._update(states)
            done += states.shape[0]
            episodes.append(done)
            regrets.append(cache[key])
            uploads.append(sent)
        return RunResult(
            self.M, np.array(episodes), np.array(regrets), np.array(uploads, dtype=np.int64)
        )


class FedQHoeffding(_FederatedQ):
    r"""FedQ-Hoeffding: federated optimistic Q-learning with the bonus
    :math:`b_t = c \sqrt{H^3 \iota / t}`.

    Parameters
    ----------
    mdp : TabularMDP
    M : int, default=10
        Agents.
    c : float, default=1.0
        Bonus constant (the papers' unspecified absolute constant).
    p : float, default=0.01
        Failure probability in :math:`\iota`.
    seed : int, default=0
    sync : {"rule", "episode"}, default="rule"
        ``"rule"``: the paper's round-ending rule; ``"episode"``: a round after every
        episode (with ``M=1`` this is UCB-Hoeffding).
    iota : float, optional
        Override :math:`\iota` (default: the formula above, set by ``run(T)``).
    i0 : int, optional
        Visits of a triple before the server switches from Case 1 (sequential) to Case 2
        (aggregated); default :math:`2 M H (H+1)`. ``0`` always aggregates.

    Attributes
    ----------
    Q_, V_, N_ : numpy.ndarray
        The server's estimates and visit counts after :meth:`run`.
    """

    def _bonus(self, t, W):
        return self.c * np.sqrt(self.mdp.H**3 * self.iota_ / t)


class FedQBernstein(_FederatedQ):
    r"""FedQ-Bernstein: the variance-aware bonus of UCB-Bernstein (Jin et al. 2018),

    .. math::

        b_t = c \left( \min\left\{\sqrt{\frac{H \iota (W_t + H)}{t}},
        \sqrt{\frac{H^3 \iota}{t}}\right\} + \frac{\sqrt{H^7 S A}\,\iota}{t} \right),

    with :math:`W_t` the empirical variance of :math:`V_{h+1}(s')` over the first
    :math:`t` visits: exact per visit in Case 1, and in Case 2 (where the server only
    receives means of :math:`v` and :math:`v^2`) the variance at the round's end for every
    visit of the round (our reading; the paper does not spell the aggregated bonus out).
    Agents upload one more number per triple (the mean of :math:`v^2`). Parameters as
    :class:`FedQHoeffding`.
    """

    uploads_per_triple = 4

    def _bonus(self, t, W):
        mdp = self.mdp
        H, S, A = mdp.H, mdp.S, mdp.A
        iota = self.iota_
        variance_term = np.minimum(np.sqrt(H * iota * (W + H) / t), np.sqrt(H**3 * iota / t))
        return self.c * (variance_term + math.sqrt(H**7 * S * A) * iota / t)


class UCBHoeffding:
    r"""UCB-Hoeffding Q-learning (Jin, Allen-Zhu, Bubeck & Jordan, NeurIPS 2018): one
    agent, an update after every step,
    :math:`Q_h(s,a) \leftarrow (1-\alpha_t) Q_h(s,a) + \alpha_t (r + V_{h+1}(s') + b_t)`,
    :math:`b_t = c \sqrt{H^3 \iota / t}`, :math:`\iota = \log(S A H T / p)`.

    A plain per-step loop, written independently of the federated learners (the
    reference they are tested against).

    Parameters
    ----------
    mdp : TabularMDP
    c, p, seed, iota
        As :class:`FedQHoeffding`.
    """

    def __init__(
        self,
        mdp: TabularMDP,
        *,
        c: float = 1.0,
        p: float = 0.01,
        seed: int = 0,
        iota: float | None = None,
    ) -> None:
        _check_learner(mdp, c, p, iota)
        check_scalar(seed, "seed", low=0, integer=True)
        self.mdp, self.c, self.p, self.seed, self.iota = mdp, c, p, seed, iota

    def run(self, T: int) -> RunResult:
        """``T`` episodes; each episode is one "round" of the result (per-episode
        regret of the greedy policy at its start)."""
        check_scalar(T, "T", low=1, integer=True)
        mdp = self.mdp
        H, S, A = mdp.H, mdp.S, mdp.A
        iota = self.iota if self.iota is not None else math.log(S * A * H * T / self.p)
        Q = np.full((H, S, A), float(H))
        V = np.zeros((H + 1, S))
        V[:H] = H
        N = np.zeros((H, S, A), dtype=np.int64)
        rng = np.random.default_rng(self.seed)
        cdfs = np.cumsum(mdp.P, axis=-1)
        regrets = np.empty(T)
        cache: dict[bytes, float] = {}
        for k in range(T):
            pi = Q.argmax(2)
            key = pi.tobytes()
            if key not in cache:
                cache[key] = mdp.regret(pi)
            regrets[k] = cache[key]
            s = mdp.s0
            for h in range(H):
                a = int(Q[h, s].argmax())
                nxt = min(int((rng.random() > cdfs[h, s, a]).sum()), S - 1)
                N[h, s, a] += 1
                t = N[h, s, a]
                alpha = (H + 1) / (H + t)
                bonus = self.c * math.sqrt(H**3 * iota / t)
                Q[h, s, a] = (1 - alpha) * Q[h, s, a] + alpha * (
                    mdp.R[h, s, a] + V[h + 1, nxt] + bonus
                )
                V[h, s] = min(H, Q[h, s].max())
                s = nxt
        self.Q_, self.V_, self.N_ = Q, V, N
        return RunResult(
            1, np.arange(1, T + 1), regrets, np.zeros(T, dtype=np.int64), federated=False
        )
