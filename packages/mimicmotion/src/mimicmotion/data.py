"""Synthetic stick-figure videos with their keypoints: training and evaluation data that
every machine can generate (no downloads).

A figure stands on a coloured background, swings its arms and legs, opens and closes its
hands and turns its head slightly. The appearance (background, clothes, skin, gloves) is
drawn per video; the keypoints follow the layout of :class:`mimicmotion.pose.PoseSequence`
(COCO-18 body, 2 x 21 hand points, 68 face points). Hand confidences are drawn per video
and hand, some below the usual 0.3 threshold, as a pose estimator would report for blurred
hands; the hands are drawn in the video whatever their confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from .pose import PoseSequence

# COCO-18 limbs drawn as the figure's body: arms, legs, torso sides, neck
_BODY_SEGMENTS = (
    (2, 3),
    (3, 4),
    (5, 6),
    (6, 7),
    (8, 9),
    (9, 10),
    (11, 12),
    (12, 13),
    (2, 8),
    (5, 11),
    (2, 5),
    (8, 11),
    (1, 0),
)


@dataclass
class StickFigureVideo:
    """One clip: ``frames`` ``(F, H, W, 3)`` uint8 and their keypoints ``poses``."""

    frames: np.ndarray
    poses: PoseSequence


def _rot(angle: np.ndarray) -> np.ndarray:
    return np.stack([np.sin(angle), np.cos(angle)], -1)  # angle 0 points down (+y)


def stick_figure_poses(num_frames: int, rng: np.random.Generator) -> PoseSequence:
    """Keypoints of one figure's motion over ``num_frames`` frames (smooth, periodic)."""
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    t = np.arange(num_frames, dtype=np.float64)
    cx, scale = rng.uniform(0.42, 0.58), rng.uniform(0.8, 1.0)
    omega = rng.uniform(0.15, 0.35)  # radians per frame
    phase = rng.uniform(0, 2 * np.pi, 6)
    u = 0.1 * scale  # unit length
    neck = np.stack([cx + 0.02 * np.sin(omega * t / 2 + phase[0]), np.full_like(t, 0.3)], -1)
    body = np.zeros((num_frames, 18, 2))
    body[:, 1] = neck
    body[:, 0] = neck + np.array([0, -0.9 * u])
    for side, sign in ((0, -1), (1, 1)):  # right (image left), left
        sh, hip = 2 + 3 * side, 8 + 3 * side
        body[:, sh] = neck + np.array([sign * 0.9 * u, 0.1 * u])
        body[:, hip] = neck + np.array([sign * 0.5 * u, 2.6 * u])
        swing = 0.9 + 0.8 * np.sin(omega * t + phase[1 + side])
        bend = 0.3 + 0.5 * (1 + np.sin(omega * t + phase[3 + side])) / 2
        body[:, sh + 1] = body[:, sh] + 1.2 * u * _rot(sign * swing)
        body[:, sh + 2] = body[:, sh + 1] + 1.1 * u * _rot(sign * (swing + bend))
        leg = 0.25 * np.sin(omega * t + phase[5] + np.pi * side)
        body[:, hip + 1] = body[:, hip] + 1.4 * u * _rot(leg)
        body[:, hip + 2] = body[:, hip + 1] + 1.4 * u * _rot(leg * 0.5)
    # eyes and ears around the nose
    for k, off in zip(
        (14, 15, 16, 17), ((-0.25, -0.2), (0.25, -0.2), (-0.5, 0), (0.5, 0)), strict=True
    ):
        body[:, k] = body[:, 0] + np.array(off) * u
    body_scores = np.clip(rng.normal(0.95, 0.03, (num_frames, 18)), 0, 1)

    hands = np.zeros((num_frames, 2, 21, 2))
    for h, (elbow, wrist) in enumerate(((3, 4), (6, 7))):
        direction = body[:, wrist] - body[:, elbow]
        base = np.arctan2(direction[:, 0], direction[:, 1])  # same convention as _rot
        opening = 0.5 + 0.5 * np.sin(2 * omega * t + phase[h])  # hand opens and closes
        hands[:, h, 0] = body[:, wrist]
        for f in range(5):
            angle = base + (f - 2) * (0.25 + 0.25 * opening)
            for j in range(4):
                length = 0.2 * u * (j + 1) * (0.6 + 0.4 * opening)
                hands[:, h, 1 + 4 * f + j] = body[:, wrist] + length[:, None] * _rot(angle)
    hand_scores = np.repeat(rng.uniform(0.1, 1.0, (1, 2, 1)), num_frames, 0)
    hand_scores = np.clip(hand_scores + rng.normal(0, 0.02, (num_frames, 2, 21)), 0, 1)

    k = np.arange(68) / 68 * 2 * np.pi
    ring = np.stack([0.35 * np.sin(k), 0.45 * np.cos(k)], -1) * u
    turn = 0.15 * u * np.sin(omega * t / 2 + phase[2])
    face = body[:, 0, None, :] + ring[None] + np.stack([turn, 0 * turn], -1)[:, None]
    face_scores = np.clip(rng.normal(0.8, 0.1, (num_frames, 68)), 0, 1)
    return PoseSequence(body, body_scores, hands, hand_scores, face, face_scores)


def render_figure(
    poses: PoseSequence, height: int, width: int, rng: np.random.Generator
) -> np.ndarray:
    """The figure's appearance, ``(F, height, width, 3)`` uint8; colours drawn from ``rng``."""
    colours = rng.integers(0, 256, (5, 3))
    background, clothes, skin, glove_r, glove_l = (tuple(int(v) for v in c) for c in colours)
    size = np.array([width, height])
    unit = min(height, width)
    out = np.empty((len(poses), height, width, 3), dtype=np.uint8)
    for i in range(len(poses)):
        img = Image.new("RGB", (width, height), background)
        draw = ImageDraw.Draw(img)
        body = poses.body[i] * size
        for a, b in _BODY_SEGMENTS:
            draw.line([tuple(body[a]), tuple(body[b])], clothes, max(2, round(unit / 20)))
        r = unit * 0.045
        x, y = body[0]
        draw.ellipse([x - r, y - 1.2 * r, x + r, y + 1.2 * r], skin)
        for h, glove in enumerate((glove_r, glove_l)):
            pts = poses.hands[i, h] * size
            for f in range(5):
                chain = [tuple(pts[0])] + [tuple(pts[1 + 4 * f + j]) for j in range(4)]
                draw.line(chain, glove, max(1, round(unit / 40)))
        out[i] = np.asarray(img)
    return out


def stick_figure_videos(
    n_videos: int, num_frames: int, size: int = 64, seed: int = 0
) -> list[StickFigureVideo]:
    """``n_videos`` clips of ``num_frames`` frames at ``size x size`` pixels.

    Parameters
    ----------
    n_videos, num_frames, size : int
        ``size`` must be a multiple of 8 (the latent factor).
    seed : int
        Clips are a pure function of ``(seed, index)``.
    """
    if n_videos < 1 or num_frames < 1:
        raise ValueError(f"need n_videos >= 1 and num_frames >= 1, got {n_videos}, {num_frames}")
    if size < 16 or size % 8:
        raise ValueError(f"size must be a multiple of 8 and >= 16, got {size}")
    clips = []
    for i in range(n_videos):
        rng = np.random.default_rng([seed, i])
        poses = stick_figure_poses(num_frames, rng)
        clips.append(StickFigureVideo(render_figure(poses, size, size, rng), poses))
    return clips
