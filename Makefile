# Tollgate. `make` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: help deps postgres kube console build run test bench lint imports docs clean

NPM_STAMP := node_modules/.package-lock.json
SOURCES := $(shell find lib api client controller sidecar worker -name '*.ts' 2>/dev/null) cli.ts tsconfig.json
# Data the code reads at run time, copied beside the compiled modules.
FRAMEWORKS := $(wildcard api/modules/governance/frameworks/*.json)
PRICING := api/modules/public/pricing.json

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

deps: $(NPM_STAMP) ## install the npm dependencies (npm ci) when they are missing or stale

postgres: ## install PostgreSQL 15 (Debian) for the tests when no server is installed and no DATABASE_URL is set
	@if [ -n "$$DATABASE_URL" ] || ls /usr/lib/postgresql/1[5-9]/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null; \
	else echo "install PostgreSQL 15 or newer, or set DATABASE_URL" >&2; exit 1; fi

kube: ## build the kube-apiserver and etcd the tests start (Go; about 8 minutes once per pin, then cached in ~/.cache/tollgate/kube)
	@bash scripts/build-kube.sh >/dev/null

.PHONY: helm
helm: ## build the helm client the chart's tests run (Go; about 6 minutes once per pin, then cached in ~/.cache/tollgate/helm)
	@bash scripts/build-helm.sh >/dev/null

IMAGE ?= tollgate:dev
.PHONY: image
image: ## build the container image IMAGE (default tollgate:dev) from the Dockerfile with docker, podman or buildah
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then set -x; docker build -t $(IMAGE) .; \
	elif command -v podman >/dev/null; then set -x; podman build -t $(IMAGE) .; \
	elif command -v buildah >/dev/null; then set -x; buildah build -t $(IMAGE) .; \
	elif command -v docker >/dev/null; then echo "make image: docker is installed but its daemon does not answer (docker info): start it, or use podman or buildah" >&2; exit 1; \
	else echo "make image: no container builder here: install docker, podman or buildah (or build the Dockerfile elsewhere)" >&2; exit 1; fi

.PHONY: schemathesis
schemathesis: ## install the API fuzzer the tests run (Python venv in .cache/venv; python3-venv from apt-get when missing)
	@bash scripts/schemathesis-venv.sh >/dev/null

.PHONY: pdftools
pdftools: ## install poppler-utils (pdftoppm, pdftotext) and jq for the report and evidence-bundle tests when missing
	@if command -v pdftoppm >/dev/null && command -v pdftotext >/dev/null && command -v jq >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils jq >/dev/null; \
	else echo "install poppler-utils and jq" >&2; exit 1; fi

.PHONY: chromium
chromium: ## install Debian's Chromium for the console's browser tests when missing (or set CHROMIUM_PATH)
	@if [ -n "$$CHROMIUM_PATH" ] || [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "install chromium (Debian's package), or set CHROMIUM_PATH to a Chromium" >&2; exit 1; fi

dist/cli.js: $(NPM_STAMP) $(SOURCES) $(FRAMEWORKS) $(PRICING)
	npx tsc -p tsconfig.json
	npm run --silent build:sidecar
	@mkdir -p dist/api/modules/governance/frameworks && cp $(FRAMEWORKS) dist/api/modules/governance/frameworks/
	@cp $(PRICING) dist/api/modules/public/
	@touch $@

# The web console (console/): typed from docs/openapi.json, so an API change it does not follow fails here.
CONSOLE_SOURCES := $(shell find console -type f -not -name '*.gen.ts' 2>/dev/null)
console/src/api/schema.gen.ts: docs/openapi.json $(NPM_STAMP)
	npx openapi-typescript docs/openapi.json -o $@ >/dev/null

dist/console/index.html: $(NPM_STAMP) console/src/api/schema.gen.ts $(CONSOLE_SOURCES)
	npx tsc -p console/tsconfig.json
	npx vite build --config console/vite.config.ts --logLevel warn

console: dist/console/index.html ## build the web console into dist/console (tollgate api serves it at /)

.PHONY: screenshots
screenshots: build chromium ## save the console's main pages into docs/console/ (a demo organisation on an in-memory database)
	node --import tsx scripts/console-screenshots.ts

build: dist/cli.js dist/console/index.html ## compile TypeScript into dist/, and build the web console

run: build ## start the API on http://127.0.0.1:8080 (embedded database in ./.data, demo organisation, dev sign-in)
	SEED_DEMO=$${SEED_DEMO:-true} node dist/cli.js api

test: build imports postgres kube helm schemathesis pdftools chromium ## run every test (starts a throwaway PostgreSQL unless DATABASE_URL is set, and a Kubernetes API server)
	@mkdir -p .cache
	@rm -f .cache/vitest.json
	@status=0; npx vitest run --reporter=default --reporter=json --outputFile.json=.cache/vitest.json || status=$$?; \
	  node scripts/test-summary.mjs .cache/vitest.json; exit $$status

bench: build postgres kube ## run the benchmarks in bench/
	node --import tsx bench/run.ts

lint: deps imports ## type-check the code, tests and scripts, and check the import rules
	npx tsc -p tsconfig.json --noEmit
	npx tsc -p tsconfig.check.json --noEmit

imports: deps ## check the import rules of .dependency-cruiser.cjs (layers, no cycles; docs/architecture.md)
	npx depcruise --config .dependency-cruiser.cjs --output-type err-long cli.ts lib api client controller sidecar worker scripts bench test console

docs: deps ## regenerate docs/openapi.json, the role matrix of docs/roles.md and the CRDs in crds/
	npx tsx scripts/gen-docs.ts
	npx tsx scripts/gen-crds.ts

clean: ## remove build output, caches and the embedded database
	rm -rf dist .cache .data
