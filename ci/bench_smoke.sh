#!/usr/bin/env bash
# Every package's benchmark at smoke size: checks that it runs, times nothing that matters.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for pkg in packages/*/; do
    uv run --locked icml25 bench "$(basename "$pkg")" --smoke --out "$out"
done
