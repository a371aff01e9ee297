"""kuea: kernel-based unsupervised alignment of CLIP's image encoder to a teacher.

Gong, Jiang, Dou and Farnia, "Kernel-based Unsupervised Embedding Alignment for Enhanced
Visual Representation in Vision-language Models" (ICML 2025). :func:`align` fine-tunes only
the image tower of a CLIP model (transformers ``CLIPModel`` or open_clip) on unlabelled
images so that the kernel matrix of its embeddings matches a vision-centric teacher's
(DINOv2, any callable), regularized towards the frozen original so that the frozen text
tower stays compatible. Kernels (:mod:`kuea.kernels`), the fit of their parameters
(:func:`fit_kernel_params`), evaluation (:func:`zero_shot_accuracy`,
:func:`linear_probe`, :func:`retrieval_recall_at_1`) and a generated image world with a
tiny CLIP for experiments (:mod:`kuea.synthetic`).
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    from .alignment import OBJECTIVES, AlignResult, align
    from .checkpoints import latest_checkpoint
    from .evaluation import (
        image_embeddings,
        linear_probe,
        retrieval_recall_at_1,
        text_embeddings,
        zero_shot_accuracy,
    )
    from .fitting import KernelFit, fit_kernel_params, median_bandwidth
    from .kernels import (
        KERNELS,
        StudentKernel,
        cosine_kernel,
        gaussian_kernel,
        kernel_matrix,
        normalize_kernel,
        polynomial_kernel,
        teacher_kernel,
    )
    from .losses import alignment_loss, regularization_loss
    from .synthetic import (
        PixelStatsTeacher,
        ShapeWorld,
        WordTokenizer,
        make_shapes,
        tiny_clip,
        train_clip,
    )
    from .towers import ImageTower, as_teacher, image_tower

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("kuea")

__all__ = [
    "KERNELS",
    "OBJECTIVES",
    "AlignResult",
    "ImageTower",
    "KernelFit",
    "PixelStatsTeacher",
    "ShapeWorld",
    "StudentKernel",
    "WordTokenizer",
    "__version__",
    "align",
    "alignment_loss",
    "as_teacher",
    "cosine_kernel",
    "fit_kernel_params",
    "gaussian_kernel",
    "image_embeddings",
    "image_tower",
    "kernel_matrix",
    "latest_checkpoint",
    "linear_probe",
    "make_shapes",
    "median_bandwidth",
    "normalize_kernel",
    "polynomial_kernel",
    "regularization_loss",
    "retrieval_recall_at_1",
    "teacher_kernel",
    "text_embeddings",
    "tiny_clip",
    "train_clip",
    "zero_shot_accuracy",
]
