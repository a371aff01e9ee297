#!/usr/bin/env bash
# Build every wheel and sdist, then check their metadata and contents.
set -euo pipefail
# twine runs as a separate tool: twine >= 7 (needed for Metadata-Version 2.5, which current
# hatchling writes) requires packaging >= 26.1, and flwr 1.42 caps packaging below 26, so it
# cannot share the workspace environment.
TWINE="twine==7.0.0"
cd "$(dirname "$0")/.."
rm -rf dist
uv build --all-packages --out-dir dist
uv tool run --from "$TWINE" twine check --strict dist/*
uv run --locked check-wheel-contents dist/*.whl
