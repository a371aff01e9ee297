#!/usr/bin/env bash
# The README's test command, with the 25 slowest tests listed and every package's test time
# against its ~60 s budget (ci/test_times.py, from a JUnit report). pytest's exit code 5 (no
# test collected) fails CI too.
set -euo pipefail
cd "$(dirname "$0")/.."
report=${TEST_REPORT:-$(mktemp --suffix=.xml)}
uv run --locked pytest --durations=25 --junitxml="$report" "$@"
uv run --locked python ci/test_times.py "$report"
