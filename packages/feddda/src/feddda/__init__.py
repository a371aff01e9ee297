"""feddda: Federated Disentangled Tuning with Textual Prior Decoupling and Visual Dynamic Adaptation (planned)."""

from importlib.metadata import version as _version

__version__ = _version("feddda")

__all__ = ["__version__"]
