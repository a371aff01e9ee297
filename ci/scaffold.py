"""Lay out a new method package with the whole package contract, and nothing that passes.

    python ci/scaffold.py NAME "Paper title" "https://paper-url"

Writes packages/NAME/: pyproject (version 0.0.0, icml25-core 0.2 range, entry point, dev
group), README (quick-start marker, claim table and "Differences from the official code"
sections to fill), CHANGELOG, src/ (lazy public API, `_method.py` with status "planned",
`experiments.py` with smoke/quick/full profiles), tests/ (the conformance kit and a claim
test that fails until it is written), benchmarks/. Registers NAME in the root pyproject
(workspace source, dev group, isort's first-party list) and regenerates the README's method
table. Nothing it writes passes for a method: the experiment and the benchmark raise
NotImplementedError, so the conformance and claim tests fail until the package is real.
Then run `uv lock` and start on src/.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "pyproject.toml": """[project]
name = "{name}"
version = "0.0.0"
description = "{title} (ICML 2025) - planned, not implemented yet"
readme = "README.md"
requires-python = ">=3.11"
license = "MIT"
authors = [{{ name = "icml25 developers" }}]
dependencies = ["icml25-core>=0.2,<0.3", "numpy>=1.26"]

[dependency-groups]
dev = ["pytest>=8.3"]

[project.urls]
Paper = "{url}"

[project.entry-points."icml25.methods"]
{name} = "{mod}._method:METHOD"

[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["src/{mod}"]
""",
    "README.md": """# {name}

**Status: planned. Nothing here is implemented yet.**

{title} (ICML 2025), {url}.

## Quick start

<!-- quick-start -->
```python
import {mod}

print({mod}.__version__)
```

## The claim, measured

Not measured yet: `uv run icml25 reproduce {name}`.

## Differences from the official code

Not written yet: each deviation from the official code and each bug found in it, with
why (where no official code is public, say so and name the choices the paper left open).
""",
    "CHANGELOG.md": """# Changelog

Format: [Keep a Changelog](https://keepachangelog.com/en/1.1.0/).

## [Unreleased]
""",
    "src/{mod}/__init__.py": '''"""{name}: {title} (planned)."""

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from icml25_core.lazy import lazy_exports

if TYPE_CHECKING:  # the public API, imported on first use (the entry point stays light)
    pass

__getattr__, __dir__ = lazy_exports(__name__, __file__)

__version__ = _version("{name}")

__all__ = ["__version__"]
''',
    "src/{mod}/_method.py": '''"""What {name} tells the icml25 CLI (imported without heavy dependencies)."""

from icml25_core import Method

METHOD = Method(
    name="{name}",
    title="{title}",
    authors=(),
    venue="ICML 2025",
    url="{url}",
    summary="planned",
    experiments={{"claim": "{mod}.experiments:CLAIM"}},
    status="planned",
)
''',
    "src/{mod}/experiments.py": '''"""The paper's claim at laptop scale (not written yet)."""

from icml25_core import Experiment

PROFILES = {{
    "smoke": {{}},  # seconds: the code path end to end, for the conformance kit
    "quick": {{}},  # a laptop CPU, about a minute: what the claim test asserts
    "full": {{}},  # closer to the paper
}}


def _run(config, seed, out_dir):
    raise NotImplementedError("{name}: the claim experiment is not written yet")


def _judge(rows):
    raise NotImplementedError("{name}: the claim experiment is not written yet")


CLAIM = Experiment("claim", "not written yet", _run, _judge, PROFILES)
''',
    "tests/test_conformance.py": '''"""The package contract (icml25-core's conformance kit).
A package saving models through icml25_core.hub.PretrainedModelMixin overrides
`pretrained_models()` with tiny instances of each class; the kit checks their persistence.
"""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "{name}"
''',
    "tests/test_claim.py": '''"""The quick claim test: what the quick profile measured, stated margins."""

import pytest


@pytest.mark.claim
def test_claim_quick():
    pytest.fail("{name} is a scaffold: run the quick profile and assert what it measured")
''',
    "benchmarks/bench_peer.py": '''"""Benchmark against the peer library (not written yet)."""


def run(smoke: bool = False):
    raise NotImplementedError("{name}: the benchmark is not written yet")
''',
}


def register(toml: str, name: str, mod: str) -> str:
    """The root pyproject with ``name`` as a workspace source, in the dev group and in
    isort's first-party list."""
    toml = toml.replace(
        "[tool.uv.sources]\n", f"[tool.uv.sources]\n{name} = {{ workspace = true }}\n", 1
    )
    toml = toml.replace(
        '    "icml25-core[torch]",\n', f'    "icml25-core[torch]",\n    "{name}",\n', 1
    )
    match = re.search(r"known-first-party = \[(.*?)\]", toml)
    if match is None:
        raise ValueError("the root pyproject has no isort known-first-party list")
    names = sorted({*re.findall(r'"([^"]+)"', match.group(1)), mod} - {"icml25_core"})
    listed = ", ".join(f'"{n}"' for n in ["icml25_core", *names])
    return toml[: match.start()] + f"known-first-party = [{listed}]" + toml[match.end() :]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    name, title, url = argv
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        print(f"NAME must be a lowercase distribution name like 'otp-map', got {name!r}")
        return 2
    pkg = ROOT / "packages" / name
    if pkg.exists():
        print(f"{pkg} exists already")
        return 1
    mod = name.replace("-", "_")
    for rel, text in FILES.items():
        path = pkg / rel.format(mod=mod)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(name=name, mod=mod, title=title, url=url))
    root = ROOT / "pyproject.toml"
    root.write_text(register(root.read_text(), name, mod))
    print(f"laid out {pkg.relative_to(ROOT)}; now run `uv lock`, then")
    print("`uv run python ci/methods_table.py` (after `uv sync`) and write the method")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
