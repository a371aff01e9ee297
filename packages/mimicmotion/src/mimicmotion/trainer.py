"""Fine-tuning PoseNet + UNet of a :class:`MimicMotionPipeline` on pose-annotated clips, and
the per-region denoising error used to compare training recipes.

Clips are encoded once (:func:`encode_clips`); :func:`fit` then samples windows that start
with the reference frame (frame 0), as the pipeline's fused windows do at inference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from icml25_core import track

from .data import StickFigureVideo
from .pipeline import MimicMotionPipeline, pose_tensor
from .pose import render
from .training import denoise, region_mask, training_step

MICRO_CONDITIONS = (6.0, 127.0, 0.02)  # fps - 1, motion bucket, noise augmentation


@dataclass
class EncodedClips:
    """Clips in the pipeline's latent space, ``N`` clips of ``F`` frames.

    Attributes
    ----------
    latents : Tensor (N, F, C, h, w)
        Video latents times the VAE's ``scaling_factor`` (the diffusion target).
    ref_latents : Tensor (N, C, h, w)
        Latents of each clip's frame 0 with noise augmentation (unscaled, as SVD feeds them).
    embeds : Tensor (N, 1, D)
        CLIP image embeddings of frame 0.
    poses : Tensor (N, F, 3, H, W)
        Rendered pose images in ``[-1, 1]``.
    mask : Tensor (N, F, 1, h, w)
        Confident hand and face regions on the latent grid (the amplified loss terms).
    hand_mask : Tensor (N, F, 1, h, w)
        Confident hand regions only (the evaluation region).
    """

    latents: torch.Tensor
    ref_latents: torch.Tensor
    embeds: torch.Tensor
    poses: torch.Tensor
    mask: torch.Tensor
    hand_mask: torch.Tensor

    def __len__(self) -> int:
        return self.latents.shape[0]


def _latent_mask(mask: torch.Tensor, factor: int) -> torch.Tensor:
    """A pixel mask ``(F, 1, H, W)`` on the latent grid: a latent cell is in when any pixel is."""
    return F.max_pool2d(mask, factor)


@torch.no_grad()
def calibrate_scaling_factor(pipe: MimicMotionPipeline, clips: Sequence[StickFigureVideo]) -> float:
    """Set the VAE's ``scaling_factor`` to ``1 / std`` of the clips' latents and return it.

    The diffusion noise schedule assumes unit-variance latents; Stable Diffusion's 0.18215
    was chosen this way for its trained VAE. A newly initialised (or retrained) VAE needs
    its own factor.
    """
    if not clips:
        raise ValueError("clips must hold at least one clip")
    device = pipe._execution_device
    latents = [
        pipe.vae.encode(
            (torch.from_numpy(c.frames).permute(0, 3, 1, 2).float() / 127.5 - 1).to(
                device, pipe.vae.dtype
            )
        ).latent_dist.mode()
        for c in clips
    ]
    factor = float(1 / torch.cat(latents).float().std())
    pipe.vae.register_to_config(scaling_factor=factor)
    return factor


@torch.no_grad()
def encode_clips(
    pipe: MimicMotionPipeline,
    clips: Sequence[StickFigureVideo],
    threshold: float = 0.3,
    radius: float = 0.06,
    noise_aug_strength: float = MICRO_CONDITIONS[2],
    seed: int = 0,
) -> EncodedClips:
    """Encode clips (frames + keypoints) with the pipeline's VAE and image encoder."""
    if not clips:
        raise ValueError("clips must hold at least one clip")
    device, factor = pipe._execution_device, pipe.vae_scale_factor
    generator = torch.Generator().manual_seed(seed)
    out = {k: [] for k in ("latents", "ref_latents", "embeds", "poses", "mask", "hand_mask")}
    for clip in clips:
        frames = torch.from_numpy(clip.frames).permute(0, 3, 1, 2).float() / 127.5 - 1
        h, w = frames.shape[-2:]
        x = frames.to(device, pipe.vae.dtype)
        latents = pipe.vae.encode(x).latent_dist.mode() * pipe.vae.config.scaling_factor
        ref = x[:1] + noise_aug_strength * torch.randn(x[:1].shape, generator=generator).to(x)
        image = pipe.video_processor.numpy_to_pil(clip.frames[:1].astype(np.float32) / 255)[0]
        out["latents"].append(latents)
        out["ref_latents"].append(pipe.vae.encode(ref).latent_dist.mode()[0])
        out["embeds"].append(pipe._encode_image(image, device, 1, False)[0])
        out["poses"].append(pose_tensor(render(clip.poses, h, w, threshold)).to(device))
        out["mask"].append(_latent_mask(region_mask(clip.poses, h, w, threshold, radius), factor))
        hands = region_mask(clip.poses, h, w, threshold, radius, parts=("hands",))
        out["hand_mask"].append(_latent_mask(hands, factor))
    try:
        return EncodedClips(**{k: torch.stack(v).to(device) for k, v in out.items()})
    except RuntimeError as err:
        raise ValueError("all clips must have the same frame count and size") from err


