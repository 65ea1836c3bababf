#!/usr/bin/env bash
# Fetches the CloudNativePG `Cluster` CustomResourceDefinition (config/crd/bases/postgresql.cnpg.io_clusters.yaml of
# the operator's Go module, through the Go module proxy, its checksum verified by the Go checksum database) and
# caches it, for test/k8s/production-example.test.ts, which applies it to the test API server so that
# examples/production/database/ is validated against the real schema.
#
#   scripts/fetch-cnpg-crd.sh     fetch unless cached; prints the CRD file's path last on stdout
#
# CNPG_VERSION picks the operator release (default below); the cache is $TOLLGATE_CNPG_CACHE/<version>/,
# TOLLGATE_CNPG_CACHE defaulting to ${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/cnpg.
set -euo pipefail

VERSION="${CNPG_VERSION:-v1.27.0}"
MODULE=github.com/cloudnative-pg/cloudnative-pg
FILE=config/crd/bases/postgresql.cnpg.io_clusters.yaml
CACHE_ROOT="${TOLLGATE_CNPG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/cnpg}"

log() { printf 'fetch-cnpg-crd: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CNPG_VERSION must be a release like v1.27.0, not '$VERSION'"
dir="$CACHE_ROOT/$VERSION"
crd="$dir/$(basename "$FILE")"
if [ -s "$crd" ]; then
  log "cached: $crd"
  echo "$crd"
  exit 0
fi
command -v go >/dev/null || die "go is not installed: the CRD comes from the operator's Go module"

# A module cache of its own in a temp dir (writable, so that it can be removed), outside any go.mod.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading $MODULE@$VERSION"
info="$(cd "$tmp" && GOMODCACHE="$tmp/mod" GOFLAGS=-modcacherw GOTOOLCHAIN=local GO111MODULE=on \
  go mod download -json "$MODULE@$VERSION")" || die "go mod download $MODULE@$VERSION failed: $info"
src="$(printf '%s\n' "$info" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')"
[ -n "$src" ] && [ -s "$src/$FILE" ] || die "$MODULE@$VERSION has no $FILE"
mkdir -p "$dir"
cp "$src/$FILE" "$crd.tmp"
mv "$crd.tmp" "$crd"
log "cached $FILE of $MODULE@$VERSION in $dir"
echo "$crd"
