"""drebo-ssl: density-ratio-estimation Bayesian optimisation with semi-supervised learning.

:class:`DREBOSSL` (ask/tell) and :func:`minimize` implement DRE-BO-SSL (J. Kim, ICML 2025):
the best ``zeta`` fraction of observations is labelled good, unlabelled points are added,
label propagation or label spreading (scikit-learn) estimates the probability of being
good, and the next point maximises it. Baselines on the same interface: :class:`BORE`
(supervised classifier), :class:`GPLogEI` (BoTorch), :class:`TPE` (optuna) and
:class:`RandomSearch`.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .base import (
        AskTellOptimizer,
        DensityRatioOptimizer,
        OptimizeResult,
        check_bounds,
        run_loop,
    )
    from .baselines import BORE, TPE, GPLogEI, RandomSearch
    from .labels import quantile_labels
    from .optimizer import DREBOSSL, minimize
    from .problems import PROBLEMS, Problem, get_problem
    from .ssl import class1_probability, mean_entropy, select_bandwidth

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("drebo-ssl")

__all__ = [
    "BORE",
    "DREBOSSL",
    "PROBLEMS",
    "TPE",
    "AskTellOptimizer",
    "DensityRatioOptimizer",
    "GPLogEI",
    "OptimizeResult",
    "Problem",
    "RandomSearch",
    "__version__",
    "check_bounds",
    "class1_probability",
    "get_problem",
    "mean_entropy",
    "minimize",
    "quantile_labels",
    "run_loop",
    "select_bandwidth",
]
