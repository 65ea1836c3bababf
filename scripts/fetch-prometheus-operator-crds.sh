#!/usr/bin/env bash
# Fetches the Prometheus Operator's ServiceMonitor and PodMonitor CustomResourceDefinitions
# (example/prometheus-operator-crd/ of the operator's Go module, through the Go module proxy, its checksum
# verified by the Go checksum database) and caches them, for test/k8s/helm-metrics.test.ts, which applies them
# to the test API server so that the chart's monitors are validated against the real schema.
#
#   scripts/fetch-prometheus-operator-crds.sh     fetch unless cached; prints the CRDs' directory last on stdout
#
# PROMETHEUS_OPERATOR_VERSION picks the operator release (default below); the cache is
# $TOLLGATE_PROMETHEUS_OPERATOR_CACHE/<version>/, defaulting to ${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/prometheus-operator.
set -euo pipefail

VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
MODULE=github.com/prometheus-operator/prometheus-operator
SRC_DIR=example/prometheus-operator-crd
FILES=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_podmonitors.yaml)
CACHE_ROOT="${TOLLGATE_PROMETHEUS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/prometheus-operator}"

log() { printf 'fetch-prometheus-operator-crds: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "PROMETHEUS_OPERATOR_VERSION must be a release like v0.85.0, not '$VERSION'"
dir="$CACHE_ROOT/$VERSION"
cached=1
for f in "${FILES[@]}"; do [ -s "$dir/$f" ] || cached=0; done
if [ "$cached" = 1 ]; then
  log "cached: $dir"
  echo "$dir"
  exit 0
fi
command -v go >/dev/null || die "go is not installed: the CRDs come from the operator's Go module"

# A module cache of its own in a temp dir (writable, so that it can be removed), outside any go.mod.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading $MODULE@$VERSION"
info="$(cd "$tmp" && GOMODCACHE="$tmp/mod" GOFLAGS=-modcacherw GOTOOLCHAIN=local GO111MODULE=on \
  go mod download -json "$MODULE@$VERSION")" || die "go mod download $MODULE@$VERSION failed: $info"
src="$(printf '%s\n' "$info" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')"
[ -n "$src" ] || die "go mod download $MODULE@$VERSION named no directory"
mkdir -p "$dir"
for f in "${FILES[@]}"; do
  [ -s "$src/$SRC_DIR/$f" ] || die "$MODULE@$VERSION has no $SRC_DIR/$f"
  cp "$src/$SRC_DIR/$f" "$dir/$f.tmp"
  mv "$dir/$f.tmp" "$dir/$f"
done
log "cached ${FILES[*]} of $MODULE@$VERSION in $dir"
echo "$dir"
