#!/bin/bash
# CPU the ingester spends per request at a fixed request rate (utime+stime of
# the process over the measured load, from /proc), with loadgen's latency
# and the checkpoints taken. 1 worker, batch, --wal-max-open-files 512;
# TENANTS lanes are made by a warm-up of one request each first. A rate
# below what the machine sustains makes CPU per request steadier than
# requests/s on a shared machine (docs/performance.md, issue 18 part 2).
#
#   perf/fixed-rate-cpu.sh CLI LABEL TENANTS RATE SECS
#   e.g. perf/fixed-rate-cpu.sh dist/cli.js after 10000 3000 20
#   INGEST_FLAGS="--wal-segment-max-age-secs 0" perf/fixed-rate-cpu.sh ...  (extra ingest flags)
set -euo pipefail
CLI=$1; LABEL=$2; T=$3; RATE=$4; SECS=$5
D=$(mktemp -d /tmp/siglake-cpu-XXXX)
PORT=$((20000 + RANDOM % 20000))
SIGLAKE_COMPACTOR=false node "$CLI" ingest --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" \
  --wal-fsync batch --workers 1 --trust-tenant-header --ingest-max-lanes $((2 * T)) --wal-max-open-files 512 \
  --log-level warn ${INGEST_FLAGS:-} > "$D/ing.log" 2>&1 &
PID=$!
for _ in $(seq 1 150); do curl -s "127.0.0.1:$PORT/readyz" > /dev/null && break; sleep 0.2; done
lg() { node "$CLI" loadgen --target "http://127.0.0.1:$PORT" --tenants "$T" --tenant-prefix t --connections 64 --threads 1 --body-bytes 1024 --bodies 2 --no-progress --quiet "$@"; }
lg --requests "$T" --duration 0 > /dev/null
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
C0=$(cpu); S0=$(curl -s 127.0.0.1:$PORT/metrics | grep -E '^siglake_wal_checkpoints_total' | awk '{print $2}')
lg --rate "$RATE" --duration "$SECS" --out "$D/lg.json" > /dev/null 2>&1 || true
C1=$(cpu); S1=$(curl -s 127.0.0.1:$PORT/metrics | grep -E '^siglake_wal_checkpoints_total' | awk '{print $2}')
kill -TERM $PID; wait $PID || true
node -e "const j=require('$D/lg.json'); const tck=100; const cpuS=($C1-$C0)/tck; console.log('$LABEL', 'achieved', j.rates.requestsPerSec, 'req/s', 'p50', j.latencyMs.p50, 'p99', j.latencyMs.p99, 'ms', 'status', JSON.stringify(j.statusCounts), 'CPU s', cpuS.toFixed(2), 'CPU us/req', (cpuS*1e6/j.totals.requests).toFixed(1), 'checkpoints', ($S1-$S0))"
rm -rf "$D"
