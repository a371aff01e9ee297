"""gsb-sinkhorn: Sinkhorn's algorithm for the generalized static Schrödinger bridge.

Entropic optimal transport is the KL case of a wider family: any strictly convex
divergence gives a static Schrödinger bridge that Sinkhorn's algorithm solves with linear
convergence (Choudhary & Lyu, ICML 2025). This package solves it for KL, the logistic
divergence (maximum-entropy bipartite graphs), Barvinok's contingency divergence (typical
tables) and any user-defined divergence, on NumPy arrays or torch tensors (CPU or GPU).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .applications import (
        gale_ryser_feasible,
        random_bipartite_graph,
        random_contingency_table,
        typical_table,
    )
    from .baselines import dual_lbfgs
    from .divergences import CONTINGENCY, KL, LOGISTIC, PRESETS, Divergence, get_divergence
    from .solver import (
        ConvergenceWarning,
        dual_objective,
        marginal_error,
        primal_objective,
        sinkhorn,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("gsb-sinkhorn")

__all__ = [
    "CONTINGENCY",
    "KL",
    "LOGISTIC",
    "PRESETS",
    "ConvergenceWarning",
    "Divergence",
    "__version__",
    "dual_lbfgs",
    "dual_objective",
    "gale_ryser_feasible",
    "get_divergence",
    "marginal_error",
    "primal_objective",
    "random_bipartite_graph",
    "random_contingency_table",
    "sinkhorn",
    "typical_table",
]
