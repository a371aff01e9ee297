"""fedq-gap: gap-dependent federated Q-learning (Zhang, Zheng & Xue, ICML 2025).

FedQ-Hoeffding and FedQ-Bernstein (Zheng, Gao, Xue & Yang, 2023) on tabular episodic
MDPs: M agents explore with the server's greedy policy, rounds end by an event-triggered
rule, the server aggregates the agents' visit counts and value means. With a strictly
positive suboptimality gap the regret grows like log T, not sqrt T, and the
communication rounds like log T with a slope free of M, S and A. This package simulates
all agents in lock-step with NumPy, computes each round's regret exactly by dynamic
programming, and ships the single-agent UCB-Hoeffding baseline, random and gap-controlled
MDPs, and an adapter for gymnasium's toy-text environments.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .agents import FedQBernstein, FedQHoeffding, RunResult, UCBHoeffding
    from .mdp import TabularMDP, from_gymnasium, random_mdp

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("fedq-gap")

__all__ = [
    "FedQBernstein",
    "FedQHoeffding",
    "RunResult",
    "TabularMDP",
    "UCBHoeffding",
    "__version__",
    "from_gymnasium",
    "random_mdp",
]
