"""DWPose whole-body keypoints from ONNX models (``pip install mimicmotion[dwpose]``).

The estimator runs the two public DWPose ONNX files a user downloads once, for example
``yolox_l.onnx`` (person detector) and ``dw-ll_ucoco_384.onnx`` (whole-body pose, 133
COCO-WholeBody keypoints, SimCC heads); nothing is downloaded here. Steps, as in DWPose:

1. YOLOX: letterbox to 640x640 (pad 114), raw grid outputs decoded with strides 8/16/32,
   person score = objectness x class-0 score, NMS (IoU 0.45), persons above 0.3.
2. Per person: box padded by 1.25 and fixed to the pose model's aspect ratio, affine crop to
   its input size, normalised with the ImageNet mean/std (0-255 scale), SimCC decoding
   (argmax / 2 along x and y, confidence the smaller of the two maxima).
3. COCO-WholeBody -> the layout of :class:`~mimicmotion.pose.PoseSequence`: OpenPose-18
   body (neck = shoulder midpoint, confident when both shoulders are), 68 face points and
   the hands in COCO-WholeBody order (``hands[0]`` the person's left, ``hands[1]`` right).

Images are RGB ``(H, W, 3)`` uint8, as PIL and video readers give them. One person per
frame is returned: the one with the highest mean body confidence.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from .pose import PoseSequence

# COCO-17 body (+ neck appended at index 17) -> OpenPose-18 order
_OPENPOSE_FROM_COCO = (0, 17, 6, 8, 10, 5, 7, 9, 12, 14, 16, 11, 13, 15, 2, 1, 4, 3)
_MEAN = np.array([123.675, 116.28, 103.53], dtype=np.float32)
_STD = np.array([58.395, 57.12, 57.375], dtype=np.float32)


def letterbox(image: np.ndarray, size: tuple[int, int] = (640, 640)) -> tuple[np.ndarray, float]:
    """YOLOX input: the image resized by ``r = min(H'/H, W'/W)`` into the top-left corner of
    a ``size`` canvas filled with 114; returns ``((1, 3, H', W') float32, r)``."""
    h, w = image.shape[:2]
    r = min(size[0] / h, size[1] / w)
    resized = Image.fromarray(image).resize((round(w * r), round(h * r)), Image.BILINEAR)
    canvas = np.full((*size, 3), 114, dtype=np.float32)
    canvas[: resized.height, : resized.width] = np.asarray(resized, dtype=np.float32)
    return canvas.transpose(2, 0, 1)[None], r


def decode_yolox(
    raw: np.ndarray, input_size: tuple[int, int] = (640, 640), strides=(8, 16, 32)
) -> np.ndarray:
    """YOLOX grid outputs ``(A, 5 + classes)`` -> ``(A, 5 + classes)`` with boxes as
    ``(cx, cy, w, h)`` in input pixels: ``xy = (xy + grid) s``, ``wh = exp(wh) s``.

    The exported model's objectness and class scores are already probabilities (sigmoid
    inside the graph); they pass through unchanged.
    """
    grids, scales = [], []
    for s in strides:
        gh, gw = input_size[0] // s, input_size[1] // s
        ys, xs = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
        grids.append(np.stack([xs, ys], -1).reshape(-1, 2))
        scales.append(np.full((gh * gw, 1), s))
    grid, scale = np.concatenate(grids), np.concatenate(scales)
    if raw.shape[0] != len(grid):
        raise ValueError(f"detector output has {raw.shape[0]} anchors, expected {len(grid)}")
    out = raw.astype(np.float64).copy()
    out[:, :2] = (out[:, :2] + grid) * scale
    out[:, 2:4] = np.exp(out[:, 2:4]) * scale
    return out


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float = 0.45) -> list[int]:
    """Greedy non-maximum suppression of ``(N, 4)`` xyxy boxes; indices kept, best first."""
    order, keep = np.argsort(-scores), []
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    while order.size:
        i, rest = order[0], order[1:]
        keep.append(int(i))
        lt = np.maximum(boxes[i, :2], boxes[rest, :2])
        rb = np.minimum(boxes[i, 2:], boxes[rest, 2:])
        inter = np.prod(np.clip(rb - lt, 0, None), axis=1)
        overlap = inter / (area[i] + area[rest] - inter + 1e-12)
        order = rest[overlap <= iou]
    return keep


def crop_box(box: np.ndarray, input_size: tuple[int, int], padding: float = 1.25):
    """Centre and size ``(w, h)`` of the pose crop: the box padded by ``padding`` and
    widened or heightened to the pose input's aspect ratio ``input_size = (w, h)``."""
    x1, y1, x2, y2 = box
    center = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
    w, h = (x2 - x1) * padding, (y2 - y1) * padding
    aspect = input_size[0] / input_size[1]
    if w > h * aspect:
        h = w / aspect
    else:
        w = h * aspect
    return center, np.array([w, h])


def decode_simcc(simcc_x: np.ndarray, simcc_y: np.ndarray, split_ratio: float = 2.0):
    """SimCC maxima: ``(K, 2)`` locations (argmax / ``split_ratio``) and ``(K,)`` scores,
    the smaller of the x and y maxima."""
    locs = np.stack([simcc_x.argmax(-1), simcc_y.argmax(-1)], -1) / split_ratio
    scores = np.minimum(simcc_x.max(-1), simcc_y.max(-1))
    return locs, scores


