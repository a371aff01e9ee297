"""Method metadata and discovery of installed method packages.

Every method package registers one :class:`Method` under the entry-point group
``icml25.methods``. The object is cheap to import: experiments are named by import
strings (``"package.module:attribute"``) and only loaded when they are run, so
``icml25 list`` does not import torch or any heavy dependency.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "icml25.methods"
STATUSES = ("available", "planned")


@dataclass(frozen=True)
class Method:
    """What a method package tells the umbrella CLI about itself.

    Parameters
    ----------
    name : str
        Distribution name, e.g. ``"gsb-sinkhorn"``; also the CLI name.
    title : str
        The paper's title.
    authors : tuple of str
        The paper's authors.
    venue : str
        Where it was published, e.g. ``"ICML 2025 (PMLR 267:10741-10767)"``.
    url : str
        The paper's landing page (PMLR, OpenReview or arXiv).
    summary : str
        One line: what the package does.
    experiments : dict of str to str
        Experiment name -> import string of an :class:`~icml25_core.experiment.Experiment`.
    status : {"available", "planned"}
        ``available``: the method, baselines, claim experiment, benchmark and tests are
        done; ``planned``: nothing usable yet (a scaffold).
    claim : str
        One line: what the claim experiment measured (held or not, and the numbers that
        say so). The root README's method table is generated from it.
    """

    name: str
    title: str
    authors: tuple[str, ...]
    venue: str
    url: str
    summary: str
    experiments: dict[str, str] = field(default_factory=dict)
    status: str = "planned"
    claim: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "available" and not self.claim:
            raise ValueError(f"{self.name}: an available method states its measured claim")

    @property
    def import_name(self) -> str:
        """The import name of the package (distribution name with ``_`` for ``-``)."""
        return self.name.replace("-", "_")

    @property
    def version(self) -> str:
        """The installed version of the distribution."""
        return md.version(self.name)

    def load_experiment(self, name: str) -> Any:
        """Import and return the experiment registered as ``name``."""
        if name not in self.experiments:
            raise KeyError(
                f"experiment {name!r} is not one of {self.name}'s experiments: "
                f"{sorted(self.experiments)}"
            )
        return load_object(self.experiments[name])

    def benchmarks_dir(self) -> Path | None:
        """The package's ``benchmarks/`` folder, present in a source checkout only."""
        spec = importlib.util.find_spec(self.import_name)
        if spec is None or spec.origin is None:
            return None
        # <root>/src/<pkg>/__init__.py -> <root>/benchmarks
        candidate = Path(spec.origin).resolve().parents[2] / "benchmarks"
        return candidate if candidate.is_dir() else None


def load_object(target: str) -> Any:
    """Import ``"package.module:attribute"`` and return the attribute."""
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise ValueError(f"target must look like 'package.module:attribute', got {target!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def discover_methods() -> dict[str, Method]:
    """All installed methods, by name, from the ``icml25.methods`` entry points."""
    found: dict[str, Method] = {}
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        method = ep.load()
        if not isinstance(method, Method):
            raise TypeError(
                f"entry point {ep.name!r} in group {ENTRY_POINT_GROUP!r} must point to an "
                f"icml25_core.Method, got {type(method).__name__}"
            )
        found[method.name] = method
    return dict(sorted(found.items()))


def get_method(name: str) -> Method:
    """The installed method called ``name``; a clear error lists the installed ones."""
    methods = discover_methods()
    if name not in methods:
        known = ", ".join(methods) or "none"
        raise LookupError(f"no installed method called {name!r}; installed: {known}")
    return methods[name]
