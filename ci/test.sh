#!/usr/bin/env bash
# The README's test command, with the 25 slowest tests listed. pytest's exit code 5 (no test
# collected) fails CI too.
set -euo pipefail
cd "$(dirname "$0")/.."
uv run --locked pytest --durations=25 "$@"
