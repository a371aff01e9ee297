"""moequant: post-training quantization of mixture-of-experts language models (MoEQuant,
ICML 2025): expert-balanced self-sampling (EBSS) for calibration and affinity-guided GPTQ
(AGQ), with GPTQ and round-to-nearest baselines, packed-integer modules and save/load."""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .adapters import ADAPTERS, MoEAdapter, register_adapter
    from .calibration import ebss, expert_balance, random_tokens, routing_counts, self_generate
    from .evaluation import perplexity
    from .export import export
    from .gptq_solver import Hessian, gptq, reconstruction_error
    from .io import load_quantized, save_quantized
    from .layerwise import QuantConfig, quantize
    from .modules import KERNELS, PackedWeight, QuantExperts, QuantLinear, QuantRouter, set_kernel
    from .quantizer import QuantizedWeight, pack, rtn, unpack
    from .rotation import rotate

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("moequant")

__all__ = [
    "ADAPTERS",
    "KERNELS",
    "Hessian",
    "MoEAdapter",
    "PackedWeight",
    "QuantConfig",
    "QuantExperts",
    "QuantLinear",
    "QuantRouter",
    "QuantizedWeight",
    "__version__",
    "ebss",
    "expert_balance",
    "export",
    "gptq",
    "load_quantized",
    "pack",
    "perplexity",
    "quantize",
    "random_tokens",
    "reconstruction_error",
    "register_adapter",
    "rotate",
    "routing_counts",
    "rtn",
    "save_quantized",
    "self_generate",
    "set_kernel",
    "unpack",
]
