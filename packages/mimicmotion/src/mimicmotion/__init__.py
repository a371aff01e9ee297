"""mimicmotion: pose-guided human video generation of any length (MimicMotion, ICML 2025).

:class:`MimicMotionPipeline` is Stable Video Diffusion (diffusers) guided by rendered pose
frames through :class:`PoseNet`, whose features :class:`MimicMotionUNet` adds after
``conv_in``; long videos are denoised in overlapping windows that all contain the
reference frame and are fused with triangular weights (:mod:`mimicmotion.fusion`).
:mod:`mimicmotion.pose` renders confidence-aware pose images; :mod:`mimicmotion.training`
holds the regional loss amplification and a training step, :mod:`mimicmotion.trainer` a
training loop, :mod:`mimicmotion.data` synthetic stick-figure clips, and
:mod:`mimicmotion.dwpose` (extra ``dwpose``) keypoints from DWPose ONNX files.
"""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .convert import convert_official_checkpoint, load_mimicmotion, read_checkpoint
    from .data import StickFigureVideo, stick_figure_videos
    from .fusion import fuse, triangle_weights, windows
    from .pipeline import MimicMotionPipeline
    from .pose import PoseSequence, render, rescale_to_reference
    from .posenet import PoseNet
    from .trainer import EncodedClips, calibrate_scaling_factor, encode_clips, fit, region_errors
    from .training import denoise, region_mask, regional_loss, training_step, write_video
    from .unet import MimicMotionUNet

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("mimicmotion")

__all__ = [
    "EncodedClips",
    "MimicMotionPipeline",
    "MimicMotionUNet",
    "PoseNet",
    "PoseSequence",
    "StickFigureVideo",
    "__version__",
    "calibrate_scaling_factor",
    "convert_official_checkpoint",
    "denoise",
    "encode_clips",
    "fit",
    "fuse",
    "load_mimicmotion",
    "read_checkpoint",
    "region_errors",
    "region_mask",
    "regional_loss",
    "render",
    "rescale_to_reference",
    "stick_figure_videos",
    "training_step",
    "triangle_weights",
    "windows",
    "write_video",
]
