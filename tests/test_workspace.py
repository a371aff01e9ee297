"""Workspace-level checks: every package owes its users the same parts."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

from icml25_core import discover_methods

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())
ROOT_TOML = tomllib.loads((ROOT / "pyproject.toml").read_text())


def meta(pkg: Path) -> dict:
    return tomllib.loads((pkg / "pyproject.toml").read_text())["project"]


def import_name(pkg: Path) -> str:
    return meta(pkg)["name"].replace("-", "_")


def test_there_are_packages():
    assert PACKAGES, "packages/ holds no distribution"


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_package_has_every_part(pkg):
    m = meta(pkg)
    assert m["name"] == pkg.name, "folder name must equal the distribution name"
    assert "version" in m and "version" not in m.get("dynamic", [])
    assert m["name"] in m.get("entry-points", {}).get("icml25.methods", {})
    # the core's 0.2 series; a package may require a later 0.2.x for a newer helper, and
    # name the core's extras it uses (icml25-core[flower])
    core = r"icml25-core(\[[a-z0-9,-]+\])?>=0\.2(\.\d+)?,<0\.3"
    assert any(re.match(core, d) for d in m["dependencies"])
    groups = tomllib.loads((pkg / "pyproject.toml").read_text()).get("dependency-groups", {})
    assert any(d.startswith("pytest") for d in groups.get("dev", [])), "tests must run alone"
    for f in ("README.md", "CHANGELOG.md"):
        assert (pkg / f).stat().st_size > 200, f"{f} is missing or a stub"
    assert (pkg / "src" / import_name(pkg) / "__init__.py").exists()
    assert list((pkg / "tests").glob("test_*.py"))
    assert list((pkg / "benchmarks").glob("bench_*.py"))
    assert (pkg / "tests" / "test_conformance.py").is_file(), "the conformance kit must run"


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_cuda_extra_is_a_real_gpu_add_on_or_absent(pkg):
    """A `cuda` extra that only repeats a base dependency (torch) is a promise it cannot keep."""
    extras = meta(pkg).get("optional-dependencies", {})
    if "cuda" not in extras:
        return
    base = {re.split(r"[<>=!~;\[ ]", d)[0] for d in meta(pkg)["dependencies"]}
    base |= {re.split(r"[<>=!~;\[ ]", d)[0] for k, v in extras.items() if k != "cuda" for d in v}
    own = {re.split(r"[<>=!~;\[ ]", d)[0] for d in extras["cuda"]} - base - {"torch"}
    assert own, f"{pkg.name}'s cuda extra adds no GPU-only package: {extras['cuda']}"


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_every_package_has_a_claim_test(pkg):
    marked = [p for p in (pkg / "tests").glob("test_*.py") if "@pytest.mark.claim" in p.read_text()]
    assert marked, f"{pkg.name} has no @pytest.mark.claim test"


def test_no_fmt_skip_beyond_a_handful():
    """The shared formatter covers every package; aligned number tables may opt out."""
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in (ROOT / "packages").rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert len(hits) <= 5, hits


def test_every_package_is_installed_and_registered():
    found = discover_methods()
    for pkg in PACKAGES:
        assert pkg.name in found, f"{pkg.name} does not register in icml25.methods"
        assert found[pkg.name].experiments, f"{pkg.name} registers no experiment"


def test_discovery_and_icml25_list_import_no_heavy_dependency():
    """`icml25 list` / `info` read only each package's `_method.py` (no torch, PyG,
    diffusers, transformers...), whatever the number of packages."""
    import subprocess
    import sys

    code = (
        "import sys; from icml25_core import discover_methods;"
        "from icml25_core.testing import HEAVY_MODULES; from icml25_core.cli import app;"
        "from typer.testing import CliRunner; m = discover_methods();"
        "r = CliRunner().invoke(app, ['list']); assert r.exit_code == 0, r.output;"
        "print(len(m), sorted(x for x in HEAVY_MODULES if x in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(PACKAGES)), "[]"], out.stdout


def test_root_pulls_every_member():
    dev = " ".join(ROOT_TOML["dependency-groups"]["dev"])
    sources = ROOT_TOML["tool"]["uv"]["sources"]
    for name in ["icml25-core", *(p.name for p in PACKAGES)]:
        assert name in dev, f"{name} is not in the root dev group"
        assert sources.get(name) == {"workspace": True}


def test_peers_come_from_the_packages_dev_groups():
    """A package's dev group is the source of its peers and test-only libraries; the root
    repeats them verbatim because uv installs members' dev groups only with
    `--all-packages` (astral-sh/uv#8722), and the README's plain `uv run pytest` must have
    them. Nothing else may sit in the root list, and nothing may drift."""
    members = {"icml25-core", *(p.name for p in PACKAGES)}
    checks = {"pytest", "pytest-xdist", "ruff", "check-wheel-contents", "scipy"}
    root = set()
    for req in ROOT_TOML["dependency-groups"]["dev"]:
        name = re.split(r"[<>=!~;\[ ]", req)[0]
        if name not in members | checks:
            root.add(req)
    owned = set()
    for pkg in PACKAGES:
        groups = tomllib.loads((pkg / "pyproject.toml").read_text()).get("dependency-groups", {})
        owned |= {d for d in groups.get("dev", []) if not d.startswith("pytest")}
    assert root == owned, (
        f"root dev group lists {sorted(root - owned)} that no package's dev group has, and "
        f"misses {sorted(owned - root)}: copy each package's dev-group line verbatim"
    )


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_no_package_imports_another_method_package(pkg):
    others = {import_name(p) for p in PACKAGES if p != pkg}
    for path in pkg.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in others, f"{path} imports {name}"


def test_readme_method_table_is_generated_from_the_metadata():
    """The root README's table is what ci/methods_table.py makes of each Method."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("methods_table", ROOT / "ci" / "methods_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert module.render(readme) == readme, "stale: run `uv run python ci/methods_table.py`"
    for pkg in PACKAGES:
        assert f"[`{pkg.name}`](packages/{pkg.name})" in readme


def test_scaffold_lays_out_the_whole_contract_and_nothing_that_passes(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("scaffold", ROOT / "ci" / "scaffold.py")
    scaffold = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scaffold)
    (tmp_path / "packages").mkdir()
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    monkeypatch.setattr(scaffold, "ROOT", tmp_path)
    assert scaffold.main(["new-method", "A Title", "https://example.org"]) == 0
    pkg = tmp_path / "packages" / "new-method"
    for rel in (
        "pyproject.toml",
        "README.md",
        "CHANGELOG.md",
        "src/new_method/__init__.py",
        "src/new_method/_method.py",
        "src/new_method/experiments.py",
        "tests/test_conformance.py",
        "tests/test_claim.py",
        "benchmarks/bench_peer.py",
    ):
        assert (pkg / rel).is_file(), rel
    for path in pkg.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    meta = tomllib.loads((pkg / "pyproject.toml").read_text())["project"]
    assert any(re.match(r"icml25-core>=0\.2,<0\.3", d) for d in meta["dependencies"])
    assert "cuda" not in meta.get("optional-dependencies", {})
    claim = (pkg / "tests" / "test_claim.py").read_text()
    assert "@pytest.mark.claim" in claim and "pytest.fail(" in claim
    assert "<!-- quick-start -->" in (pkg / "README.md").read_text()
    assert "## Differences from the official code" in (pkg / "README.md").read_text()
    root = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert root["tool"]["uv"]["sources"]["new-method"] == {"workspace": True}
    assert "new-method" in root["dependency-groups"]["dev"]
    assert "new_method" in root["tool"]["ruff"]["lint"]["isort"]["known-first-party"]
    assert scaffold.main(["new-method", "A Title", "https://example.org"]) == 1  # exists
