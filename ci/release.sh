#!/usr/bin/env bash
# Build and check one package's wheel and sdist for release: ci/release.sh <dist>.
# Refuses a version that already has a `<dist>==<version>` tag; tags nothing itself.
set -euo pipefail
# twine runs as a separate tool: twine >= 7 (needed for Metadata-Version 2.5, which current
# hatchling writes) requires packaging >= 26.1, and flwr 1.42 caps packaging below 26, so it
# cannot share the workspace environment.
TWINE="twine==7.0.0"
cd "$(dirname "$0")/.."
dist=${1:?usage: ci/release.sh <dist>   (e.g. gsb-sinkhorn or icml25-core)}
if [ "$dist" = icml25-core ]; then dir=shared; else dir=packages/$dist; fi
[ -f "$dir/pyproject.toml" ] || { echo "no distribution called $dist (looked in $dir)" >&2; exit 2; }
version=$(uv run --locked python -c "import tomllib,sys; print(tomllib.load(open(sys.argv[1],'rb'))['project']['version'])" "$dir/pyproject.toml")
tag="$dist==$version"
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    echo "tag $tag exists already: bump the version in $dir/pyproject.toml and CHANGELOG.md" >&2
    exit 1
fi
grep -q "\[$version\]" "$dir/CHANGELOG.md" 2>/dev/null || { echo "$dir/CHANGELOG.md has no entry for $version" >&2; exit 1; }
out="dist/release/$dist-$version"
rm -rf "$out"
uv build --package "$dist" --out-dir "$out"
uv tool run --from "$TWINE" twine check --strict "$out"/*
uv run --locked check-wheel-contents "$out"/*.whl
echo "built $tag into $out; after review: git tag '$tag' && uv publish $out/*"
