"""MimicMotionPipeline against diffusers' StableVideoDiffusionPipeline, same tiny components.

Per number of frames (16, 32, 64; smoke: 16, 32), 128x128, 2 Euler steps, guidance 2 (SVD:
min = max = 2): wall time and peak memory of generating the video's latents
(``output_type="latent"``: the VAE decoding afterwards is the same chunked code in both and
its output, the decoded video, grows with length in both). SVD denoises all frames in one
pass; MimicMotion adds pose guidance (PoseNet per window) and denoises windows of 16 frames
(overlap 4) fused with triangular weights. Ratios are MimicMotion / SVD; slopes give how
time and memory grow with the number of frames.

Run: ``icml25 bench mimicmotion`` (or ``--smoke``).
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import StableVideoDiffusionPipeline, UNetSpatioTemporalConditionModel

from icml25_core import BenchReport, compare, loglog_slope, make_report
from mimicmotion import MimicMotionPipeline
from mimicmotion.components import TINY_UNET, tiny_components

SIZE, STEPS = 128, 2


def run(smoke: bool = False) -> BenchReport:
    frames = (16, 32) if smoke else (16, 32, 64)
    parts = tiny_components(0)
    ours = MimicMotionPipeline(**parts)
    plain = UNetSpatioTemporalConditionModel(**TINY_UNET)
    plain.load_state_dict(parts["unet"].state_dict())
    svd = StableVideoDiffusionPipeline(
        parts["vae"], parts["image_encoder"], plain, parts["scheduler"], parts["feature_extractor"]
    )
    for pipe in (ours, svd):
        pipe.set_progress_bar_config(disable=True)
    rng = np.random.default_rng(0)
    image = torch.from_numpy(rng.random((1, 3, SIZE, SIZE), dtype=np.float32))
    pil = ours.video_processor.numpy_to_pil(ours.video_processor.pt_to_numpy(image))[0]
    comparisons = []
    for n in frames:
        poses = rng.integers(0, 255, (n, SIZE, SIZE, 3), dtype=np.uint8)

        def run_ours(poses=poses):
            ours(
                image,
                poses,
                tile_size=16,
                tile_overlap=4,
                num_inference_steps=STEPS,
                output_type="latent",
                generator=torch.Generator().manual_seed(0),
            )

        def run_svd(n=n):
            svd(
                pil,
                height=SIZE,
                width=SIZE,
                num_frames=n,
                num_inference_steps=STEPS,
                min_guidance_scale=2.0,
                max_guidance_scale=2.0,
                decode_chunk_size=8,
                output_type="latent",
                generator=torch.Generator().manual_seed(0),
            )

        comparisons.append(
            compare(
                {"SVD (diffusers, one pass)": run_svd, "MimicMotion (pose + fusion)": run_ours},
                reference="SVD (diffusers, one pass)",
                label=f"{n} frames, {SIZE}x{SIZE}, {STEPS} steps",
                size=n,
                repeats=1 if smoke else 3,
                warmup=0 if smoke else 1,
                memory=True,
            )
        )
    notes = [
        "ratio: MimicMotion time / SVD time for the same video length",
        "time slope vs frames: "
        + ", ".join(
            f"{name} {loglog_slope(frames, [c.timings[name].median for c in comparisons]):.2f}"
            for name in comparisons[0].timings
        ),
        "memory slope vs frames: "
        + ", ".join(
            f"{name} {loglog_slope(frames, [c.timings[name].peak_memory for c in comparisons]):.2f}"
            for name in comparisons[0].timings
        ),
    ]
    return make_report(
        "mimicmotion vs diffusers StableVideoDiffusionPipeline",
        comparisons,
        "mimicmotion",
        "diffusers",
        "torch",
        notes=notes,
    )


if __name__ == "__main__":
    run().render()
