"""tabicl-lite: TabICL: A Tabular Foundation Model for In-Context Learning on Large Data (planned)."""

from importlib.metadata import version as _version

__version__ = _version("tabicl-lite")

__all__ = ["__version__"]
