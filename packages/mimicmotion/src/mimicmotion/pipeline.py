"""MimicMotionPipeline: pose-guided image-to-video with progressive latent fusion."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from diffusers import StableVideoDiffusionPipeline
from diffusers.pipelines.stable_video_diffusion.pipeline_stable_video_diffusion import (
    StableVideoDiffusionPipelineOutput,
)
from diffusers.utils.torch_utils import randn_tensor

from icml25_core import check_array, check_memory, check_scalar

from .fusion import check_tiling, fuse, windows

#: latent tokens of one frame at the resolution MimicMotion was trained at (576 x 1024)
TRAINED_TOKENS = (576 // 8) * (1024 // 8)
#: a latent grid above this many times :data:`TRAINED_TOKENS` draws a warning with the cost
LARGE_GRID = 4


def spatial_attention_flops(unet_config, height: int, width: int) -> float:
    """Floating-point operations of the spatial self-attention in one UNet pass over one
    frame at ``height x width`` pixels: ``4 N^2 C`` per attention layer (scores and their
    product with the values), ``N`` the layer's tokens (``(height / 8) (width / 8)`` at the
    first level, a quarter per level down) and ``C`` its channels. The part of the cost that
    grows with the square of the pixel count."""
    tokens = (height // 8) * (width // 8)
    levels = len(unet_config.block_out_channels)

    def per_level(value, level):
        return value[level] if isinstance(value, list | tuple) else value

    total = 0.0
    for level, (kind, channels) in enumerate(
        zip(unet_config.down_block_types, unet_config.block_out_channels, strict=True)
    ):
        if "CrossAttn" not in kind:
            continue
        layers = 2 * per_level(unet_config.layers_per_block, level) + 1  # down + up blocks
        depth = per_level(unet_config.transformer_layers_per_block, level)
        total += layers * depth * 4 * (tokens / 4**level) ** 2 * channels
    top = levels - 1  # the mid block, at the lowest resolution
    depth = per_level(unet_config.transformer_layers_per_block, top)
    return total + depth * 4 * (tokens / 4**top) ** 2 * unet_config.block_out_channels[top]


def check_pose_frames(pose_frames) -> torch.Tensor:
    """``pose_frames`` as a tensor in its own layout and dtype, or a clear ``ValueError``.

    Accepts a uint8 array/tensor ``(F, H, W, 3)`` (rendered images) or a float tensor
    ``(F, 3, H, W)`` already in ``[-1, 1]``.
    """
    if isinstance(pose_frames, np.ndarray):
        pose_frames = torch.from_numpy(pose_frames)
    if not isinstance(pose_frames, torch.Tensor) or pose_frames.ndim != 4:
        raise ValueError(
            "pose_frames must be a (F, H, W, 3) uint8 array or a (F, 3, H, W) float tensor, "
            f"got {type(pose_frames).__name__} of shape {getattr(pose_frames, 'shape', None)}"
        )
    if pose_frames.dtype == torch.uint8 and pose_frames.shape[-1] != 3:
        raise ValueError(f"uint8 pose_frames must be (F, H, W, 3), got {tuple(pose_frames.shape)}")
    if pose_frames.dtype != torch.uint8 and pose_frames.shape[1] != 3:
        raise ValueError(f"float pose_frames must be (F, 3, H, W), got {tuple(pose_frames.shape)}")
    if pose_frames.shape[0] == 0:
        raise ValueError("pose_frames has no frames")
    if pose_frames.dtype != torch.uint8:
        if not pose_frames.is_floating_point():
            raise TypeError(
                f"pose_frames must be uint8 images or floats in [-1, 1], got {pose_frames.dtype}"
            )
        if not bool(torch.isfinite(pose_frames).all()):
            raise ValueError("pose_frames must be finite (no NaN or inf)")
        low, high = float(pose_frames.min()), float(pose_frames.max())
        if low < -1.0 - 1e-3 or high > 1.0 + 1e-3:
            raise ValueError(
                f"float pose_frames must be in [-1, 1], got values in [{low:.3g}, {high:.3g}] "
                "(images in [0, 255] go in as uint8 (F, H, W, 3))"
            )
    return pose_frames


def check_reference_image(image):
    """The reference ``image``: a PIL RGB image, or a tensor ``(1, 3, H, W)`` in ``[0, 1]``;
    anything else is refused naming ``image``."""
    from PIL import Image

    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            raise ValueError(
                f"image must be an RGB image, got mode {image.mode!r}: image.convert('RGB')"
            )
        return image
    if not isinstance(image, torch.Tensor):
        raise TypeError(
            "image must be a PIL.Image or a (1, 3, H, W) tensor in [0, 1], got "
            f"{type(image).__name__} (for a file, PIL.Image.open(path).convert('RGB'))"
        )
    check_array(image, "image", ndim=4)
    if image.shape[0] != 1 or image.shape[1] != 3:
        raise ValueError(
            f"image must be one RGB image (1, 3, H, W), got shape {tuple(image.shape)} (the "
            "pipeline animates one reference image per call)"
        )
    low, high = float(image.min()), float(image.max())
    if low < -1e-3 or high > 1.0 + 1e-3:
        raise ValueError(
            f"image must be in [0, 1], got values in [{low:.3g}, {high:.3g}] (divide by 255?)"
        )
    return image


def pose_tensor(pose_frames) -> torch.Tensor:
    """Pose frames (see :func:`check_pose_frames`) as floats ``(F, 3, H, W)`` in ``[-1, 1]``."""
    return _as_float_poses(check_pose_frames(pose_frames))


def _as_float_poses(pose_frames: torch.Tensor) -> torch.Tensor:
    """Frames already checked by :func:`check_pose_frames` as floats ``(F, 3, H, W)``."""
    if pose_frames.dtype == torch.uint8:
        return pose_frames.permute(0, 3, 1, 2).float() / 127.5 - 1.0
    return pose_frames.float()


class MimicMotionPipeline(StableVideoDiffusionPipeline):
    """Stable Video Diffusion guided by a pose sequence, of any length (MimicMotion).

    Components: ``vae`` (``AutoencoderKLTemporalDecoder``), ``image_encoder``
    (``CLIPVisionModelWithProjection``), ``unet`` (:class:`MimicMotionUNet`), ``scheduler``
    (``EulerDiscreteScheduler``), ``feature_extractor`` (``CLIPImageProcessor``) and
    ``pose_net`` (:class:`PoseNet`).
    """

    model_cpu_offload_seq = "image_encoder->pose_net->unet->vae"

    # no annotations: with postponed evaluation they are strings, which diffusers 0.35 cannot
    # resolve when it type-checks the components in from_pretrained (KeyError 'pose_net')
    def __init__(self, vae, image_encoder, unet, scheduler, feature_extractor, pose_net):
        super().__init__(vae, image_encoder, unet, scheduler, feature_extractor)
        self.register_modules(pose_net=pose_net)

    def _check_memory(self, height, width, n_frames, tile_size, decode_chunk_size, cfg, output):
        """Refuse a resolution whose activations cannot fit, before anything is allocated.

        A lower bound: the input and output of one convolution at the UNet's first level
        for one window (``2 x tile_size`` frames with guidance, ``block_out_channels[0]``
        channels at the latent resolution) and, unless only latents are returned, at the
        VAE decoder's last level (``decode_chunk_size`` frames, ``block_out_channels[0]``
        channels at the output resolution).
        """
        itemsize = self.unet.dtype.itemsize
        frames = (2 if cfg else 1) * min(tile_size, n_frames)
        factor = self.vae_scale_factor
        unet = (
            2
            * frames
            * self.unet.config.block_out_channels[0]
            * (height // factor)
            * (width // factor)
        )
        vae = 0
        if output != "latent":
            chunk = min(decode_chunk_size, n_frames)
            vae = 2 * chunk * self.vae.config.block_out_channels[0] * height * width
        check_memory(
            itemsize * max(unet, vae),
            "pose_frames",
            device=self._execution_device,
            what=f"activations of one UNet window or VAE decode chunk at {height}x{width}; a "
            "lower resolution, tile_size or decode_chunk_size needs less",
        )

    @torch.no_grad()
    def __call__(
        self,
        image,
        pose_frames,
        num_frames: int | None = None,
        tile_size: int = 16,
        tile_overlap: int = 4,
        num_inference_steps: int = 25,
        guidance_scale: float = 2.0,
        fps: int = 7,
        motion_bucket_id: int = 127,
        noise_aug_strength: float = 0.02,
        decode_chunk_size: int = 8,
        generator: torch.Generator | None = None,
        output_type: str = "pil",
        callback_on_step_end: Callable | None = None,
        return_dict: bool = True,
    ):
        """Generate ``num_frames`` frames of the reference ``image`` following ``pose_frames``.

        Parameters
        ----------
        image : PIL.Image or Tensor (1, 3, H, W) in [0, 1]
            The reference frame (frame 0 of the output).
        pose_frames : uint8 array (F, H, W, 3) or float Tensor (F, 3, H, W) in [-1, 1]
            Rendered poses; frame 0 is the reference pose. ``H`` and ``W`` set the output
            resolution and must be multiples of the latent factor (8).
        num_frames : int, optional
            Defaults to ``F``; must equal it.
        tile_size, tile_overlap : int
            Window length and overlap of progressive latent fusion.
        num_inference_steps, guidance_scale : int, float
            Euler steps; classifier-free guidance on pose and reference (``> 1`` enables it).
        fps, motion_bucket_id, noise_aug_strength : SVD micro-conditioning.
        decode_chunk_size : int
            Frames the VAE decodes at a time.
        generator : torch.Generator, optional
        output_type : {"pil", "np", "pt", "latent"}
        callback_on_step_end : callable, optional
            ``f(pipe, step, timestep, {"latents": latents}) -> dict``; a returned
            ``"latents"`` replaces the latents.

        Returns
        -------
        StableVideoDiffusionPipelineOutput or tuple
        """
        pose_frames = check_pose_frames(pose_frames)  # converted to floats window by window
        pose_shape = _as_float_poses(pose_frames[:1]).shape
        n_frames = pose_frames.shape[0] if num_frames is None else num_frames
        if pose_frames.shape[0] != n_frames:
            raise ValueError(
                f"pose_frames has {pose_frames.shape[0]} frames but num_frames is {n_frames}"
            )
        height, width = pose_shape[-2:]
        factor = self.vae_scale_factor
        if height % factor or width % factor or factor != 8:
            raise ValueError(
                f"pose_frames resolution {height}x{width} must be divisible by the latent factor "
                f"{factor}, which must be 8 (PoseNet downsamples by 8)"
            )
        check_tiling(n_frames, tile_size, tile_overlap)
        if output_type not in ("pil", "np", "pt", "latent"):
            raise ValueError(f"output_type must be pil, np, pt or latent, got {output_type!r}")
        check_scalar(num_inference_steps, "num_inference_steps", low=1, integer=True)
        check_scalar(decode_chunk_size, "decode_chunk_size", low=1, integer=True)
        check_scalar(guidance_scale, "guidance_scale", low=0.0)
        check_scalar(noise_aug_strength, "noise_aug_strength", low=0.0)
        check_scalar(fps, "fps", low=1, integer=True)
        check_scalar(motion_bucket_id, "motion_bucket_id", low=0, integer=True)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"generator must be a torch.Generator or None, got {type(generator).__name__} "
                "(for a seed, pass torch.Generator().manual_seed(seed))"
            )
        image = check_reference_image(image)
        if isinstance(image, torch.Tensor):  # one path for tensors and PIL: CLIP resizing
            image = self.video_processor.numpy_to_pil(self.video_processor.pt_to_numpy(image))[0]
        device = self._execution_device
        cfg = guidance_scale > 1.0
        self._guidance_scale = guidance_scale
        self._check_memory(height, width, n_frames, tile_size, decode_chunk_size, cfg, output_type)
        n_windows = len(windows(n_frames, tile_size, tile_overlap))
        if (height // factor) * (width // factor) > LARGE_GRID * TRAINED_TOKENS:
            frames = (2 if cfg else 1) * min(tile_size, n_frames)
            flops = spatial_attention_flops(self.unet.config, height, width) * frames
            warnings.warn(
                f"pose_frames at {height}x{width} are {height * width / (576 * 1024):.0f}x the "
                f"576x1024 pixels MimicMotion was trained at; spatial attention grows with the "
                f"square of the pixels: about {flops / 1e12:.3g} TFLOP per window and step, "
                f"{flops * n_windows * num_inference_steps / 1e15:.3g} PFLOP for the call "
                f"({n_windows} windows x {num_inference_steps} steps)",
                stacklevel=2,
            )

        embeds = self._encode_image(image, device, 1, cfg)
        ref = self.video_processor.preprocess(image, height=height, width=width).to(device)
        ref = ref + noise_aug_strength * randn_tensor(ref.shape, generator, device, ref.dtype)
        ref_latents = self._encode_vae_image(ref, device, 1, cfg).to(embeds.dtype)
        ref_latents = ref_latents.unsqueeze(1).expand(-1, n_frames, -1, -1, -1)
        time_ids = self._get_add_time_ids(
            fps - 1, motion_bucket_id, noise_aug_strength, embeds.dtype, 1, 1, cfg
        ).to(device)
        self.scheduler.set_timesteps(num_inference_steps, device=device)
        timesteps = self.scheduler.timesteps

        # one tile of noise, repeated: every window starts from the same noise pattern
        tile = self.prepare_latents(
            1,
            tile_size,
            self.unet.config.in_channels,
            height,
            width,
            embeds.dtype,
            device,
            generator,
        )
        latents = tile.repeat(1, math.ceil(n_frames / tile_size), 1, 1, 1)[:, :n_frames]

        def window(idx: list[int], x: torch.Tensor, t) -> torch.Tensor:
            """Guided noise prediction of the frames ``idx``; batch (uncond, cond) with CFG."""
            xi = x[:, idx].repeat(2 if cfg else 1, 1, 1, 1, 1)
            inputs = torch.cat([xi, ref_latents[:, idx]], dim=2)
            # PoseNet per window: memory stays O(tile) in the frame count (the pose latents
            # of a whole video would hold block_out_channels[0] channels per frame)
            # checked once above: each window is only converted, at every step
            pose = self.pose_net(_as_float_poses(pose_frames[idx]).to(device, embeds.dtype))
            if cfg:  # the unconditional half has no pose, no reference image
                pose = torch.cat([torch.zeros_like(pose), pose])
            pred = self.unet(
                inputs,
                t,
                encoder_hidden_states=embeds,
                added_time_ids=time_ids,
                pose_latents=pose,
            ).sample
            if not cfg:
                return pred
            bar.update()  # one tick per window and step: slow windows still show progress
            if not cfg:
                return pred
            uncond, cond = pred.chunk(2)
            return uncond + guidance_scale * (cond - uncond)

        self._num_timesteps = len(timesteps)
        with self.progress_bar(total=len(timesteps) * n_windows) as bar:
            for i, t in enumerate(timesteps):
                model_input = self.scheduler.scale_model_input(latents, t)
                noise_pred = fuse(
                    lambda idx, x=model_input, t=t: window(idx, x, t),
                    n_frames,
                    tile_size,
                    tile_overlap,
                )
                latents = self.scheduler.step(noise_pred, t, latents).prev_sample
                if callback_on_step_end is not None:
                    out = callback_on_step_end(self, i, t, {"latents": latents}) or {}
                    latents = out.get("latents", latents)
                    check_array(latents, f"the latents callback_on_step_end returned at step {i}")

        if output_type == "latent":
            frames = latents
        else:
            decoded = self.decode_latents(latents.to(self.vae.dtype), n_frames, decode_chunk_size)
            frames = self.video_processor.postprocess_video(video=decoded, output_type=output_type)
        self.maybe_free_model_hooks()
        if not return_dict:
            return (frames,)
        return StableVideoDiffusionPipelineOutput(frames=frames)
