"""moequant: post-training quantization of mixture-of-experts language models (MoEQuant,
ICML 2025): expert-balanced self-sampling (EBSS) for calibration and affinity-guided GPTQ
(AGQ), with GPTQ and round-to-nearest baselines, packed-integer modules and save/load."""

from importlib.metadata import version as _version

from .adapters import ADAPTERS, MoEAdapter, register_adapter
from .gptq import Hessian, gptq, reconstruction_error
from .modules import PackedWeight, QuantExperts, QuantLinear, QuantRouter
from .quantize import QuantConfig, quantize
from .quantizer import QuantizedWeight, pack, rtn, unpack

__version__ = _version("moequant")

__all__ = [
    "ADAPTERS",
    "Hessian",
    "MoEAdapter",
    "PackedWeight",
    "QuantConfig",
    "QuantExperts",
    "QuantLinear",
    "QuantRouter",
    "QuantizedWeight",
    "__version__",
    "gptq",
    "pack",
    "quantize",
    "reconstruction_error",
    "register_adapter",
    "rtn",
    "unpack",
]
