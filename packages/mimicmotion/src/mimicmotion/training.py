"""Training pieces: regional loss amplification and one PoseNet + UNet training step."""

from __future__ import annotations

import importlib.util

import numpy as np
import torch

from icml25_core import check_array, check_loss, check_scalar

from .pose import PoseSequence


def region_mask(
    poses: PoseSequence,
    height: int,
    width: int,
    threshold: float = 0.3,
    radius: float = 0.06,
    parts: tuple[str, ...] = ("hands", "face"),
) -> torch.Tensor:
    """Mask ``(F, 1, height, width)`` of hand and face regions whose pose is confident.

    A pixel is in the mask when it lies within ``radius`` (a fraction of the shorter side)
    of a keypoint of ``parts`` (``"hands"``, ``"face"``) with confidence >= ``threshold``.
    """
    if not 0.0 <= threshold <= 1.0 or radius <= 0:
        raise ValueError(f"need threshold in [0, 1] and radius > 0, got {threshold}, {radius}")
    if not parts or not set(parts) <= {"hands", "face"}:
        raise ValueError(f"parts must be a non-empty subset of ('hands', 'face'), got {parts}")
    ys, xs = np.meshgrid(
        (np.arange(height) + 0.5) / height, (np.arange(width) + 0.5) / width, indexing="ij"
    )
    masks = np.zeros((len(poses), 1, height, width), dtype=np.float32)
    scale = np.array([width, height]) / min(height, width)
    for f in range(len(poses)):
        pts, sc = [np.zeros((0, 2))], [np.zeros(0)]
        if "hands" in parts:
            pts.append(poses.hands[f].reshape(-1, 2))
            sc.append(poses.hand_scores[f].ravel())
        if "face" in parts:
            pts.append(poses.face[f])
            sc.append(poses.face_scores[f])
        pts, sc = np.concatenate(pts), np.concatenate(sc)
        for x, y in pts[sc >= threshold]:
            d2 = ((xs - x) * scale[0]) ** 2 + ((ys - y) * scale[1]) ** 2
            masks[f, 0][d2 <= radius**2] = 1.0
    return torch.from_numpy(masks)


def regional_loss(
    pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None, factor: float = 2.0
) -> torch.Tensor:
    """Mean squared error with the masked region's terms multiplied by ``factor``.

    ``mean(w * (pred - target) ** 2)`` with ``w = 1 + (factor - 1) * mask``; ``mask`` is
    broadcast to ``pred`` (e.g. ``(B, F, 1, h, w)`` against latents ``(B, F, C, h, w)``).
    With an empty mask (or ``None``) this is plain MSE.
    """
    loss = _weighted_error(pred, target, mask, factor)
    if not bool(torch.isfinite(loss)):  # one scalar check; then name the culprit
        check_array(pred, "pred")
        check_array(target, "target")
        raise ValueError(f"the loss overflowed to {float(loss)} (pred and target are finite)")
    return loss


def _weighted_error(pred, target, mask, factor: float) -> torch.Tensor:
    """:func:`regional_loss` without its finiteness check (``training_step`` checks the
    loss itself, naming the learning rate)."""
    if factor < 1:
        raise ValueError(f"factor must be >= 1 (amplification), got {factor}")
    err = (pred - target) ** 2
    if mask is None:
        return err.mean()
    return (err * (1 + (factor - 1) * mask)).mean()


def edm_sigmas(
    batch: int, generator: torch.Generator | None = None, mean: float = 0.7, std: float = 1.6
):
    """Noise levels for SVD fine-tuning: ``log sigma ~ N(mean, std)``."""
    return torch.exp(mean + std * torch.randn(batch, generator=generator))


def denoise(
    unet, pose_net, noisy, sigma, ref_latents, embeds, time_ids, pose_images, pose_keep=None
):
    """The SVD denoiser (EDM preconditioning, v-prediction) with pose guidance.

    ``D(x; sigma) = c_skip x + c_out v(c_in x, 0.25 log sigma)`` with ``c_in = 1 /
    sqrt(sigma^2 + 1)``, ``c_skip = 1 / (sigma^2 + 1)``, ``c_out = -sigma / sqrt(sigma^2 + 1)``;
    ``noisy`` and ``ref_latents`` are ``(B, F, C, h, w)``, ``sigma`` is ``(B, 1, 1, 1, 1)``,
    ``pose_images`` ``(B * F, 3, 8h, 8w)``; ``pose_keep`` (optional, ``(B * F, 1, 1, 1)``)
    multiplies the pose latents (0 = the unconditional branch, as in the pipeline).
    Returns the denoised latents, ``(B, F, C, h, w)``.
    """
    c_in = 1 / (sigma**2 + 1).sqrt()
    timestep = (0.25 * sigma.log()).flatten()
    inputs = torch.cat([noisy * c_in, ref_latents], dim=2)
    pose_latents = pose_net(pose_images)
    if pose_keep is not None:
        pose_latents = pose_latents * pose_keep
    v = unet(inputs, timestep, embeds, time_ids, pose_latents=pose_latents).sample
    return v * (-sigma / (sigma**2 + 1).sqrt()) + noisy / (sigma**2 + 1)


