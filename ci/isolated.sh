#!/usr/bin/env bash
# Each method package alone: a fresh venv with only its wheel and the core wheel (plus their
# PyPI dependencies); import it, run `icml25 info` and the README quick start there, so an
# undeclared dependency fails here. Needs ci/build.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
core=$(ls dist/icml25_core-*.whl)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for pkg in packages/*/; do
    name=$(basename "$pkg")
    mod=${name//-/_}
    wheel=$(ls dist/"$mod"-*.whl)
    echo "== $name: $(basename "$wheel") alone"
    uv venv --quiet "$work/$name"
    VIRTUAL_ENV="$work/$name" uv pip install --quiet --find-links dist "$core" "$wheel"
    "$work/$name/bin/python" -c "import $mod; print('$mod', $mod.__version__, 'imports alone')"
    "$work/$name/bin/icml25" info "$name"
    start=$SECONDS
    "$work/$name/bin/python" -m icml25_core.testing quick-start "$name" "$work/$name-quick-start" >/dev/null
    echo "$name: README quick start ran in the isolated venv ($((SECONDS - start)) s)"
done
