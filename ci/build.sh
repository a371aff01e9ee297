#!/usr/bin/env bash
# Build every wheel and sdist, then check their metadata and contents.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf dist
uv build --all-packages --out-dir dist
uv run --locked twine check --strict dist/*
uv run --locked check-wheel-contents dist/*.whl
