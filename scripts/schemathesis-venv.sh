#!/usr/bin/env bash
# Installs Schemathesis, the API fuzzer that test/e2e/schemathesis.test.ts runs against `tollgate api`, into a
# Python virtual environment, once per pin: `make test` runs it first, and the test runs it again (cheap when
# installed), so the test also works on its own. Needs python3; on Debian, installs python3-venv when the
# standard library's venv cannot create environments (as root, like `make postgres`).
#
#   scripts/schemathesis-venv.sh     install unless installed at the pin; prints the environment's bin directory last
#
# The environment is $TOLLGATE_SCHEMATHESIS_VENV, defaulting to .cache/venv in the repository (`make clean`
# removes it). A different pin, or a python3 that no longer runs the environment, installs it afresh.
set -euo pipefail

# Bump to move to another release; 4.x is the line whose CLI and checks the test is written for.
SCHEMATHESIS_VERSION=4.32.5

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TOLLGATE_SCHEMATHESIS_VENV:-$ROOT/.cache/venv}"

log() { printf 'schemathesis-venv: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

installed() { [ "$("$VENV/bin/st" --version 2>/dev/null)" = "st, version $SCHEMATHESIS_VERSION" ]; }

if installed; then
  log "schemathesis $SCHEMATHESIS_VERSION installed in $VENV"
  echo "$VENV/bin"
  exit 0
fi

command -v python3 >/dev/null || die "python3 is not installed: the API fuzzing test runs Schemathesis with it"
mkdir -p "$(dirname "$VENV")"
# One installation at a time (make and a test run may both ask).
exec 9>"$VENV.lock"
if command -v flock >/dev/null; then flock 9; fi
if installed; then
  log "schemathesis $SCHEMATHESIS_VERSION was installed meanwhile in $VENV"
  echo "$VENV/bin"
  exit 0
fi

# Debian's python3 leaves venv's pip bootstrap (ensurepip) to the python3-venv package.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing python3-venv"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    die "python3 cannot create virtual environments: install python3-venv"
  fi
fi

started=$SECONDS
log "installing schemathesis $SCHEMATHESIS_VERSION into $VENV with $(python3 --version)"
python3 -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "schemathesis==$SCHEMATHESIS_VERSION" >&2
installed || die "the installed st does not report version $SCHEMATHESIS_VERSION"
log "installed in $((SECONDS - started))s"
echo "$VENV/bin"