def _window(length: int, start: int) -> list[int]:
    return [0, *range(start, start + length - 1)]


def _batch(pipe, data: EncodedClips, items: list[tuple[int, list[int]]]):
    idx = [i for i, _ in items]
    frames = [torch.tensor(w) for _, w in items]
    latents = torch.stack([data.latents[i, w] for i, w in zip(idx, frames, strict=True)])
    ref = data.ref_latents[idx].unsqueeze(1).expand(-1, latents.shape[1], -1, -1, -1)
    poses = torch.cat([data.poses[i, w] for i, w in zip(idx, frames, strict=True)])
    mask = torch.stack([data.mask[i, w] for i, w in zip(idx, frames, strict=True)])
    hands = torch.stack([data.hand_mask[i, w] for i, w in zip(idx, frames, strict=True)])
    time_ids = torch.tensor([MICRO_CONDITIONS] * len(items)).to(latents)
    return latents, ref, data.embeds[idx], time_ids, poses, mask, hands


def fit(
    pipe: MimicMotionPipeline,
    data: EncodedClips,
    steps: int,
    window: int = 8,
    batch_size: int = 2,
    lr: float = 1e-3,
    factor: float = 1.0,
    condition_dropout: float = 0.1,
    seed: int = 0,
    show_progress: bool = False,
) -> list[float]:
    """Train the pipeline's PoseNet and UNet in place; returns the loss of every step.

    Each sample is one clip's frame 0 followed by ``window - 1`` consecutive frames from a
    random start, so the reference frame leads every window as in the fused pipeline.
    ``factor`` > 1 amplifies the loss in ``data.mask`` (regional loss amplification);
    ``factor = 1`` is the plain diffusion loss.
    """
    n_frames = data.latents.shape[1]
    if not 2 <= window <= n_frames:
        raise ValueError(f"window must be in [2, {n_frames}] (the clip length), got {window}")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"need steps >= 1 and batch_size >= 1, got {steps}, {batch_size}")
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    params = [*pipe.unet.parameters(), *pipe.pose_net.parameters()]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    pipe.unet.train()
    pipe.pose_net.train()
    losses = []
    for _ in track(range(steps), "fit") if show_progress else range(steps):
        starts = rng.integers(1, n_frames - window + 2, batch_size)
        clips = rng.integers(len(data), size=batch_size)
        items = [(int(c), _window(window, int(s))) for c, s in zip(clips, starts, strict=True)]
        latents, ref, embeds, time_ids, poses, mask, _ = _batch(pipe, data, items)
        losses.append(
            training_step(
                pipe.unet,
                pipe.pose_net,
                latents,
                ref,
                embeds,
                time_ids,
                poses,
                optimizer,
                mask=mask,
                factor=factor,
                generator=generator,
                condition_dropout=condition_dropout,
            )
        )
    pipe.unet.eval()
    pipe.pose_net.eval()
    return losses


@torch.no_grad()
def region_errors(
    pipe: MimicMotionPipeline,
    data: EncodedClips,
    window: int = 8,
    sigmas: Sequence[float] = (0.5, 2.0, 8.0),
    seed: int = 0,
) -> dict[str, float]:
    """Mean squared denoising error on ``data`` inside the confident hand regions and
    outside every amplified region, averaged over noise levels ``sigmas`` (fixed noise).

    Windows: frame 0 + each run of ``window - 1`` consecutive frames (non-overlapping).
    Returns ``{"hands": ..., "elsewhere": ..., "all": ...}``.
    """
    n_frames = data.latents.shape[1]
    generator = torch.Generator().manual_seed(seed)
    sums = {"hands": 0.0, "elsewhere": 0.0, "all": 0.0}
    counts = dict.fromkeys(sums, 0.0)
    for i in range(len(data)):
        for start in range(1, n_frames - window + 2, window - 1):
            latents, ref, embeds, time_ids, poses, mask, hands = _batch(
                pipe, data, [(i, _window(window, start))]
            )
            for s in sigmas:
                sigma = torch.full((1, 1, 1, 1, 1), float(s)).to(latents)
                noisy = latents + sigma * torch.randn(latents.shape, generator=generator).to(
                    latents
                )
                out = denoise(pipe.unet, pipe.pose_net, noisy, sigma, ref, embeds, time_ids, poses)
                err = ((out - latents) ** 2).mean(2, keepdim=True)
                for key, weight in (("hands", hands), ("elsewhere", 1 - mask), ("all", None)):
                    weight = torch.ones_like(err) if weight is None else weight
                    sums[key] += float((err * weight).sum())
                    counts[key] += float(weight.sum())
    return {k: sums[k] / counts[k] if counts[k] else float("nan") for k in sums}
