"""The paper's long-video claim at laptop scale, on a tiny random-weight pipeline (CPU).

1. Cost of length: ``num_frames`` in {16, 32, 64, 128} (quick: {16, 32, 64}) at 64x64,
   tile 16, overlap 4, 2 Euler steps, guidance 2: wall time per frame and peak memory
   (traced heap or resident-set growth) of the denoising loop (``output_type="latent"``;
   the VAE decodes in chunks afterwards, and the decoded video itself grows with length).
   Claim: memory flat in the number of frames (the UNet only ever sees one window) and
   time linear (log-log slope of total time near 1).
2. Boundary smoothness: the same video with overlapping, fused windows (overlap 4) and
   with independent windows (overlap 1: windows share only the reference frame). Metric:
   the largest mean-absolute latent change between consecutive frames divided by the
   median one (frame 0, the reference, excluded): 1 means no step stands out; a hard
   window boundary shows up as a large ratio.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from icml25_core import Experiment, Row, Verdict, compare, loglog_slope, mean_metric, save_figure

from .components import tiny_components
from .fusion import windows
from .pipeline import MimicMotionPipeline

PROFILES = {
    "quick": {"frames": (16, 32, 64), "size": 64, "steps": 2},
    "full": {"frames": (16, 32, 64, 128), "size": 64, "steps": 4},
}
TILE, OVERLAP = 16, 4


def _inputs(num_frames: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    image = torch.from_numpy(rng.random((1, 3, size, size), dtype=np.float32))
    poses = rng.integers(0, 255, (num_frames, size, size, 3), dtype=np.uint8)
    return image, poses


def _generate(pipe, num_frames, size, steps, seed, overlap=OVERLAP, output_type="np"):
    image, poses = _inputs(num_frames, size, seed)
    return pipe(
        image, poses, tile_size=TILE, tile_overlap=overlap, num_inference_steps=steps,
        output_type=output_type, generator=torch.Generator().manual_seed(seed),
    ).frames  # fmt: skip


def boundary_jump(latents: torch.Tensor) -> float:
    """Largest consecutive-frame change over the median one, frames 1.. of ``(1, F, ...)``."""
    steps = (latents[0, 2:] - latents[0, 1:-1]).abs().flatten(1).mean(1)
    return float(steps.max() / steps.median())


def _run(profile: str, seed: int, out_dir: Path) -> list[Row]:
    cfg = PROFILES[profile]
    pipe = MimicMotionPipeline(**tiny_components(seed))
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():  # give pose guidance an effect (PoseNet is zero at init)
        pipe.pose_net.final_proj.weight.normal_(0, 0.02)
    rows = []
    for n in cfg["frames"]:
        start = time.perf_counter()
        comp = compare(
            {"fused": lambda n=n: _generate(pipe, n, cfg["size"], cfg["steps"], seed, OVERLAP, "latent")},
            reference="fused", repeats=1, warmup=1, memory=True,
        )  # fmt: skip
        timing = comp.timings["fused"]
        rows.append(
            Row(
                "MimicMotion (fused windows)",
                seed,
                {
                    "time_per_frame_s": timing.median / n,
                    "total_s": timing.median,
                    "peak_mib": timing.peak_memory / 2**20,
                    "wall_s": time.perf_counter() - start,
                },
                {"part": "length", "num_frames": n},
            )
        )
    n = cfg["frames"][-1]
    for name, overlap in (("MimicMotion (fused windows)", OVERLAP), ("independent windows", 1)):
        latents = _generate(pipe, n, cfg["size"], cfg["steps"], seed, overlap, "latent")
        rows.append(
            Row(
                name,
                seed,
                {
                    "boundary_jump": boundary_jump(latents),
                    "windows": len(windows(n, TILE, overlap)),
                },
                {"part": "smoothness", "num_frames": n},
                baseline=overlap == 1,
            )
        )
    return rows


def _judge(rows: list[Row]) -> Verdict:
    length = [r for r in rows if r.setting["part"] == "length"]
    frames = sorted({r.setting["num_frames"] for r in length})
    total = [
        mean_metric(length, "total_s", "MimicMotion (fused windows)", num_frames=f) for f in frames
    ]
    peak = [
        mean_metric(length, "peak_mib", "MimicMotion (fused windows)", num_frames=f) for f in frames
    ]
    t_slope = loglog_slope(frames, total)
    m_ratio = peak[-1] / peak[0]
    fused = mean_metric(rows, "boundary_jump", "MimicMotion (fused windows)", part="smoothness")
    indep = mean_metric(rows, "boundary_jump", "independent windows", part="smoothness")
    time_linear = 0.8 <= t_slope <= 1.2
    memory_flat = m_ratio <= 1.5
    smoother = fused < indep
    summary = (
        f"time slope {t_slope:.2f} ({'linear' if time_linear else 'NOT linear'}); peak memory "
        f"{peak[0]:.0f} -> {peak[-1]:.0f} MiB from {frames[0]} to {frames[-1]} frames "
        f"(x{m_ratio:.2f}, {'flat' if memory_flat else 'NOT flat'}); boundary jump fused "
        f"{fused:.2f} vs independent {indep:.2f} ({'smoother' if smoother else 'NOT smoother'})"
    )
    return Verdict(bool(time_linear and memory_flat and smoother), summary)


def _plot(rows: list[Row], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    length = [r for r in rows if r.setting["part"] == "length"]
    frames = sorted({r.setting["num_frames"] for r in length})
    m = "MimicMotion (fused windows)"
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].plot(
        frames, [mean_metric(length, "time_per_frame_s", m, num_frames=f) for f in frames], "o-"
    )
    axes[0].set_xlabel("frames")
    axes[0].set_ylabel("s per frame")
    axes[1].plot(frames, [mean_metric(length, "peak_mib", m, num_frames=f) for f in frames], "o-")
    axes[1].set_xlabel("frames")
    axes[1].set_ylabel("peak MiB")
    for ax in axes:
        ax.set_xscale("log", base=2)
    fig.tight_layout()
    return [save_figure(fig, out_dir / "length.png")]


LONG_VIDEO = Experiment(
    name="long-video",
    claim=(
        "With progressive latent fusion, peak memory stays flat (at most 1.5x from the "
        "shortest to the longest video) and time grows linearly (log-log slope 0.8-1.2) in "
        "the number of frames, and fused windows have smaller jumps at window boundaries "
        "than independently generated windows."
    ),
    run=_run,
    judge=_judge,
    plot=_plot,
    default_seeds=1,
)
