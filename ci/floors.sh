#!/usr/bin/env bash
# Are a package's declared floors honest? ci/floors.sh PKG [PYTEST ARGS...]
#
# Builds the package's wheel and the core's, installs them into a fresh venv with every
# dependency the package declares resolved to its LOWEST allowed version (its declared
# requirements are passed as direct requirements, so `--resolution lowest-direct` applies
# to them; their own dependencies resolve to the highest compatible versions), adds the
# package's dev group (test tools, peers) at the highest versions that fit, and runs the
# package's tests against the installed wheel. Slow (downloads old wheels): not part of
# .ci/run; run it once per package after changing a floor.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=${1:?usage: ci/floors.sh <dist> [pytest args]}
shift
dir=packages/$pkg
[ -f "$dir/pyproject.toml" ] || { echo "no package called $pkg (looked in $dir)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
uv build --quiet --package icml25-core --out-dir "$work/dist"
uv build --quiet --package "$pkg" --out-dir "$work/dist"
uv run --no-project python - "$dir/pyproject.toml" "$work/direct.txt" "$work/dev.txt" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))
deps = [d for d in project["project"]["dependencies"] if not d.startswith("icml25-core")]
open(sys.argv[2], "w").write("\n".join(deps) + "\n")
dev = project.get("dependency-groups", {}).get("dev", [])
open(sys.argv[3], "w").write("\n".join(d for d in dev if isinstance(d, str)) + "\n")
PY
echo "== $pkg: lowest allowed versions of"
sed 's/^/   /' "$work/direct.txt"
uv venv --quiet --python 3.11 "$work/venv"
export VIRTUAL_ENV="$work/venv"
core=$(ls "$work"/dist/icml25_core-*.whl)
wheel=$(ls "$work"/dist/"${pkg//-/_}"-*.whl)
uv pip install --quiet --resolution lowest-direct --find-links "$work/dist" \
    -r "$work/direct.txt" "$core" "$wheel"
# the dev group may not move a floored package: pin what is installed. pytest-xdist: the
# workspace's pytest settings (root pyproject.toml) spread tests over the cores
uv pip freeze >"$work/installed.txt"
echo "pytest-xdist>=3.6" >>"$work/dev.txt"
if ! uv pip install --quiet --find-links "$work/dist" -r "$work/dev.txt" -c "$work/installed.txt"; then
    # a peer may need newer versions than the floors (llmcompressor and transformers 5.0)
    echo "== the dev group does not fit the floors: pytest alone (tests of peers will fail)"
    uv pip install --quiet pytest "pytest-xdist>=3.6" -c "$work/installed.txt"
fi
echo "== installed:"
uv pip freeze | grep -i -E "^($(sed -E 's/[<>=!~;\[ ].*//' "$work/direct.txt" | paste -sd '|'))==" | sed 's/^/   /'
"$work/venv/bin/python" -m pytest -p no:cacheprovider -q "$dir/tests" "$@"
