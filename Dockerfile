# syntax=docker/dockerfile:1
# Siglake: Node 20 on Debian bookworm (glibc 2.36, which the bundled
# uWebSockets.js native binary needs), built in one stage, run in another as a
# non-root user with everything it writes on one volume: the WAL, the SQLite
# catalog and the warehouse (issue 19: with only the WAL there, the catalog
# and warehouse defaults pointed under /app, which the user cannot write).
# One image, every command: `ingest` (the default), `compact`, `query`.
# Checked without a Docker engine by test/integration/docker-image.test.ts.

FROM node:20-bookworm-slim AS build
# node-gyp builds Siglake's native addon (native/: the OTLP walk and the WAL's
# page-cache release) with a C compiler, make and python3; the build fails
# rather than ship an image without it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc g++ make python3 \
 && rm -rf /var/lib/apt/lists/*
ENV SIGLAKE_NATIVE_BUILD=required
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY native ./native
COPY src ./src
COPY proto ./proto
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
RUN groupadd --system --gid 10001 siglake \
 && useradd --system --uid 10001 --gid siglake --home-dir /app --shell /usr/sbin/nologin siglake \
 && mkdir -p /var/lib/siglake/wal \
 && chown -R siglake:siglake /var/lib/siglake
COPY --from=build --chown=siglake:siglake /src/package.json ./
COPY --from=build --chown=siglake:siglake /src/node_modules ./node_modules
COPY --from=build --chown=siglake:siglake /src/dist ./dist
COPY --from=build --chown=siglake:siglake /src/native/build/Release/siglake_native.node ./native/build/Release/siglake_native.node
COPY --from=build --chown=siglake:siglake /src/proto ./proto
USER siglake
ENV SIGLAKE_WAL_DIR=/var/lib/siglake/wal
ENV SIGLAKE_CATALOG_URL=sqlite:/var/lib/siglake/catalog.db
ENV SIGLAKE_WAREHOUSE=/var/lib/siglake/warehouse
ENV SIGLAKE_QUERY_CACHE_DIR=/var/lib/siglake/query-cache
VOLUME ["/var/lib/siglake"]
# 4317 OTLP/gRPC, 4318 OTLP/HTTP and /metrics, /healthz, /readyz;
# 4380 `siglake query` (query.listen)
EXPOSE 4317 4318 4380
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["ingest"]
