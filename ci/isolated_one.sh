#!/usr/bin/env bash
# One method package alone (ci/isolated.sh runs these side by side): a fresh venv in WORK
# with only its wheel and the core wheel (plus their PyPI dependencies); import it, run
# `icml25 info` and the README quick start there. Its output is printed in one piece when
# it ends, so that two packages' lines do not interleave.
set -euo pipefail
pkg=$1
work=$2
name=$(basename "$pkg")
mod=${name//-/_}
log="$work/$name.log"
run() {
    core=$(ls dist/icml25_core-*.whl)
    wheel=$(ls dist/"$mod"-*.whl)
    echo "== $name: $(basename "$wheel") alone"
    uv venv --quiet "$work/$name"
    VIRTUAL_ENV="$work/$name" uv pip install --quiet --find-links dist "$core" "$wheel"
    "$work/$name/bin/python" -c "import $mod; print('$mod', $mod.__version__, 'imports alone')"
    "$work/$name/bin/icml25" info "$name"
    start=$SECONDS
    "$work/$name/bin/python" -m icml25_core.testing quick-start "$name" "$work/$name-quick-start" >/dev/null
    echo "$name: README quick start ran in the isolated venv ($((SECONDS - start)) s)"
}
status=0
run > "$log" 2>&1 || status=$?
cat "$log"
if [ "$status" -ne 0 ]; then
    echo "== $name: FAILED (exit $status)"
fi
rm -rf "$work/$name" "$work/$name-quick-start"
exit "$status"
