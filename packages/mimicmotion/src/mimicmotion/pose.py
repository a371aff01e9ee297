"""Confidence-aware pose rendering and rescaling of a driving pose to a reference skeleton.

Keypoints follow DWPose / OpenPose conventions, in pixel-normalised coordinates ``[0, 1]``:
body 18 points (COCO-18 order), two hands of 21 points, face 68 points, each with a
confidence in ``[0, 1]``. Rendering rules (MimicMotion): a limb is dropped when either
endpoint's confidence is below ``threshold`` (0.3) and otherwise drawn with its colour
scaled by the product of the two confidences; joints are scaled by their confidence; hand
edges and points by their scores; face points are grey by score.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from icml25_core import check_memory, check_scalar

# COCO-18 limbs (0-based) and the usual OpenPose colours
BODY_LIMBS = (
    (1, 2),
    (1, 5),
    (2, 3),
    (3, 4),
    (5, 6),
    (6, 7),
    (1, 8),
    (8, 9),
    (9, 10),
    (1, 11),
    (11, 12),
    (12, 13),
    (1, 0),
    (0, 14),
    (14, 16),
    (0, 15),
    (15, 17),
)
BODY_COLOURS = (
    (255, 0, 0),
    (255, 85, 0),
    (255, 170, 0),
    (255, 255, 0),
    (170, 255, 0),
    (85, 255, 0),
    (0, 255, 0),
    (0, 255, 85),
    (0, 255, 170),
    (0, 255, 255),
    (0, 170, 255),
    (0, 85, 255),
    (0, 0, 255),
    (85, 0, 255),
    (170, 0, 255),
    (255, 0, 255),
    (255, 0, 170),
    (255, 0, 85),
)
HAND_EDGES = tuple((0 if j == 0 else 4 * f + j, 4 * f + j + 1) for f in range(5) for j in range(4))
HAND_COLOURS = tuple(
    tuple(int(255 * c) for c in colorsys.hsv_to_rgb(i / len(HAND_EDGES), 1.0, 1.0))
    for i in range(len(HAND_EDGES))
)


@dataclass
class PoseSequence:
    """Keypoints of ``F`` frames; coordinates in ``[0, 1]`` (x right, y down).

    Attributes
    ----------
    body : ndarray (F, 18, 2)
    body_scores : ndarray (F, 18)
    hands : ndarray (F, 2, 21, 2)
    hand_scores : ndarray (F, 2, 21)
    face : ndarray (F, 68, 2)
    face_scores : ndarray (F, 68)
    """

    body: np.ndarray
    body_scores: np.ndarray
    hands: np.ndarray
    hand_scores: np.ndarray
    face: np.ndarray
    face_scores: np.ndarray

    def __post_init__(self):
        body = np.asarray(self.body, dtype=np.float64) if self.body is not None else None
        if body is None or body.ndim != 3:
            raise ValueError(
                f"body must be an array (F, 18, 2), got {type(self.body).__name__} of shape "
                f"{getattr(body, 'shape', None)}"
            )
        f = body.shape[0]
        if f == 0:
            raise ValueError("a PoseSequence needs at least one frame (body has 0)")
        expected = {
            "body": (f, 18, 2),
            "body_scores": (f, 18),
            "hands": (f, 2, 21, 2),
            "hand_scores": (f, 2, 21),
            "face": (f, 68, 2),
            "face_scores": (f, 68),
        }
        for name, shape in expected.items():
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
            if not np.isfinite(value).all():
                raise ValueError(f"{name} contains NaN or inf")
            setattr(self, name, value)

    def __len__(self) -> int:
        return self.body.shape[0]


def _scaled(colour, factor: float) -> tuple[int, int, int]:
    return tuple(round(c * factor) for c in colour)


def render_frame(
    poses: PoseSequence, index: int, height: int, width: int, threshold: float = 0.3
) -> np.ndarray:
    """One pose image, ``(height, width, 3)`` uint8 on black."""
    img = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(img)
    size = np.array([width, height])
    stick = max(1, round(min(height, width) / 64))
    body, score = poses.body[index] * size, poses.body_scores[index]
    for (a, b), colour in zip(BODY_LIMBS, BODY_COLOURS, strict=False):
        if score[a] < threshold or score[b] < threshold:
            continue
        draw.line([tuple(body[a]), tuple(body[b])], _scaled(colour, score[a] * score[b]), 2 * stick)
    for k in range(18):
        if score[k] >= threshold:
            x, y = body[k]
            draw.ellipse(
                [x - stick, y - stick, x + stick, y + stick], _scaled(BODY_COLOURS[k], score[k])
            )
    for h in range(2):
        pts, sc = poses.hands[index, h] * size, poses.hand_scores[index, h]
        for (a, b), colour in zip(HAND_EDGES, HAND_COLOURS, strict=True):
            if sc[a] >= threshold and sc[b] >= threshold:
                draw.line([tuple(pts[a]), tuple(pts[b])], _scaled(colour, sc[a] * sc[b]), stick)
        for k in range(21):
            if sc[k] >= threshold:
                x, y = pts[k]
                draw.point((x, y), _scaled((0, 0, 255), sc[k]))
    pts, sc = poses.face[index] * size, poses.face_scores[index]
    for k in range(68):
        if sc[k] >= threshold:
            draw.point(tuple(pts[k]), _scaled((255, 255, 255), sc[k]))
    return np.asarray(img)


def render(poses: PoseSequence, height: int, width: int, threshold: float = 0.3) -> np.ndarray:
    """All frames, ``(F, height, width, 3)`` uint8: the ``pose_frames`` the pipeline takes."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    check_scalar(height, "height", low=1, integer=True)
    check_scalar(width, "width", low=1, integer=True)
    check_memory(len(poses) * height * width * 3, "height * width", what=f"{len(poses)} frames")
    return np.stack([render_frame(poses, i, height, width, threshold) for i in range(len(poses))])


def rescale_to_reference(
    driving: PoseSequence,
    reference_body: np.ndarray,
    reference_scores: np.ndarray,
    threshold: float = 0.3,
) -> PoseSequence:
    """Map a driving pose onto the reference skeleton by a per-axis linear fit.

    ``x' = a_x x + b_x`` and ``y' = a_y y + b_y`` are fitted by least squares between the
    driving sequence's first frame and the reference body keypoints (those confident in
    both), then applied to every frame's body, hands and face.
    """
    reference_body = np.asarray(reference_body, dtype=np.float64)
    if reference_body.shape != (18, 2):
        raise ValueError(f"reference_body must have shape (18, 2), got {reference_body.shape}")
    ok = (driving.body_scores[0] >= threshold) & (np.asarray(reference_scores) >= threshold)
    if ok.sum() < 2:
        raise ValueError(
            "rescale_to_reference needs at least 2 body keypoints confident in both the "
            f"reference and the first driving frame, got {int(ok.sum())}"
        )
    coef = []
    for axis in range(2):
        src, dst = driving.body[0, ok, axis], reference_body[ok, axis]
        a, b = np.polyfit(src, dst, 1) if np.ptp(src) > 1e-8 else (1.0, dst.mean() - src.mean())
        coef.append((a, b))
    (ax, bx), (ay, by) = coef

    def apply(points: np.ndarray) -> np.ndarray:
        out = points.copy()
        out[..., 0] = ax * points[..., 0] + bx
        out[..., 1] = ay * points[..., 1] + by
        return out

    return PoseSequence(
        apply(driving.body),
        driving.body_scores.copy(),
        apply(driving.hands),
        driving.hand_scores.copy(),
        apply(driving.face),
        driving.face_scores.copy(),
    )
