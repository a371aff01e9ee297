"""The shape world and the dataset readers."""

import h5py
import numpy as np
import pytest
import torch

from vsp_point import SHAPES, ShapeWorld, load_h5, load_modelnet40


def test_every_shape_samples_a_cloud_in_the_unit_ball():
    world = ShapeWorld(num_points=128, noise=0.0, partial=1.0, clutter=0.2)
    x, y = world.sample(1, seed=0)
    assert x.shape == (len(SHAPES), 128, 3) and x.dtype == torch.float32
    assert sorted(y.tolist()) == list(range(len(SHAPES)))
    assert x.norm(dim=-1).max() <= 1.0 + 1e-5


def test_sampling_is_deterministic_by_seed():
    world = ShapeWorld(("cone", "chair"), num_points=64)
    a, b, c = world.sample(3, seed=5), world.sample(3, seed=5), world.sample(3, seed=6)
    torch.testing.assert_close(a[0], b[0])
    assert not torch.equal(a[0], c[0])


def test_unknown_shapes_and_settings_are_refused():
    with pytest.raises(ValueError, match="classes"):
        ShapeWorld(("sphere", "teapot"))
    with pytest.raises(ValueError, match="clutter"):
        ShapeWorld(clutter=0.9)


def test_h5_files_read_back_with_extra_channels_dropped(tmp_path):
    data = np.random.default_rng(0).normal(size=(5, 32, 6)).astype(np.float32)
    for i in range(2):
        with h5py.File(tmp_path / f"ply_data_train{i}.h5", "w") as f:
            f["data"], f["label"] = data, np.arange(5)[:, None]
    x, y = load_h5(sorted(tmp_path.glob("*.h5")))
    assert x.shape == (10, 32, 3) and y.tolist() == [0, 1, 2, 3, 4] * 2
    np.testing.assert_array_equal(x[:5].numpy(), data[..., :3])


def test_damaged_h5_files_are_named(tmp_path):
    bad = tmp_path / "broken.h5"
    bad.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match=r"broken\.h5"):
        load_h5(bad)
    with h5py.File(tmp_path / "nolabel.h5", "w") as f:
        f["data"] = np.zeros((2, 8, 3))
    with pytest.raises(ValueError, match="label"):
        load_h5(tmp_path / "nolabel.h5")


def test_modelnet40_txt_release(tmp_path):
    (tmp_path / "modelnet40_shape_names.txt").write_text("airplane\nbed\n")
    (tmp_path / "modelnet40_train.txt").write_text("airplane_0001\nbed_0001\n")
    rng = np.random.default_rng(0)
    for name in ("airplane", "bed"):
        (tmp_path / name).mkdir()
        rows = rng.normal(size=(20, 6))
        np.savetxt(tmp_path / name / f"{name}_0001.txt", rows, delimiter=",")
    x, y, classes = load_modelnet40(tmp_path, "train", num_points=16)
    assert x.shape == (2, 16, 3) and y.tolist() == [0, 1] and classes == ["airplane", "bed"]
    with pytest.raises(ValueError, match=r"airplane_0001\.txt"):
        load_modelnet40(tmp_path, "train", num_points=64)
    with pytest.raises(FileNotFoundError, match=r"modelnet40_test\.txt"):
        load_modelnet40(tmp_path, "test")
