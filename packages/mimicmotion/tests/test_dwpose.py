"""DWPose ONNX estimator: decoding oracles, and the whole path on tiny constant ONNX models
built here (no download)."""

import numpy as np
import pytest

from mimicmotion.dwpose import (
    crop_box,
    decode_simcc,
    decode_yolox,
    letterbox,
    nms,
    wholebody_to_pose,
)


def test_yolox_decoding_nms_and_letterbox():
    raw = np.zeros((8 * 8 + 4 * 4 + 2 * 2, 6))
    out = decode_yolox(raw, (64, 64))
    np.testing.assert_array_equal(out[1, :4], [8, 0, 8, 8])  # second cell of stride 8
    np.testing.assert_array_equal(out[64, :4], [0, 0, 16, 16])  # first cell of stride 16
    with pytest.raises(ValueError, match="anchors"):
        decode_yolox(raw[:-1], (64, 64))
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=float)
    assert nms(boxes, np.array([0.9, 0.8, 0.7])) == [0, 2]
    assert nms(boxes, np.array([0.7, 0.8, 0.9])) == [2, 1]
    x, r = letterbox(np.zeros((32, 16, 3), dtype=np.uint8), (64, 64))
    assert r == 2 and x.shape == (1, 3, 64, 64)
    assert (x[0, :, :, :32] == 0).all() and (x[0, :, :, 32:] == 114).all()


def test_simcc_crop_and_wholebody_mapping():
    sx, sy = np.zeros((3, 10)), np.zeros((3, 12))
    sx[np.arange(3), [1, 4, 9]] = [0.9, 0.5, 0.2]
    sy[np.arange(3), [0, 6, 11]] = [0.3, 0.8, 0.4]
    locs, scores = decode_simcc(sx, sy)
    np.testing.assert_array_equal(locs, [[0.5, 0], [2, 3], [4.5, 5.5]])
    np.testing.assert_array_equal(scores, [0.3, 0.5, 0.2])
    center, size = crop_box(np.array([24, 16, 40, 48]), (24, 32))
    np.testing.assert_array_equal(center, [32, 32])
    np.testing.assert_allclose(size, [30, 40])  # padded 20 x 40, widened to aspect 0.75
    kp = np.arange(266, dtype=float).reshape(133, 2)
    sc = np.linspace(0, 1, 133)
    body, body_sc, hands, hand_sc, face, face_sc = wholebody_to_pose(kp, sc, 100, 200)
    np.testing.assert_allclose(body[1], (kp[5] + kp[6]) / 2 / [200, 100])  # neck
    np.testing.assert_allclose(body[2], kp[6] / [200, 100])  # right shoulder
    np.testing.assert_allclose(body[14:], kp[[2, 1, 4, 3]] / [200, 100])  # eyes, ears
    assert body_sc[1] == 0.0  # shoulders' scores are below 0.3
    np.testing.assert_allclose(hands[1], kp[112:133] / [200, 100])
    np.testing.assert_array_equal(hand_sc[0], sc[91:112])
    np.testing.assert_allclose(face[0], kp[23] / [200, 100])
    np.testing.assert_array_equal(face_sc, sc[23:91])
    with pytest.raises(ValueError, match="133"):
        wholebody_to_pose(kp[:17], sc[:17], 10, 10)


def _constant_model(path, input_shape, outputs):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_shape))
    nodes, outs, inits = [], [], []
    for name, value in outputs.items():
        inits.append(numpy_helper.from_array(value.astype(np.float32), f"{name}_c"))
        nodes.append(helper.make_node("Identity", [f"{name}_c"], [name]))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
    graph = helper.make_graph(nodes, "constant", [inp], outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_estimator_end_to_end_on_tiny_onnx_models(tmp_path):
    pytest.importorskip("onnxruntime")
    from mimicmotion.dwpose import DWPoseEstimator

    raw = np.zeros((1, 84, 6))  # nobody anywhere (scores are probabilities) ...
    raw[0, 8 * 4 + 4, :] = [0, 0, np.log(2), np.log(4), 0.9, 0.95]  # ... but one person
    detector = _constant_model(tmp_path / "det.onnx", (1, 3, 64, 64), {"pred": raw})
    sx, sy = np.zeros((1, 133, 48)), np.zeros((1, 133, 64))
    sx[..., 24], sy[..., 32] = 1.0, 1.0  # every keypoint at the crop centre
    pose = _constant_model(tmp_path / "pose.onnx", (1, 3, 32, 24), {"sx": sx, "sy": sy})
    est = DWPoseEstimator(pose, detector)
    frames = np.zeros((2, 64, 64, 3), dtype=np.uint8)
    boxes = est.detect(frames[0])
    np.testing.assert_allclose(boxes, [[24, 16, 40, 48]])  # cell (4, 4) of stride 8: centre 32
    poses = est(frames)
    assert len(poses) == 2
    np.testing.assert_allclose(poses.body[:, 0], 0.5)  # the crop centre is the image centre
    np.testing.assert_allclose(poses.hands, 0.5)
    assert (poses.body_scores == 1).all() and (poses.hand_scores == 1).all()
    with pytest.raises(FileNotFoundError, match="pose_model"):
        DWPoseEstimator(tmp_path / "missing.onnx", detector)
    with pytest.raises(ValueError, match="uint8"):
        est(np.zeros((1, 64, 64, 3), dtype=np.float32))
