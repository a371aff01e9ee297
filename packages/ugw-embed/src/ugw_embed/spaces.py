"""Target spaces: discretised metric spaces that both datasets are embedded into.

A :class:`TargetSpace` holds grid points (coordinates used for barycentric projection),
their pairwise geodesic distances, and a projection that maps a Euclidean average of
coordinates back onto the space (identity for the plane, normalisation for the sphere and
circle, per-angle normalisation for the torus).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist

from icml25_core import check_array, check_scalar

__all__ = ["SPACES", "TargetSpace", "grid_symmetries", "make_space"]

SPACES = ("plane", "sphere", "torus", "circle")


@dataclass(frozen=True)
class TargetSpace:
    """A discretised target metric space.

    Attributes
    ----------
    name : str
        ``"plane"``, ``"sphere"``, ``"torus"``, ``"circle"`` or ``"custom"``.
    points : numpy.ndarray, shape (k, d)
        Coordinates of the grid points (plane: [0, 1]^2; sphere: unit vectors in R^3;
        circle: unit vectors in R^2; torus: (cos a, sin a, cos b, sin b) in R^4).
    distances : numpy.ndarray, shape (k, k)
        Geodesic distances between grid points, in the space's own units.
    project : callable
        Maps averages of coordinates, shape (n, d), back onto the space.
    """

    name: str
    points: np.ndarray
    distances: np.ndarray
    project: Callable[[np.ndarray], np.ndarray]

    @property
    def size(self) -> int:
        return int(self.points.shape[0])


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def _normalize_rows(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def _normalize_pairs(x: np.ndarray) -> np.ndarray:
    return np.concatenate([_normalize_rows(x[:, :2]), _normalize_rows(x[:, 2:])], axis=1)


def _periodic(angles: np.ndarray) -> np.ndarray:
    d = np.abs(angles[:, None] - angles[None, :])
    return np.minimum(d, 2 * np.pi - d)


def make_space(space: str | tuple[Any, Any], grid: int = 50) -> TargetSpace:
    """Discretise a target space.

    Parameters
    ----------
    space : {"plane", "sphere", "torus", "circle"} or (points, distance_matrix)
        A named space, or any user grid: ``points`` (k, d) coordinates and their (k, k)
        metric distance matrix.
    grid : int
        Points per dimension: ``grid**2`` for plane and torus, ``grid**2`` Fibonacci points
        for the sphere, ``grid`` for the circle. Ignored for a user grid.
    """
    if isinstance(space, tuple):
        if len(space) != 2:
            raise ValueError("space must be a name or a pair (points, distance_matrix)")
        points = np.asarray(check_array(np.asarray(space[0], dtype=float), "space points", ndim=2))
        D = np.asarray(space[1], dtype=float)
        check_metric(D, "space distance_matrix")
        if D.shape[0] != points.shape[0]:
            raise ValueError(
                f"space distance_matrix must be ({points.shape[0]}, {points.shape[0]}) like its "
                f"points, got {D.shape}"
            )
        return TargetSpace("custom", points, D, _identity)
    if space not in SPACES:
        raise ValueError(
            f"space must be one of {SPACES} or (points, distance_matrix), got {space!r}"
        )
    check_scalar(grid, "grid", low=2, integer=True)
    if space == "plane":
        g = np.linspace(0.0, 1.0, grid)
        pts = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
        return TargetSpace("plane", pts, cdist(pts, pts), _identity)
    if space == "circle":
        ang = 2 * np.pi * np.arange(grid) / grid
        pts = np.stack([np.cos(ang), np.sin(ang)], 1)
        return TargetSpace("circle", pts, _periodic(ang), _normalize_rows)
    if space == "sphere":
        k = grid * grid
        i = np.arange(k) + 0.5
        phi = np.arccos(1 - 2 * i / k)
        theta = np.pi * (1 + 5**0.5) * i
        pts = np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], 1)
        D = np.arccos(np.clip(pts @ pts.T, -1.0, 1.0))
        np.fill_diagonal(D, 0.0)  # arccos is ill-conditioned at 1: exact zeros on the diagonal
        return TargetSpace("sphere", pts, D, _normalize_rows)
    ang = 2 * np.pi * np.arange(grid) / grid
    a, b = (x.reshape(-1) for x in np.meshgrid(ang, ang, indexing="ij"))
    pts = np.stack([np.cos(a), np.sin(a), np.cos(b), np.sin(b)], 1)
    D = np.sqrt(_periodic(a) ** 2 + _periodic(b) ** 2)
    return TargetSpace("torus", pts, D, _normalize_pairs)


def space_size(space: str | tuple[Any, Any], grid: int) -> int:
    """Number of grid points :func:`make_space` would build, without building it."""
    if isinstance(space, tuple):
        return int(np.shape(space[0])[0])
    return grid if space == "circle" else grid * grid


def check_metric(D: Any, name: str, *, triples: int = 20000, seed: int = 0) -> np.ndarray:
    """Check that ``D`` is a distance matrix: square, finite, symmetric, zero diagonal,
    non-negative, and satisfying the triangle inequality on ``triples`` random triples.

    Returns
    -------
    numpy.ndarray
        ``D`` as float64.
    """
    D = np.asarray(check_array(np.asarray(D, dtype=float), name, ndim=2, nonnegative=True))
    n = D.shape[0]
    if D.shape != (n, n):
        raise ValueError(f"{name} must be square, got shape {D.shape}")
    scale = max(float(D.max()), 1e-300)
    if not np.allclose(D, D.T, rtol=0, atol=1e-9 * scale):
        raise ValueError(f"{name} must be symmetric (max asymmetry {np.abs(D - D.T).max():.3e})")
    if np.any(np.abs(np.diag(D)) > 1e-12 * scale):
        raise ValueError(f"{name} must have a zero diagonal")
    if n >= 3:
        rng = np.random.default_rng(seed)
        i, j, k = rng.integers(0, n, size=(3, triples))
        excess = D[i, j] - D[i, k] - D[k, j]
        if np.any(excess > 1e-9 * scale):
            t = int(np.argmax(excess))
            raise ValueError(
                f"{name} must satisfy the triangle inequality: D[{i[t]}, {j[t]}] = {D[i[t], j[t]]:.4g} > "
                f"D[{i[t]}, {k[t]}] + D[{k[t]}, {j[t]}] = {D[i[t], k[t]] + D[k[t], j[t]]:.4g}"
            )
    return D


def grid_symmetries(space: TargetSpace) -> list[np.ndarray]:
    """The grid's non-identity isometries as index permutations ``perm`` (point ``i`` maps
    to ``perm[i]``, and ``distances[perm][:, perm] == distances``).

    Plane and torus: the 7 non-trivial maps of the square's dihedral group on the
    ``grid x grid`` index lattice (on the torus each is an isometry composed with a
    rotation); circle: the reflection. The sphere's Fibonacci points and user grids have
    no exact symmetry: an empty list. Every candidate is checked against the distances.
    """
    k = space.size
    if space.name in ("plane", "torus"):
        g = round(math.sqrt(k))
        i, j = (x.reshape(-1) for x in np.meshgrid(np.arange(g), np.arange(g), indexing="ij"))
        r = g - 1
        maps = [
            (r - i, j),
            (i, r - j),
            (r - i, r - j),
            (j, i),
            (r - j, i),
            (j, r - i),
            (r - j, r - i),
        ]
        candidates = [a * g + b for a, b in maps]
    elif space.name == "circle":
        candidates = [(-np.arange(k)) % k]
    else:
        return []
    D = space.distances
    return [p for p in candidates if np.allclose(D[np.ix_(p, p)], D, atol=1e-9)]
