"""feddda: Federated Disentangled Tuning with Textual Prior Decoupling and Visual Dynamic
Adaptation (FedDDA, ICML 2025) on transformers' CLIP, as a Flower app.

The model (:class:`FedDDAModel`), the federated pieces without Flower (:mod:`feddda.federated`),
the Flower apps (``feddda.client_app:app``, ``feddda.server_app:app``), synthetic captioned
images in several styles and a client partitioner (:mod:`feddda.data`), and a small CLIP
pretrained on them (:mod:`feddda.pretrain`).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .data import SHAPES, STYLES, ImageSet, image_folder, partition, synthetic_images
    from .federated import (
        METHODS,
        Settings,
        build_model,
        client_data,
        evaluate,
        local_train,
        shared_part,
    )
    from .model import Adapter, FedDDAModel, PromptLearner
    from .pretrain import cached_clip, pretrain_clip
    from .simulation import simulate
    from .text import word_tokenizer

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("feddda")

__all__ = [
    "METHODS",
    "SHAPES",
    "STYLES",
    "Adapter",
    "FedDDAModel",
    "ImageSet",
    "PromptLearner",
    "Settings",
    "__version__",
    "build_model",
    "cached_clip",
    "client_data",
    "evaluate",
    "image_folder",
    "local_train",
    "partition",
    "pretrain_clip",
    "shared_part",
    "simulate",
    "synthetic_images",
    "word_tokenizer",
]
