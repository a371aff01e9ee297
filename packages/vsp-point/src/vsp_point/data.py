"""Point clouds to train on: a synthetic shape world, and readers for real datasets.

:class:`ShapeWorld` samples labelled clouds from the surfaces of trimesh primitives and
compositions of them (tables, chairs, mushrooms...), each instance with random
proportions, optionally rotated, cut to a partial view, cluttered with background points
and jittered: the nuisances of ScanObjectNN at laptop scale. :func:`load_h5` reads the
ModelNet40 (``ply_data_*.h5``) and ScanObjectNN (``*_objectdataset*.h5``) HDF5 files,
:func:`load_modelnet40` the resampled-txt release.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import trimesh

from icml25_core import check_choice, check_scalar

__all__ = ["SHAPES", "ShapeWorld", "load_h5", "load_modelnet40"]


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


def _at(mesh: trimesh.Trimesh, xyz: Sequence[float]) -> trimesh.Trimesh:
    return mesh.apply_translation(xyz)


def _sphere(r):
    return trimesh.creation.icosphere(subdivisions=2).apply_scale(
        [_u(r, 0.8, 1.2), _u(r, 0.8, 1.2), _u(r, 0.8, 1.2)]
    )


def _box(r):
    return trimesh.creation.box(extents=[_u(r, 0.7, 1.5), _u(r, 0.7, 1.5), _u(r, 0.7, 1.5)])


def _prism(r):
    return trimesh.creation.cylinder(radius=_u(r, 0.6, 0.9), height=_u(r, 0.8, 1.6), sections=3)


def _cylinder(r):
    return trimesh.creation.cylinder(radius=_u(r, 0.4, 0.7), height=_u(r, 1.0, 2.0), sections=24)


def _tube(r):
    outer = _u(r, 0.5, 0.8)
    return trimesh.creation.annulus(
        r_min=outer * _u(r, 0.6, 0.8), r_max=outer, height=_u(r, 1.0, 2.0), sections=24
    )


def _cone(r):
    return trimesh.creation.cone(radius=_u(r, 0.5, 0.8), height=_u(r, 1.0, 2.0), sections=24)


def _pyramid(r):
    return trimesh.creation.cone(radius=_u(r, 0.6, 0.9), height=_u(r, 0.8, 1.6), sections=4)


def _torus(r):
    return trimesh.creation.torus(major_radius=1.0, minor_radius=_u(r, 0.2, 0.4))


def _capsule(r):
    return trimesh.creation.capsule(height=_u(r, 0.8, 1.6), radius=_u(r, 0.3, 0.5))


def _dumbbell(r):
    rad, length = _u(r, 0.3, 0.45), _u(r, 1.0, 1.6)
    bar = trimesh.creation.cylinder(radius=0.08, height=length, sections=12)
    ends = [
        _at(trimesh.creation.icosphere(subdivisions=2, radius=rad), (0, 0, s * length / 2))
        for s in (-1, 1)
    ]
    return trimesh.util.concatenate([bar, *ends])


def _jack(r):
    t = _u(r, 0.15, 0.3)
    return trimesh.util.concatenate(
        [trimesh.creation.box(extents=e) for e in ([1.6, t, t], [t, 1.6, t], [t, t, 1.6])]
    )


def _legs(width, depth, height, radius=0.05):
    return [
        _at(
            trimesh.creation.cylinder(radius=radius, height=height, sections=8),
            (sx * width / 2, sy * depth / 2, -height / 2),
        )
        for sx in (-1, 1)
        for sy in (-1, 1)
    ]


def _table(r):
    w, d, h = _u(r, 1.2, 1.8), _u(r, 0.8, 1.2), _u(r, 0.6, 1.0)
    top = _at(trimesh.creation.box(extents=[w, d, 0.08]), (0, 0, 0.04))
    return trimesh.util.concatenate([top, *_legs(w * 0.9, d * 0.9, h)])


def _chair(r):
    w, h = _u(r, 0.7, 0.9), _u(r, 0.6, 0.8)
    seat = trimesh.creation.box(extents=[w, w, 0.08])
    back = _at(trimesh.creation.box(extents=[w, 0.08, _u(r, 0.6, 1.0)]), (0, w / 2, 0.4))
    return trimesh.util.concatenate([seat, back, *_legs(w * 0.9, w * 0.9, h)])


def _mushroom(r):
    stem_h = _u(r, 0.6, 1.0)
    stem = _at(trimesh.creation.cylinder(radius=_u(r, 0.12, 0.2), height=stem_h), (0, 0, 0))
    cap = trimesh.creation.icosphere(subdivisions=2).apply_scale([0.8, 0.8, _u(r, 0.3, 0.5)])
    return trimesh.util.concatenate([stem, _at(cap, (0, 0, stem_h / 2))])


SHAPES: dict[str, Callable[[np.random.Generator], trimesh.Trimesh]] = {
    "sphere": _sphere,
    "box": _box,
    "prism": _prism,
    "torus": _torus,
    "capsule": _capsule,
    "dumbbell": _dumbbell,
    "jack": _jack,
    "cylinder": _cylinder,
    "tube": _tube,
    "cone": _cone,
    "pyramid": _pyramid,
    "table": _table,
    "chair": _chair,
    "mushroom": _mushroom,
}
"""Shape name -> builder of a random instance's mesh (its proportions drawn from the rng)."""


