"""fedavg-wide: Widening the Network Mitigates the Impact of Data Heterogeneity on FedAvg (planned)."""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    pass

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("fedavg-wide")

__all__ = ["__version__"]
