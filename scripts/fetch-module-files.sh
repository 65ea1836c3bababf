#!/usr/bin/env bash
# Fetches files of a Go module (through the Go module proxy, its checksum verified by the Go checksum database)
# and caches them: the CustomResourceDefinitions of operators that tests apply to the test API server, so that
# what Tollgate ships for them is validated against their real schemas (test/k8s/production-example.test.ts:
# CloudNativePG's Cluster; test/k8s/helm-metrics.test.ts: the Prometheus Operator's ServiceMonitor and PodMonitor).
#
#   scripts/fetch-module-files.sh <module>@<version> <directory in the module> <file>...
#
# Fetches unless cached and prints the cache directory holding the files last on stdout. The cache is
# ${TOLLGATE_MODULE_FILES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/module-files}/<module>@<version>/.
set -euo pipefail

log() { printf 'fetch-module-files: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ $# -ge 3 ] || die "usage: scripts/fetch-module-files.sh <module>@<version> <directory in the module> <file>..."
TARGET="$1" SRC_DIR="$2"
shift 2
FILES=("$@")
[[ "$TARGET" =~ ^[a-z0-9.-]+(/[A-Za-z0-9._-]+)+@v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "'$TARGET' is not <module>@v<major>.<minor>.<patch>"
CACHE_ROOT="${TOLLGATE_MODULE_FILES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/module-files}"
dir="$CACHE_ROOT/$TARGET"

cached=1
for f in "${FILES[@]}"; do [ -s "$dir/$f" ] || cached=0; done
if [ "$cached" = 1 ]; then
  log "cached: $dir"
  echo "$dir"
  exit 0
fi
command -v go >/dev/null || die "go is not installed: the files come from a Go module"

# A module cache of its own in a temp dir (writable, so that it can be removed), outside any go.mod.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading $TARGET"
info="$(cd "$tmp" && GOMODCACHE="$tmp/mod" GOFLAGS=-modcacherw GOTOOLCHAIN=local GO111MODULE=on \
  go mod download -json "$TARGET")" || die "go mod download $TARGET failed: $info"
src="$(printf '%s\n' "$info" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')"
[ -n "$src" ] || die "go mod download $TARGET named no directory"
mkdir -p "$dir"
for f in "${FILES[@]}"; do
  [ -s "$src/$SRC_DIR/$f" ] || die "$TARGET has no $SRC_DIR/$f"
  cp "$src/$SRC_DIR/$f" "$dir/$f.tmp"
  mv "$dir/$f.tmp" "$dir/$f"
done
log "cached ${FILES[*]} of $TARGET in $dir"
echo "$dir"
