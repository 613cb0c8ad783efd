#!/usr/bin/env bash
# How long `siglake ingest` (batch mode) takes to admit N new tenants, one
# 1 KiB request each from `siglake loadgen` over 64 connections (the P5
# row's warm-up, docs/performance.md "Stop 53"), for one or more built trees
# one after the other, RUNS times: A B A B ... so that a noisy machine
# weighs on both alike. Each run prints loadgen's rate and latency (ms) and
# the seconds it took.
#
#   native-bench/new-lanes.sh TENANTS RUNS TREE [TREE...]
#   e.g. native-bench/new-lanes.sh 10000 3 /work/main /work/wt-other
#
# Each TREE is a checkout with dist/ built (`npm run build`); loadgen is the
# first tree's.
set -euo pipefail
tenants=$1 runs=$2
shift 2
loadgen=$1/dist/cli.js
one() {
  local tree=$1 dir port pid t0 t1
  dir=$(mktemp -d "${TMPDIR:-/tmp}/siglake-new-lanes-XXXXXX")
  node "$tree/dist/cli.js" ingest --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --wal-dir "$dir/wal" \
    --wal-fsync batch --log-level info --trust-tenant-header --ingest-max-lanes $((2 * tenants)) \
    --wal-max-open-files 512 >"$dir/out.log" 2>&1 &
  pid=$!
  port=
  for _ in $(seq 1 300); do
    port=$(grep '"listening"' "$dir/out.log" | grep -oE '"http":[^,}]*' | grep -oE '[0-9]+$' | head -1 || true)
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$dir/out.log"; exit 1; }
  t0=$(date +%s.%N)
  node "$loadgen" loadgen --target "http://127.0.0.1:$port" --tenants "$tenants" --tenant-prefix t --requests "$tenants" \
    --connections 64 --threads 1 --body-bytes 1024 --bodies 2 --duration 0 --no-progress --quiet --out "$dir/lg.json"
  t1=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" || true
  node -e 'const j = require(process.argv[1]); const l = j.latencyMs; console.log(`  ${j.rates.okPerSec}/s accepted of ${j.totals?.requests ?? "?"}; latency p50 ${l.p50} p99 ${l.p99} max ${l.max}`)' "$dir/lg.json"
  echo "$tree: $tenants new tenants in $(echo "$t1 - $t0" | bc) s"
  rm -rf "$dir"
}
for _ in $(seq 1 "$runs"); do
  for tree in "$@"; do one "$tree"; done
done
