"""mimicmotion: MimicMotion: High-Quality Human Motion Video Generation with Confidence-aware Pose Guidance (planned)."""

from importlib.metadata import version as _version

__version__ = _version("mimicmotion")

__all__ = ["__version__"]
