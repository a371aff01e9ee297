r"""Finite-horizon tabular MDPs with exact dynamic programming.

An episodic MDP has horizon :math:`H`, states :math:`\mathcal S` (:math:`S` of them),
actions :math:`\mathcal A` (:math:`A`), step-dependent transitions
:math:`P_h(\cdot \mid s, a)` and mean rewards :math:`r_h(s, a) \in [0, 1]`; every episode
starts in :math:`s_1`. Steps are indexed :math:`h = 0, \dots, H-1` here (the papers count
from 1), and :math:`V_H \equiv 0`.

.. math::

    Q^\star_h(s, a) = r_h(s, a) + \sum_{s'} P_h(s' \mid s, a) V^\star_{h+1}(s'), \qquad
    V^\star_h(s) = \max_a Q^\star_h(s, a), \qquad
    \Delta_h(s, a) = V^\star_h(s) - Q^\star_h(s, a).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from icml25_core import as_float_array, check_scalar


class TabularMDP:
    r"""An episodic tabular MDP.

    Parameters
    ----------
    P : array_like, shape (H, S, A, S) or (S, A, S)
        Transition probabilities :math:`P_h(s' \mid s, a)`; a 3-d array is the same at
        every step. Each ``P[h, s, a]`` must be a distribution (non-negative, sums to 1
        within 1e-8).
    R : array_like, shape (H, S, A) or (S, A)
        Mean rewards in :math:`[0, 1]` (rewards are deterministic in the simulation).
    H : int, optional
        Horizon; required when ``P`` is 3-d, checked against ``P`` otherwise.
    s0 : int, default=0
        The initial state :math:`s_1`.
    """

    def __init__(self, P: Any, R: Any, H: int | None = None, s0: int = 0) -> None:
        P = as_float_array(P, "P", nonnegative=True)
        R = as_float_array(R, "R", nonnegative=True)
        if P.ndim == 3:
            if H is None:
                raise ValueError("H must be given when P is (S, A, S), the same at every step")
            check_scalar(H, "H", low=1, integer=True)
            P = np.broadcast_to(P, (H, *P.shape)).copy()
        if P.ndim != 4 or P.shape[1] != P.shape[3]:
            raise ValueError(f"P must have shape (H, S, A, S) or (S, A, S), got {P.shape}")
        if H is None:
            H = P.shape[0]
        check_scalar(H, "H", low=1, integer=True)
        if P.shape[0] != H:
            raise ValueError(f"P has {P.shape[0]} steps but H={H}")
        _, S, A, _ = P.shape
        if R.ndim == 2:
            R = np.broadcast_to(R, (H, *R.shape)).copy()
        if R.shape != (H, S, A):
            raise ValueError(f"R must have shape (H, S, A) = {(H, S, A)} or (S, A), got {R.shape}")
        if float(R.max()) > 1.0:
            raise ValueError(f"R must have rewards in [0, 1], got maximum {float(R.max())!r}")
        sums = P.sum(-1)
        worst = float(np.abs(sums - 1.0).max())
        if worst > 1e-8:
            h, s, a = np.unravel_index(np.abs(sums - 1.0).argmax(), sums.shape)
            raise ValueError(
                f"P[h, s, a] must sum to 1 over next states; P[{h}, {s}, {a}] sums to "
                f"{sums[h, s, a]!r}"
            )
        check_scalar(s0, "s0", low=0, high=S - 1, integer=True)
        self.P = P / sums[..., None]
        self.R = R
        self.H, self.S, self.A, self.s0 = int(H), int(S), int(A), int(s0)

    def __repr__(self) -> str:
        return f"TabularMDP(H={self.H}, S={self.S}, A={self.A}, s0={self.s0})"

    @cached_property
    def _optimal(self) -> tuple[np.ndarray, np.ndarray]:
        Q = np.zeros((self.H, self.S, self.A))
        V = np.zeros((self.H + 1, self.S))
        for h in range(self.H - 1, -1, -1):
            Q[h] = self.R[h] + self.P[h] @ V[h + 1]
            V[h] = Q[h].max(1)
        return Q, V

    def q_star(self) -> np.ndarray:
        """:math:`Q^\\star`, shape ``(H, S, A)``."""
        return self._optimal[0].copy()

    def v_star(self) -> np.ndarray:
        """:math:`V^\\star`, shape ``(H + 1, S)`` (the last row is 0)."""
        return self._optimal[1].copy()

    def gaps(self) -> np.ndarray:
        """Suboptimality gaps :math:`\\Delta_h(s, a) = V^\\star_h(s) - Q^\\star_h(s, a)`,
        shape ``(H, S, A)`` (0 at optimal actions)."""
        Q, V = self._optimal
        return V[:-1, :, None] - Q

    def min_gap(self) -> float:
        """:math:`\\Delta_{\\min}`, the smallest strictly positive gap (``inf`` if every
        action is optimal everywhere). Gaps below 1e-12 count as ties."""
        g = self.gaps()
        positive = g[g > 1e-12]
        return float(positive.min()) if positive.size else float("inf")

    def policy_value(self, policy: Any) -> np.ndarray:
        """:math:`V^\\pi`, shape ``(H + 1, S)``, of a deterministic policy ``policy`` of
        shape ``(H, S)`` (action indices)."""
        pi = np.asarray(policy)
        if pi.shape != (self.H, self.S):
            raise ValueError(
                f"policy must be ({self.H}, {self.S}) action indices (H, S), got shape {pi.shape}"
            )
        if not np.issubdtype(pi.dtype, np.integer):
            raise TypeError(
                f"policy must hold integer action indices, got dtype {pi.dtype} "
                "(convert a greedy policy with .astype(int))"
            )
        if pi.min() < 0 or pi.max() >= self.A:
            raise ValueError(f"policy actions must be in [0, {self.A}), got {pi.min()}..{pi.max()}")
        V = np.zeros((self.H + 1, self.S))
        states = np.arange(self.S)
        for h in range(self.H - 1, -1, -1):
            a = pi[h]
            V[h] = self.R[h, states, a] + self.P[h, states, a] @ V[h + 1]
        return V

    def regret(self, policy: Any) -> float:
        """Regret of one episode of ``policy``: :math:`V^\\star_1(s_1) - V^\\pi_1(s_1)`."""
        return float(self._optimal[1][0, self.s0] - self.policy_value(policy)[0, self.s0])


def random_mdp(
    H: int, S: int, A: int, seed: int = 0, *, min_gap: float | None = None
) -> TabularMDP:
    r"""A random MDP: :math:`r_h(s, a) \sim U[0, 1]` and :math:`P_h(\cdot \mid s, a)`
    uniform draws normalised (as in the FedQ experiments), start state 0.

    With ``min_gap``, rewards are then moved, step by step from the last, so that every
    suboptimal action's gap is at least ``min_gap``: a suboptimal reward is lowered (to 0
    at most) and, if that is not enough, the optimal action's reward is raised. Steps
    after ``h`` are already final, so :math:`V^\star_{h+1}` does not move. Raises if a
    gap cannot be reached with rewards in [0, 1].
    """
    for name, value in (("H", H), ("S", S), ("A", A)):
        check_scalar(value, name, low=1, integer=True)
    rng = np.random.default_rng(seed)
    P = rng.random((H, S, A, S))
    P /= P.sum(-1, keepdims=True)
    R = rng.random((H, S, A))
    if min_gap is not None:
        check_scalar(min_gap, "min_gap", low=0.0, high=1.0, low_inclusive=False)
        V_next = np.zeros(S)
        for h in range(H - 1, -1, -1):
            future = P[h] @ V_next  # (S, A)
            for s in range(S):
                q = R[h, s] + future[s]
                best = int(q.argmax())
                for a in range(A):
                    if a == best:
                        continue
                    short = min_gap - (q[best] - q[a])
                    if short > 0:
                        lower = min(short, R[h, s, a])
                        R[h, s, a] -= lower
                        R[h, s, best] += short - lower
                        q = R[h, s] + future[s]
                if R[h, s, best] > 1.0:
                    raise ValueError(
                        f"min_gap={min_gap} cannot be reached with rewards in [0, 1] at "
                        f"step {h}, state {s}; use a smaller min_gap"
                    )
            V_next = (R[h] + future).max(1)
    return TabularMDP(P, R, H, s0=0)


def from_gymnasium(env: Any, H: int, *, s0: int | None = None) -> TabularMDP:
    """The tabular MDP of a gymnasium toy-text environment exposing ``P[s][a]``
    (FrozenLake, CliffWalking, Taxi...), over horizon ``H``.

    ``P[s][a]`` lists ``(probability, next_state, reward, terminated)``. Terminal
    transitions lead to one absorbing state (an extra state, the last) whose reward is
    what a zero reward maps to. Rewards are mapped affinely onto [0, 1] from the range found in ``P`` when
    they leave it (e.g. Taxi's -10..20); mean rewards over next states are used.

    Parameters
    ----------
    env : gymnasium.Env
        A made environment (``gymnasium.make("FrozenLake-v1")``); its ``unwrapped.P`` is
        read.
    H : int
        Horizon.
    s0 : int, optional
        Start state; default: the one ``env.reset(seed=0)`` returns.
    """
    check_scalar(H, "H", low=1, integer=True)
    table = getattr(getattr(env, "unwrapped", env), "P", None)
    if not isinstance(table, dict) or not table:
        raise ValueError("env must expose a tabular model P[s][a] (a gymnasium toy-text env)")
    n_states = len(table)
    if sorted(table) != list(range(n_states)):
        raise ValueError(f"env.P must be keyed by the states 0..{n_states - 1}")
    n_actions = len(table[0])
    absorbing = n_states
    S = n_states + 1
    P = np.zeros((S, n_actions, S))
    R = np.zeros((S, n_actions))
    rewards = [r for s in table for a in table[s] for (_, _, r, _) in table[s][a]]
    lo, hi = min([*rewards, 0.0]), max([*rewards, 0.0])
    scale = (lambda r: r) if lo >= 0 and hi <= 1 else (lambda r: (r - lo) / (hi - lo))
    for s in range(n_states):
        for a in range(n_actions):
            for prob, nxt, reward, terminated in table[s][a]:
                if not terminated and not (
                    isinstance(nxt, int | np.integer) and 0 <= nxt < n_states
                ):
                    raise ValueError(
                        f"env.P[{s}][{a}] leads to next state {nxt!r}, outside the "
                        f"{n_states} states 0..{n_states - 1} of env.P"
                    )
                P[s, a, absorbing if terminated else nxt] += prob
                R[s, a] += prob * scale(reward)
    P[absorbing, :, absorbing] = 1.0
    R[absorbing] = scale(0.0)  # after termination: what a zero reward maps to
    R = np.clip(R, 0.0, 1.0)
    if s0 is None:
        s0 = int(env.reset(seed=0)[0])
    return TabularMDP(P, R, H, s0=s0)
