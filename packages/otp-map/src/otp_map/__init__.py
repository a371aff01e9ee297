"""otp-map: neural optimal transport plans where semi-dual neural OT fails.

:class:`OTP` learns the optimal transport plan between two measures given by samples by
smoothing the source with annealed Gaussian noise (Choi, Choi, Kwon, ICML 2025);
:class:`SemiDualOT` is the semi-dual neural OT baseline (SNOT / OTM) it fixes. Both are
torch models with ``fit`` / ``transport`` / ``potential`` / ``save_pretrained`` /
``from_pretrained``.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .costs import QuadraticCost
    from .models import OTP, NeuralOT, SemiDualOT
    from .schedules import (
        ConstantSchedule,
        CosineSchedule,
        GeometricSchedule,
        LinearSchedule,
        NoiseSchedule,
        schedule_from_dict,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("otp-map")

__all__ = [
    "OTP",
    "ConstantSchedule",
    "CosineSchedule",
    "GeometricSchedule",
    "LinearSchedule",
    "NeuralOT",
    "NoiseSchedule",
    "QuadraticCost",
    "SemiDualOT",
    "__version__",
    "schedule_from_dict",
]
