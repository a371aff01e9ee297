"""Where the test step's time goes, from the JUnit XML report that ``ci/test.sh`` writes.

``python ci/test_times.py REPORT.xml`` prints every package's test time (setup, call and
teardown of its tests, summed over the xdist workers) against the ~60 s budget a package
has; ``--write`` also stores each test file's time in ``ci/test_durations.json``, which the
workspace ``conftest.py`` reads to start the longest files first (so that one worker is
not left running the last long claim test while the other idles).
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

BUDGET_S = 60.0
DURATIONS = Path(__file__).with_name("test_durations.json")


def file_times(report: Path) -> dict[str, float]:
    """Seconds per test file (``packages/x/tests/test_y.py``) in a JUnit XML report."""
    times: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        last = max((i for i, p in enumerate(parts) if p.startswith("test")), default=None)
        if last is None:
            continue
        path = "/".join(parts[: last + 1]) + ".py"
        times[path] += float(case.get("time", 0.0))
    return dict(times)


def package_of(path: str) -> str:
    """The distribution a test file belongs to."""
    parts = path.split("/")
    if parts[0] == "packages":
        return parts[1]
    return "icml25-core" if parts[0] == "shared" else "workspace"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="JUnit XML report of the test step")
    parser.add_argument("--write", action="store_true", help=f"update {DURATIONS.name}")
    args = parser.parse_args(argv)
    files = file_times(args.report)
    packages: dict[str, float] = defaultdict(float)
    for path, seconds in files.items():
        packages[package_of(path)] += seconds
    from icml25_core import machine_line

    # the claim tests' figures depend on the CPU's kernels: a failure names the machine
    print(f"machine: {machine_line()}")
    print(f"{'package':<16} {'tests s':>8}  budget {BUDGET_S:.0f} s")
    for name, seconds in sorted(packages.items(), key=lambda kv: -kv[1]):
        flag = "  over" if seconds > BUDGET_S else ""
        print(f"{name:<16} {seconds:8.1f}{flag}")
    print(f"{'all (worker s)':<16} {sum(packages.values()):8.1f}")
    if args.write:
        ordered = dict(sorted(((p, round(s, 1)) for p, s in files.items()), key=lambda kv: -kv[1]))
        DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n")
        print(f"wrote {DURATIONS}")


if __name__ == "__main__":
    main()
