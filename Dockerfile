# syntax=docker/dockerfile:1
# ringlimit: one node per container. Multi-stage: build with the dev toolchain (tspc +
# typia transform), run with production dependencies only, as a non-root user, with
# node itself as PID 1 under tini so SIGTERM reaches the service and starts the drain.
#
# Base image: Node 24 LTS on Debian 13 (trixie). The uWebSockets.js build with Node 24's ABI 137
# (upstream v20.57) needs glibc 2.38; Debian 12 has 2.36 (README "Supported Node.js versions",
# docs/node-versions.md). Pinned by tag here; for reproducible builds pin the digest too,
# obtained from the registry on a machine that can reach it:
#   docker buildx imagetools inspect node:24-trixie-slim --format '{{json .Manifest.Digest}}'
#   (or: docker pull node:24-trixie-slim && docker inspect --format '{{index .RepoDigests 0}}' node:24-trixie-slim)
# then build with --build-arg NODE_IMAGE=node:24-trixie-slim@sha256:<digest>.
# No digest is written here: it was not obtainable from the machine this file was made on.
ARG NODE_IMAGE=node:24-trixie-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The client package is a workspace of this repository: npm ci wants its manifest.
COPY packages/client/package.json ./packages/client/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY test ./test
RUN npx tspc -p . && cp -r src/rls/wire/proto dist/src/rls/wire/ && rm -rf dist/test
# The xDS client's .proto files (CONFIG_TYPE=GRPC_XDS_SOTW), next to its compiled code.
RUN cp -r src/policy/xds/proto dist/src/policy/xds/
# `ringlimit --version` names the commit: the build context has no .git, so the commit comes
# in as a build argument (docker build --build-arg GIT_COMMIT=$(git rev-parse --short=12 HEAD)).
ARG GIT_COMMIT=unknown
COPY scripts/write-build-info.mjs ./scripts/
RUN GIT_COMMIT="$GIT_COMMIT" node scripts/write-build-info.mjs

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
RUN npm ci --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
# MALLOC_MMAP_THRESHOLD_: glibc maps each allocation of 128 KiB or more on its own and unmaps it
# when freed. Left to itself, glibc raises that threshold to the largest block freed so far (up
# to 32 MiB): after the state tables' first growth steps each next step came from malloc's arena,
# and the steps freed stayed resident there (docs/operations.md, Memory; 3 nodes, REPLICAS=2:
# the arena grew 310-434 B per key, with the fixed threshold 18-55).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    PEER_PORT=9080 \
    MALLOC_MMAP_THRESHOLD_=131072
# STATE_DIR's usual place, owned by the user the node runs as: a Docker named volume mounted
# there starts as a copy of it, so snapshots are writable without root (docker-compose.yml).
RUN mkdir -p /var/lib/ringlimit && chown node:node /var/lib/ringlimit
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json LICENSE ./
# Envoy Gateway runs the image with command /bin/ratelimit (docs/envoy-gateway.md): it execs
# node on the service, so any user (65534 there) starts it and node receives the signals.
COPY --chmod=0755 deploy/image/ratelimit /bin/ratelimit
USER node
# 8080: POST /limit, /health, /ready, /metrics. 9080: the authenticated peer channel.
# 9100: /metrics, /health, /ready when METRICS_PORT=9100 (the Kubernetes manifests set it).
EXPOSE 8080 9080 9100
# No curl in the image: node itself probes /health, on the plain-HTTP METRICS_PORT when set
# (it answers /health there even when TLS is on), else on PORT.
HEALTHCHECK --interval=10s --timeout=2s --start-period=10s --retries=3 \
  CMD ["node", "-e", "require('http').get({host:'127.0.0.1',port:process.env.METRICS_PORT||process.env.PORT||8080,path:'/health',timeout:1500},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1)).on('timeout',()=>process.exit(1))"]
# tini (PID 1) forwards SIGTERM to node and reaps; node drains and hands its states over.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "dist/src/main.js"]
