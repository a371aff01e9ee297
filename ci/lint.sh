#!/usr/bin/env bash
# Lint and format check of the whole workspace with the one shared ruff configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
uv run --locked ruff check .
uv run --locked ruff format --check .
