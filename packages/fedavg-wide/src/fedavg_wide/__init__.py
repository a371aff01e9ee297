"""fedavg-wide: FedAvg in the wide-network regime.

Jian and Liu, "Widening the Network Mitigates the Impact of Data Heterogeneity on FedAvg"
(ICML 2025). Networks of any width in the NTK or standard parameterization
(:class:`MLP`, :class:`CNN`, the analytic ReLU NTK :func:`analytic_ntk`), FedAvg exactly
as analysed (:func:`FedAvg`: tau local GD/SGD steps, sample-weighted server mean, full or
partial participation) beside the centralized reference at equal gradient steps
(:func:`centralized_gd`), and the tools that measure how far training is from the NTK
regime (:func:`linearize`, :func:`empirical_ntk`, :func:`relative_weight_change`,
:func:`ntk_change`). The same algorithm runs as a Flower app (:func:`simulate`,
``fedavg_wide.server_app:app`` / ``fedavg_wide.client_app:app``).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .data import (
        dirichlet_partition,
        iid_partition,
        load_digits,
        make_clients,
        pathological_partition,
        synthetic_regression,
    )
    from .fedavg import FedAvg, History, batch_seed, centralized_gd, evaluate, local_update
    from .linearization import (
        LinearizedModel,
        empirical_ntk,
        linearization_gap,
        linearize,
        ntk_change,
        relative_weight_change,
        weight_rmse,
    )
    from .models import CNN, MLP, analytic_ntk
    from .simulation import simulate
    from .task import Settings, build_model, federated_data, load_global

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("fedavg-wide")

__all__ = [
    "CNN",
    "MLP",
    "FedAvg",
    "History",
    "LinearizedModel",
    "Settings",
    "__version__",
    "analytic_ntk",
    "batch_seed",
    "build_model",
    "centralized_gd",
    "dirichlet_partition",
    "empirical_ntk",
    "evaluate",
    "federated_data",
    "iid_partition",
    "linearization_gap",
    "linearize",
    "load_digits",
    "load_global",
    "local_update",
    "make_clients",
    "ntk_change",
    "pathological_partition",
    "relative_weight_change",
    "simulate",
    "synthetic_regression",
    "weight_rmse",
]