def wholebody_to_pose(
    keypoints: np.ndarray, scores: np.ndarray, height: int, width: int, threshold: float = 0.3
):
    """133 COCO-WholeBody keypoints in pixels -> arrays of one :class:`PoseSequence` frame.

    Returns ``(body (18, 2), body_scores (18,), hands (2, 21, 2), hand_scores (2, 21),
    face (68, 2), face_scores (68,))`` with coordinates divided by ``(width, height)``.
    """
    if keypoints.shape != (133, 2) or scores.shape != (133,):
        raise ValueError(
            f"need 133 whole-body keypoints (133, 2) and scores (133,), got {keypoints.shape}, "
            f"{scores.shape}"
        )
    xy = keypoints / np.array([width, height], dtype=np.float64)
    neck = (xy[5] + xy[6]) / 2
    neck_score = float(scores[5] > threshold and scores[6] > threshold)
    body17 = np.concatenate([xy[:17], neck[None]])
    body_scores17 = np.concatenate([scores[:17], [neck_score]])
    idx = list(_OPENPOSE_FROM_COCO)
    hands = np.stack([xy[91:112], xy[112:133]])
    hand_scores = np.stack([scores[91:112], scores[112:133]])
    return body17[idx], body_scores17[idx], hands, hand_scores, xy[23:91], scores[23:91]


class DWPoseEstimator:
    """Whole-body keypoints of the main person in RGB frames, from DWPose ONNX files.

    Parameters
    ----------
    pose_model : path
        The DWPose whole-body ONNX file (input ``(1, 3, h, w)``, outputs SimCC x and y).
    detector_model : path
        The YOLOX person-detector ONNX file (input ``(1, 3, 640, 640)``).
    device : {"cpu", "cuda"}
        ONNX Runtime execution provider.
    """

    def __init__(self, pose_model: str | Path, detector_model: str | Path, device: str = "cpu"):
        try:
            import onnxruntime as ort
        except ImportError as err:  # pragma: no cover - exercised without the extra
            raise ImportError(
                "DWPoseEstimator needs onnxruntime: pip install 'mimicmotion[dwpose]'"
            ) from err
        for name, path in (("pose_model", pose_model), ("detector_model", detector_model)):
            if not Path(path).is_file():
                raise FileNotFoundError(f"{name} {str(path)!r} is not a file")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        providers = ["CUDAExecutionProvider"] if device == "cuda" else []
        providers.append("CPUExecutionProvider")
        self.pose = ort.InferenceSession(str(pose_model), providers=providers)
        self.detector = ort.InferenceSession(str(detector_model), providers=providers)
        h, w = self.pose.get_inputs()[0].shape[2:]
        self.pose_size = (int(w), int(h))
        self.detector_size = tuple(int(s) for s in self.detector.get_inputs()[0].shape[2:])

    def detect(self, image: np.ndarray, score: float = 0.3, iou: float = 0.45) -> np.ndarray:
        """Person boxes ``(N, 4)`` xyxy in image pixels, most confident first."""
        inputs, r = letterbox(image, self.detector_size)
        raw = self.detector.run(None, {self.detector.get_inputs()[0].name: inputs})[0][0]
        pred = decode_yolox(raw, self.detector_size)
        person = pred[:, 4] * pred[:, 5]
        boxes = np.concatenate([pred[:, :2] - pred[:, 2:4] / 2, pred[:, :2] + pred[:, 2:4] / 2], 1)
        boxes /= r
        candidates = np.flatnonzero(person > 0.1)
        kept = candidates[nms(boxes[candidates], person[candidates], iou)]
        return boxes[kept[person[kept] > score]]

    def keypoints(self, image: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """133 whole-body keypoints ``(133, 2)`` in image pixels and scores ``(133,)``."""
        center, size = crop_box(np.asarray(box, dtype=np.float64), self.pose_size)
        w, h = self.pose_size
        # PIL's affine maps output pixels to input pixels
        matrix = (size[0] / w, 0, center[0] - size[0] / 2, 0, size[1] / h, center[1] - size[1] / 2)
        crop = Image.fromarray(image).transform((w, h), Image.AFFINE, matrix, Image.BILINEAR)
        x = ((np.asarray(crop, dtype=np.float32) - _MEAN) / _STD).transpose(2, 0, 1)[None]
        simcc_x, simcc_y = self.pose.run(None, {self.pose.get_inputs()[0].name: x})[:2]
        locs, scores = decode_simcc(simcc_x[0], simcc_y[0])
        return locs / np.array([w, h]) * size + center - size / 2, scores

    def __call__(self, frames) -> PoseSequence:
        """Keypoints of the main person in every frame of ``frames`` (``(F, H, W, 3)``
        uint8 RGB, or a list of such images); frames with nobody get zero confidences."""
        out = []
        for frame in frames:
            frame = np.asarray(frame)
            if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
                raise ValueError(
                    f"frames must be (H, W, 3) uint8 RGB images, got {frame.dtype} {frame.shape}"
                )
            height, width = frame.shape[:2]
            best = None
            for box in self.detect(frame):
                parts = wholebody_to_pose(*self.keypoints(frame, box), height, width)
                if best is None or parts[1].mean() > best[1].mean():
                    best = parts
            if best is None:
                best = (
                    np.zeros((18, 2)),
                    np.zeros(18),
                    np.zeros((2, 21, 2)),
                    np.zeros((2, 21)),
                    np.zeros((68, 2)),
                    np.zeros(68),
                )
            out.append(best)
        if not out:
            raise ValueError("frames is empty")
        return PoseSequence(*(np.stack(p) for p in zip(*out, strict=True)))
