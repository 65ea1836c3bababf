#!/usr/bin/env bash
# Builds the helm binary that the chart's tests run (test/k8s/helm.test.ts), from the version that the
# Go module test/helm pins, with the machine's Go and the Go module proxy, and caches it. Debian has no
# helm package, and nothing else may be downloaded here, so helm is built from its Go module like the
# test API server (scripts/build-kube.sh).
#
#   scripts/build-helm.sh                  build unless cached; prints the binary's directory last on stdout
#   scripts/build-helm.sh --print-dir      print that directory without building
#   scripts/build-helm.sh pin VERSION      re-pin test/helm, e.g. `pin v3.22.0`: rewrites go.mod and go.sum
#
# The cache directory is $TOLLGATE_HELM_CACHE/<helm release>-<key>/, TOLLGATE_HELM_CACHE defaulting to
# ${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/helm; <key> is a hash of test/helm/go.mod, go.sum and the
# build settings below, so a re-pin builds anew and an unchanged pin builds once per machine.
# TOLLGATE_HELM_BUILD_JOBS sets `go build -p` (default: the number of cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=build-helm
MOD_DIR="$ROOT/test/helm"
MAIN_MODULE=helm.sh/helm/v3
BINARIES=(helm)
# Bump when the build settings change, so that a binary built otherwise is not reused.
BUILD_REV=1
CACHE_ROOT="${TOLLGATE_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/helm}"
BUILD_JOBS="${TOLLGATE_HELM_BUILD_JOBS:-}"
# shellcheck source=lib/cached-go-build.sh
source "$ROOT/scripts/lib/cached-go-build.sh"

pin() {
  local helm="${1:-}"
  [[ "$helm" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "pin: VERSION must be a Helm 3 release like v3.22.0, not '$helm'"
  command -v go >/dev/null || die "go is not installed"
  export GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false"
  local helm_mod
  # `go list -m` of an explicit version fetches only that version's go.mod.
  helm_mod="$(cd "$MOD_DIR" && GOFLAGS= go list -m -f '{{.GoMod}}' "helm.sh/helm/v3@$helm")"
  [ -f "$helm_mod" ] || die "pin: no go.mod for helm.sh/helm/v3@$helm"
  {
    echo "// The Helm client that the chart's tests run: scripts/build-helm.sh builds it."
    echo "// Re-pin with \`scripts/build-helm.sh pin v3.X.Y\`."
    echo "module tollgate.dev/test/helm"
    echo
    # The release's own Go language version (the oldest Go that builds it).
    grep -E '^go ' "$helm_mod"
    echo
    echo "require helm.sh/helm/v3 $helm"
  } >"$MOD_DIR/go.mod.new"
  mv "$MOD_DIR/go.mod.new" "$MOD_DIR/go.mod"
  rm -f "$MOD_DIR/go.sum"
  (cd "$MOD_DIR" && go mod tidy)
  log "pinned helm $helm in $MOD_DIR"
}

compile() {
  local tmp="$1" jobs="$2" helm="$3" t
  local pkg=helm.sh/helm/v3/cmd/helm
  download "$pkg"

  # What `helm version` reports, and the Kubernetes version that `helm template` and `helm lint`
  # assume (.Capabilities.KubeVersion), as Helm's Makefile stamps them: one minor above the
  # client-go it is built with (client-go v0.N is Kubernetes 1.N).
  local client_go major minor
  client_go="$(cd "$MOD_DIR" && go list -m -f '{{.Version}}' k8s.io/client-go)"
  [[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || die "unexpected k8s.io/client-go version '$client_go'"
  major=1 minor="${BASH_REMATCH[1]}"
  local v=helm.sh/helm/v3
  local ldflags="-s -w -X $v/internal/version.version=$helm -X $v/internal/version.metadata="
  ldflags+=" -X $v/internal/version.gitTreeState=clean"
  ldflags+=" -X $v/pkg/lint/rules.k8sVersionMajor=$major -X $v/pkg/lint/rules.k8sVersionMinor=$minor"
  ldflags+=" -X $v/pkg/chartutil.k8sVersionMajor=$major -X $v/pkg/chartutil.k8sVersionMinor=$minor"
  t=$SECONDS
  (cd "$MOD_DIR" && go build -p "$jobs" -trimpath -ldflags="$ldflags" -o "$tmp/helm" "$pkg")
  log "compiled helm in $((SECONDS - t))s"
  "$tmp/helm" version --short >/dev/null || die "the built helm does not run"
  printf 'helm %s\nclient-go %s\n%s\n' "$helm" "$client_go" "$(go env GOVERSION)" >"$tmp/VERSIONS"
}

main "$@"
