# syntax=docker/dockerfile:1
# Siglake ingester: Node 20 on Debian bookworm (glibc 2.36, which the bundled
# uWebSockets.js native binary needs), built in one stage, run in another as a
# non-root user with the WAL on a volume.

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
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
COPY --from=build --chown=siglake:siglake /src/proto ./proto
USER siglake
ENV SIGLAKE_WAL_DIR=/var/lib/siglake/wal
VOLUME ["/var/lib/siglake"]
# 4317 OTLP/gRPC, 4318 OTLP/HTTP and /metrics, /healthz, /readyz
EXPOSE 4317 4318
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["ingest"]
