# The one Tollgate image: every command (`api`, `migrate`, `worker`, `controller`, `sidecar`) from one
# ENTRYPOINT, as the Helm chart runs it (docs/helm.md). Build it with `make image` (docker, podman or buildah).
#
# The base is pinned by digest (the multi-arch index), so a rebuild gets the same operating system and Node.js
# until the pin is moved on purpose. To refresh it, resolve the tag's current index digest and replace it in
# both FROM lines (they must stay equal; test/e2e/image.test.ts checks it):
#   docker buildx imagetools inspect node:20-bookworm-slim --format '{{json .Manifest.Digest}}'
#   (or: skopeo inspect --raw docker://node:20-bookworm-slim | sha256sum)

# -- Build: the dev dependencies (TypeScript, Vite) compile the sources and the web console into dist/, with the data files the code reads
# at run time copied beside the compiled modules (package.json's `build` script, the Makefile's dist/cli.js rule).
FROM node:20-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0 AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json cli.ts ./
COPY lib ./lib
COPY api ./api
COPY client ./client
COPY controller ./controller
COPY sidecar ./sidecar
COPY worker ./worker
# The web console, typed from the OpenAPI document and built into dist/console (served by `tollgate api` at /).
COPY docs/openapi.json ./docs/openapi.json
COPY console ./console
RUN npm run build

# -- Runtime: production dependencies only, installed from the lockfile here rather than copied from the build
# stage, so that nothing of the dev tree (tsx, vitest, typescript) can reach the image. No package has an install
# script that production needs (only esbuild, a dev dependency, has one), hence --ignore-scripts. npm itself is
# removed afterwards: nothing runs it in the container.
FROM node:20-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0 AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="tollgate" \
      org.opencontainers.image.description="Tollgate: a Kubernetes-native governance control plane for AI agents (api, migrate, worker, controller, sidecar)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="UNLICENSED" \
      org.opencontainers.image.base.name="node:20-bookworm-slim"
# HOST: a container's loopback is unreachable from outside it (the sidecar keeps to loopback by its own setting).
# DATA_DIR and HOME under /tmp: with a read-only root filesystem /tmp is the one writable place (an emptyDir in
# the chart); the embedded database there is for trying the image out and is gone with the container.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    DATA_DIR=/tmp/tollgate/data \
    HOME=/tmp
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack
COPY --from=build /src/dist ./dist
# A named user for the uid the chart runs as (podSecurityContext.runAsUser 65532): os.userInfo() needs a
# passwd entry. The application files stay root's, read-only to it.
RUN groupadd --system --gid 65532 tollgate \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin tollgate
USER 65532:65532
# No HEALTHCHECK: each command serves its own probes on its own port (/healthz, /readyz), which Kubernetes calls.
# Node runs as PID 1 without an init: the CLI handles SIGTERM and SIGINT itself and starts no child processes.
ENTRYPOINT ["node", "/app/dist/cli.js"]
CMD ["help"]
