#!/usr/bin/env bash
# Install every workspace member and the dev tools exactly as uv.lock pins them.
set -euo pipefail
cd "$(dirname "$0")/.."
uv sync --locked --all-packages
