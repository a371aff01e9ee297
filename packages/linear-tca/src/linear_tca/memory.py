"""The tensor-memory meter of the experiment: :class:`icml25_core.memory.TensorMemoryTracker`
(it moved to icml25-core 0.2.1, where other packages use it too; re-exported here so
``from linear_tca import TensorMemoryTracker`` keeps working)."""

from icml25_core.memory import TensorMemoryTracker

__all__ = ["TensorMemoryTracker"]