def training_step(
    unet,
    pose_net,
    latents,
    ref_latents,
    embeds,
    time_ids,
    pose_images,
    optimizer,
    mask=None,
    factor: float = 2.0,
    generator: torch.Generator | None = None,
    condition_dropout: float = 0.0,
) -> float:
    """One optimisation step of PoseNet + UNet on clean latents (v-prediction, EDM noise).

    Parameters
    ----------
    latents : Tensor (B, F, C, h, w)
        Clean video latents (scaled by the VAE's ``scaling_factor``).
    ref_latents : Tensor (B, F, C, h, w)
        Reference-frame latents (unscaled, as the SVD pipeline feeds them) over frames.
    embeds : Tensor (B, 1, D)
        CLIP image embeddings of the reference frame.
    time_ids : Tensor (B, 3)
    pose_images : Tensor (B * F, 3, 8h, 8w) in [-1, 1]
    mask : Tensor (B, F, 1, h, w), optional
        Regions whose loss is amplified by ``factor``.
    condition_dropout : float
        Probability, per sample, of zeroing the reference latents, the image embedding
        and the pose latents together: the unconditional branch classifier-free guidance
        uses at inference.

    Returns
    -------
    float
        The loss before the step.
    """
    if not 0.0 <= condition_dropout < 1.0:
        raise ValueError(f"condition_dropout must be in [0, 1), got {condition_dropout}")
    b, f = latents.shape[:2]
    sigma = edm_sigmas(b, generator).view(b, 1, 1, 1, 1).to(latents)
    noise = torch.randn(latents.shape, generator=generator).to(latents)
    pose_keep = None
    if condition_dropout > 0:
        keep = (torch.rand(b, generator=generator) >= condition_dropout).to(latents)
        ref_latents = ref_latents * keep.view(b, 1, 1, 1, 1)
        embeds = embeds * keep.view(b, 1, 1)
        pose_keep = keep.repeat_interleave(f).view(b * f, 1, 1, 1)
    denoised = denoise(
        unet,
        pose_net,
        latents + sigma * noise,
        sigma,
        ref_latents,
        embeds,
        time_ids,
        pose_images,
        pose_keep,
    )
    loss = _weighted_error(denoised, latents, mask, factor)
    # a diverged network is the learning rate's doing, not a bad input to regional_loss
    value = check_loss(loss, lr=optimizer.param_groups[0]["lr"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return value


def write_video(frames, path, fps: int = 7) -> None:
    """Write frames (``(F, H, W, 3)`` uint8 or floats in [0, 1], or PIL images) to ``.gif``
    or ``.mp4`` (mp4 needs the ``imageio-ffmpeg`` package)."""
    import imageio.v3 as iio

    check_scalar(fps, "fps", low=0.0, low_inclusive=False)
    frames = [np.asarray(f) for f in frames]
    if not frames:
        raise ValueError("frames is empty: nothing to write")
    shapes = {f.shape for f in frames}
    if len(shapes) > 1:
        raise ValueError(f"frames must all have one shape, got {sorted(shapes)}")
    arr = np.stack(frames)
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(
            f"frames must be (F, H, W, 3) (channels last), got {arr.shape}"
            + (": frames.permute(0, 2, 3, 1)" if arr.ndim == 4 and arr.shape[1] == 3 else "")
        )
    if arr.dtype != np.uint8:
        if arr.dtype.kind != "f" or not np.isfinite(arr).all():
            raise ValueError("float frames must be finite values in [0, 1] (no NaN or inf)")
        arr = (np.clip(arr, 0, 1) * 255).round().astype(np.uint8)
    path = str(path)
    if path.endswith(".gif"):
        iio.imwrite(path, arr, duration=1000 / fps, loop=0)
    elif path.endswith(".mp4"):
        if importlib.util.find_spec("imageio_ffmpeg") is None:
            raise ImportError("writing .mp4 needs imageio-ffmpeg: pip install 'mimicmotion[mp4]'")
        iio.imwrite(path, arr, fps=fps, codec="libx264")
    else:
        raise ValueError(f"path must end in .gif or .mp4, got {path!r}")
