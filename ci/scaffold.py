"""Lay out a new method package with every part the workspace requires, and nothing more.

    python ci/scaffold.py NAME "Paper title" "https://paper-url"

Writes packages/NAME/ (pyproject with version 0.0.0, `cuda` extra and entry point, README
marked *planned*, CHANGELOG, src/, tests/, benchmarks/) and registers NAME in the root
pyproject. Nothing it writes passes for a method: the experiment and the benchmark raise
NotImplementedError and the only test fails until you replace it with real ones.
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
dependencies = ["icml25-core>=0.1,<0.2", "numpy>=1.26"]

[project.optional-dependencies]
cuda = []

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
""",
    "CHANGELOG.md": """# Changelog

Format: [Keep a Changelog](https://keepachangelog.com/en/1.1.0/).

## [Unreleased]
""",
    "src/{mod}/__init__.py": '''"""{name}: {title} (planned)."""

from importlib.metadata import version as _version

__version__ = _version("{name}")

__all__ = ["__version__"]
''',
    "src/{mod}/_method.py": '''"""What {name} tells the icml25 CLI."""

from icml25_core import Method

METHOD = Method(
    name="{name}",
    title="{title}",
    authors=(),
    venue="ICML 2025",
    url="{url}",
    summary="planned",
    experiments={{"claim": "{mod}.experiments:CLAIM"}},
)
''',
    "src/{mod}/experiments.py": '''"""The paper's claim at laptop scale (not written yet)."""

from icml25_core import Experiment


def _run(profile, seed, out_dir):
    raise NotImplementedError("{name}: the claim experiment is not written yet")


def _judge(rows):
    raise NotImplementedError("{name}: the claim experiment is not written yet")


CLAIM = Experiment("claim", "not written yet", _run, _judge)
''',
    "tests/test_{mod}.py": """import pytest


def test_method_is_implemented():
    pytest.fail("{name} is a scaffold: replace this with unit, oracle and claim tests")
""",
    "benchmarks/bench_peer.py": '''"""Benchmark against the peer library (not written yet)."""


def run(smoke: bool = False):
    raise NotImplementedError("{name}: the benchmark is not written yet")
''',
}


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
    toml = root.read_text()
    toml = toml.replace(
        "[tool.uv.sources]\n", f"[tool.uv.sources]\n{name} = {{ workspace = true }}\n", 1
    )
    toml = toml.replace(
        '    "icml25-core[torch]",\n', f'    "icml25-core[torch]",\n    "{name}",\n', 1
    )
    root.write_text(toml)
    print(f"laid out {pkg.relative_to(ROOT)}; now run `uv lock` and write the method")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
