# Sourced by scripts/build-kube.sh and scripts/build-helm.sh: what they share to build Go binaries from a
# pinned module of test/ with the machine's Go, once per machine, into a cache directory.
#
# The sourcing script sets, before sourcing:
#   NAME         the log prefix (build-kube)
#   MOD_DIR      the Go module that pins the versions (test/k8s)
#   MAIN_MODULE  the module whose version names the cache directory (k8s.io/kubernetes)
#   BINARIES     the files a complete build holds (kube-apiserver etcd)
#   BUILD_REV    bumped when the build settings change, so that binaries built otherwise are not reused
#   CACHE_ROOT   the directory of the caches (…/tollgate/kube)
#   BUILD_JOBS   `go build -p` (default: the number of cores)
# and defines `pin ARGS...` (rewrite MOD_DIR's go.mod and go.sum) and `compile DIR JOBS VERSION` (build
# BINARIES into DIR and write DIR/VERSIONS). Then it calls `main "$@"`.

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() { log "$*"; exit 1; }

# Version of a module required by MOD_DIR/go.mod.
required() {
  local mod="${1//./\\.}"
  sed -nE "s#^(require[[:space:]]+)?[[:space:]]*${mod}[[:space:]]+(v[^[:space:]]+).*#\\2#p" "$MOD_DIR/go.mod" | head -n1
}

# CACHE_ROOT/<version>-<hash of BUILD_REV, go.mod and go.sum>: a re-pin builds anew, an unchanged pin once.
cache_dir() {
  local version key
  version="$(required "$MAIN_MODULE")"
  [ -n "$version" ] || die "no $MAIN_MODULE requirement in $MOD_DIR/go.mod"
  key="$( { echo "rev $BUILD_REV"; cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; } | sha256sum | cut -c1-12)"
  echo "$CACHE_ROOT/$version-$key"
}

complete() {
  local bin
  for bin in "${BINARIES[@]}"; do [ -x "$1/$bin" ] || return 1; done
}

# Builds unless cached, one build at a time per cache directory (make and a test run may both ask), into
# a temporary directory renamed into place when complete; prints the directory last on stdout.
build() {
  local dir version
  dir="$(cache_dir)"
  version="$(required "$MAIN_MODULE")"
  if complete "$dir"; then
    log "${BINARIES[*]} ($MAIN_MODULE $version) cached in $dir"
    echo "$dir"
    return
  fi
  command -v go >/dev/null || die "go is not installed: the tests build ${BINARIES[*]} with it"
  mkdir -p "$(dirname "$dir")"
  exec 9>"$dir.lock"
  if command -v flock >/dev/null; then flock 9; fi
  if complete "$dir"; then
    log "${BINARIES[*]} ($MAIN_MODULE $version) were built meanwhile in $dir"
    echo "$dir"
    return
  fi

  # The machine's Go, never a downloaded toolchain; go.sum is complete, so -mod=readonly. Static
  # binaries, as the releases build them (CGO_ENABLED=0).
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
  local jobs="${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
  local started=$SECONDS
  log "building ${BINARIES[*]} ($MAIN_MODULE $version) with $(go env GOVERSION), -p $jobs, into $dir"
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  trap "rm -rf '$tmp'" EXIT
  compile "$tmp" "$jobs" "$version"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
  log "built ${BINARIES[*]} in $((SECONDS - started))s: $dir ($(du -sh "$dir" | cut -f1))"
  echo "$dir"
}

# Downloads the modules the packages need, timing it apart from the compilation.
download() {
  local t=$SECONDS
  (cd "$MOD_DIR" && go list -deps "$@" >/dev/null)
  log "downloaded the modules in $((SECONDS - t))s (module cache $(go env GOMODCACHE))"
}

main() {
  case "${1:-}" in
    "") build ;;
    --print-dir) cache_dir ;;
    pin) shift; pin "$@" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
}
