#!/usr/bin/env bash
# The gRPC port alone under h2load, as the bench's P3 row loads it (64
# connections x 10 streams, the 1 KiB OTLP logs fixture), for comparing builds
# (a worktree's or a patched copy's dist/cli.js) run by run: requests/s and the
# process's CPU per request from /proc. PERF=1 also records a perf profile of
# the window (perf-basic-prof symbols) and leaves it in the directory printed.
#
#   perf/grpc-rate.sh CLI [SECS=8] [MODE=batch]
#   BODY=native-bench/fixtures/logs-256k.grpc perf/grpc-rate.sh ...   (another body)
#   e.g. for i in 1 2 3; do for c in /tmp/before/dist/cli.js dist/cli.js; do perf/grpc-rate.sh $c; done; done
set -euo pipefail
CLI=$1; SECS=${2:-8}; MODE=${3:-batch}
HERE=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d /tmp/siglake-grpc-rate-XXXX)
GP=$((20000 + RANDOM % 20000)); HP=$((GP + 1))
SIGLAKE_COMPACTOR=${SIGLAKE_COMPACTOR:-false} node --perf-basic-prof-only-functions "$CLI" ingest --http-listen 127.0.0.1:$HP --grpc-listen 127.0.0.1:$GP \
  --wal-dir "$D/wal" --wal-fsync "$MODE" --log-level ${LOG_LEVEL:-warn} > "$D/ingest.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 150); do curl -s -o /dev/null "127.0.0.1:$HP/readyz" && break; sleep 0.2; done
URL=http://127.0.0.1:$GP/opentelemetry.proto.collector.logs.v1.LogsService/Export
LOAD=(h2load -c 64 -m 10 -t 1 -d "${BODY:-$HERE/native-bench/fixtures/logs-1k.grpc}" -H 'content-type: application/grpc' -H 'te: trailers')
"${LOAD[@]}" -D 3 "$URL" > /dev/null
"${LOAD[@]}" -D $((SECS + 2)) "$URL" > "$D/h2load.txt" &
H=$!
sleep 1
cpu() { awk '{print $14 + $15}' /proc/$PID/stat; }
C0=$(cpu)
if [ "${PERF:-0}" = 1 ]; then perf record -e cpu-clock -F 1999 -g -p $PID -o "$D/perf.data" -- sleep "$SECS" 2> /dev/null; else sleep "$SECS"; fi
C1=$(cpu)
wait $H
RPS=$(awk '/finished in/ {print $4}' "$D/h2load.txt")
echo "$CLI ($MODE): $RPS req/s; process CPU $(awk -v c=$((C1 - C0)) -v s="$SECS" -v r="$RPS" -v t="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", c / t / s / r * 1e6}') us/req; $(grep -o '[0-9]* failed, [0-9]* errored' "$D/h2load.txt"); dir $D"
kill -TERM $PID; wait $PID || true
trap - EXIT
rm -rf "$D/wal"  # the ingester log stays in $D
