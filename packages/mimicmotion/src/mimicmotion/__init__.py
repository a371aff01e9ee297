"""mimicmotion: pose-guided human video generation of any length (MimicMotion, ICML 2025).

:class:`MimicMotionPipeline` is Stable Video Diffusion (diffusers) guided by rendered pose
frames through :class:`PoseNet`, whose features :class:`MimicMotionUNet` adds after
``conv_in``; long videos are denoised in overlapping windows that all contain the
reference frame and are fused with triangular weights (:mod:`mimicmotion.fusion`).
:mod:`mimicmotion.pose` renders confidence-aware pose images; :mod:`mimicmotion.training`
holds the regional loss amplification and a training step.
"""

from importlib.metadata import version as _version

from .convert import convert_official_checkpoint, load_mimicmotion, read_checkpoint
from .fusion import fuse, triangle_weights, windows
from .pipeline import MimicMotionPipeline
from .pose import PoseSequence, render, rescale_to_reference
from .posenet import PoseNet
from .training import region_mask, regional_loss, training_step, write_video
from .unet import MimicMotionUNet

__version__ = _version("mimicmotion")

__all__ = [
    "MimicMotionPipeline",
    "MimicMotionUNet",
    "PoseNet",
    "PoseSequence",
    "__version__",
    "convert_official_checkpoint",
    "fuse",
    "load_mimicmotion",
    "read_checkpoint",
    "region_mask",
    "regional_loss",
    "render",
    "rescale_to_reference",
    "training_step",
    "triangle_weights",
    "windows",
    "write_video",
]