def _rotation(rng: np.random.Generator, mode: str) -> np.ndarray:
    if mode == "none":
        return np.eye(3)
    if mode == "z":
        a = rng.uniform(0, 2 * np.pi)
        c, s = np.cos(a), np.sin(a)
        return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


class ShapeWorld:
    """Labelled synthetic point clouds, one class per shape.

    Parameters
    ----------
    classes : sequence of str
        Names from :data:`SHAPES` (default: all); label i is ``classes[i]``.
    num_points : int
        Points per cloud.
    rotation : {"so3", "z", "none"}
        Random rotation of each instance (``"z"``: about the up axis, as ModelNet).
    partial : float
        Probability that an instance is cut to a partial view: the points beyond a
        random plane through it are dropped (30-50 % of its surface).
    clutter : float
        Share of the points replaced by background: a random patch of a plane below and
        scattered points around the object (ScanObjectNN's background).
    noise : float
        Standard deviation of the Gaussian jitter, relative to the unit-sphere size.
    """

    def __init__(
        self,
        classes: Sequence[str] | None = None,
        *,
        num_points: int = 1024,
        rotation: str = "so3",
        partial: float = 0.0,
        clutter: float = 0.0,
        noise: float = 0.01,
    ) -> None:
        self.classes = tuple(SHAPES) if classes is None else tuple(classes)
        unknown = [c for c in self.classes if c not in SHAPES]
        if unknown or len(self.classes) < 2 or len(set(self.classes)) != len(self.classes):
            raise ValueError(
                f"classes must be two or more distinct names of {sorted(SHAPES)}; got "
                f"{list(self.classes)}"
            )
        check_scalar(num_points, "num_points", low=1, integer=True)
        check_choice(rotation, "rotation", ("so3", "z", "none"))
        check_scalar(partial, "partial", low=0, high=1)
        check_scalar(clutter, "clutter", low=0, high=0.5)
        check_scalar(noise, "noise", low=0)
        self.num_points, self.rotation = num_points, rotation
        self.partial, self.clutter, self.noise = partial, clutter, noise

    def cloud(self, label: int, rng: np.random.Generator) -> np.ndarray:
        """One instance of class ``label``: ``(num_points, 3)`` float32, in the unit ball."""
        mesh = SHAPES[self.classes[label]](rng)
        n = self.num_points
        n_clutter = round(self.clutter * n)
        n_obj = n - n_clutter
        cut = rng.random() < self.partial
        pts, _ = trimesh.sample.sample_surface(mesh, 3 * n_obj if cut else n_obj, seed=rng)
        pts = pts - mesh.bounding_box.centroid
        if cut:
            direction = rng.standard_normal(3)
            direction /= np.linalg.norm(direction)
            proj = pts @ direction
            keep = proj <= np.quantile(proj, rng.uniform(0.5, 0.7))
            pts = pts[keep]
            pts = pts[rng.choice(len(pts), n_obj, replace=len(pts) < n_obj)]
        pts = pts @ _rotation(rng, self.rotation).T
        pts = pts / max(np.linalg.norm(pts, axis=1).max(), 1e-9)
        if n_clutter:
            n_floor = n_clutter // 2
            floor = np.column_stack(
                [
                    rng.uniform(-1, 1, n_floor),
                    rng.uniform(-1, 1, n_floor),
                    np.full(n_floor, pts[:, 2].min()),
                ]
            )
            scatter = rng.uniform(-1, 1, (n_clutter - n_floor, 3))
            pts = np.concatenate([pts, floor, scatter])
            pts = pts / max(np.linalg.norm(pts, axis=1).max(), 1e-9)
        pts = pts + self.noise * rng.standard_normal(pts.shape)
        return pts[rng.permutation(n)].astype(np.float32)

    def sample(self, per_class: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``per_class`` clouds of every class, shuffled.

        Returns
        -------
        points : Tensor, shape (per_class * K, num_points, 3), float32
        labels : Tensor, shape (per_class * K,), int64
        """
        check_scalar(per_class, "per_class", low=1, integer=True)
        rng = np.random.default_rng(seed)
        labels = np.repeat(np.arange(len(self.classes)), per_class)
        rng.shuffle(labels)
        clouds = np.stack([self.cloud(int(y), rng) for y in labels])
        return torch.from_numpy(clouds), torch.from_numpy(labels.astype(np.int64))


def load_h5(
    paths: str | Path | Sequence[str | Path], *, data_key: str = "data", label_key: str = "label"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clouds and labels from HDF5 files (ModelNet40 ``ply_data_train*.h5``, ScanObjectNN
    ``training_objectdataset_augmentedrot_scale75.h5``...), concatenated in order.

    Returns
    -------
    points : Tensor, shape (n, N, 3), float32 (extra channels such as normals dropped)
    labels : Tensor, shape (n,), int64
    """
    import h5py

    files = [paths] if isinstance(paths, str | Path) else list(paths)
    if not files:
        raise ValueError("paths is empty")
    clouds, labels = [], []
    for file in files:
        file = Path(file)
        if not file.is_file():
            raise FileNotFoundError(f"no HDF5 file {str(file)!r}")
        try:
            with h5py.File(file, "r") as f:
                missing = [k for k in (data_key, label_key) if k not in f]
                if missing:
                    raise ValueError(f"{str(file)!r} has no dataset {missing} (has {list(f)})")
                data, label = np.asarray(f[data_key]), np.asarray(f[label_key]).reshape(-1)
        except OSError as err:
            raise ValueError(f"cannot read HDF5 file {str(file)!r}: {err}") from err
        if data.ndim != 3 or data.shape[-1] < 3 or len(data) != len(label):
            raise ValueError(
                f"{str(file)!r}: {data_key!r} must be (n, N, >=3) with n labels, got "
                f"{data.shape} and {label.shape}"
            )
        clouds.append(data[..., :3].astype(np.float32))
        labels.append(label.astype(np.int64))
    points = torch.from_numpy(np.concatenate(clouds))
    if not bool(torch.isfinite(points).all()):
        raise ValueError(f"NaN or infinite coordinates in {[str(f) for f in files]}")
    return points, torch.from_numpy(np.concatenate(labels))


def load_modelnet40(
    root: str | Path, split: str = "train", *, num_points: int = 1024
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """The resampled-txt ModelNet40 release (``modelnet40_normal_resampled``).

    ``root`` holds ``modelnet40_shape_names.txt``, ``modelnet40_{split}.txt`` (instance
    names such as ``airplane_0001``) and ``{class}/{instance}.txt`` (comma-separated
    ``x,y,z,nx,ny,nz`` rows); the first ``num_points`` points of each file are kept, as
    the official loaders do without FPS.

    Returns
    -------
    points : Tensor, shape (n, num_points, 3), float32
    labels : Tensor, shape (n,), int64
    class_names : list of str
    """
    check_choice(split, "split", ("train", "test"))
    root = Path(root)
    names_file, split_file = root / "modelnet40_shape_names.txt", root / f"modelnet40_{split}.txt"
    for f in (names_file, split_file):
        if not f.is_file():
            raise FileNotFoundError(f"ModelNet40 root {str(root)!r} lacks {f.name}")
    classes = [line.strip() for line in names_file.read_text().splitlines() if line.strip()]
    index = {c: i for i, c in enumerate(classes)}
    clouds, labels = [], []
    for name in (line.strip() for line in split_file.read_text().splitlines()):
        if not name:
            continue
        cls = name.rsplit("_", 1)[0]
        if cls not in index:
            raise ValueError(f"{str(split_file)!r} names {name!r}, whose class is not listed")
        file = root / cls / f"{name}.txt"
        try:
            rows = np.loadtxt(file, delimiter=",", dtype=np.float32, ndmin=2)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot read ModelNet40 file {str(file)!r}: {err}") from err
        if rows.shape[0] < num_points or rows.shape[1] < 3:
            raise ValueError(
                f"{str(file)!r} has {rows.shape[0]} points of {rows.shape[1]} columns; "
                f"need {num_points} of at least 3"
            )
        clouds.append(rows[:num_points, :3])
        labels.append(index[cls])
    if not clouds:
        raise ValueError(f"{str(split_file)!r} lists no instance")
    points = torch.from_numpy(np.stack(clouds))
    if not bool(torch.isfinite(points).all()):
        raise ValueError(f"NaN or infinite coordinates under {str(root)!r}")
    return points, torch.tensor(labels, dtype=torch.int64), classes
