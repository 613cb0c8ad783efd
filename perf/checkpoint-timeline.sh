#!/usr/bin/env bash
# Requests/s second by second beside the checkpoints, after TENANTS lanes are
# made (P5's load: wrk, 64 connections, 1 KiB bodies, `batch`,
# --wal-max-open-files 512, the compactor off): the first checkpoint after the
# lanes' creation syncs every new segment and lane directory, the later ones
# only the segments written since. Prints, once a second, the requests
# answered since the last line (a second and the scrapes), siglake_wal_checkpoints_total and
# siglake_wal_checkpoint_seconds_total (time from the ingester's start).
#
#   perf/checkpoint-timeline.sh CLI [TENANTS=10000] [SECS=40]
#   e.g. perf/checkpoint-timeline.sh dist/cli.js
set -euo pipefail
CLI=$1; T=${2:-10000}; SECS=${3:-40}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BODY=$HERE/native-bench/fixtures/logs-1k.pb
[ -f "$BODY" ] || node "$HERE/native-bench/make-fixtures.mjs" > /dev/null
D=$(mktemp -d /tmp/siglake-ckpt-tl-XXXX)
PORT=$((20000 + RANDOM % 20000))
SIGLAKE_COMPACTOR=false node "$CLI" ingest --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" --wal-fsync batch \
  --trust-tenant-header --ingest-max-lanes $((2 * T)) --wal-max-open-files 512 --log-level warn > "$D/ingest.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true; rm -rf "$D"' EXIT
for _ in $(seq 1 150); do curl -s -o /dev/null "127.0.0.1:$PORT/readyz" && break; sleep 0.2; done
metric() { curl -s "127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {printf "%.2f", s}'; }
since() { echo "$(date +%s.%N) - $T0" | bc; }
T0=$(date +%s.%N)
node "$CLI" loadgen --target "http://127.0.0.1:$PORT" --tenants "$T" --tenant-prefix t --requests "$T" --connections 64 --threads 1 \
  --body-bytes 1024 --bodies 2 --duration 0 --no-progress --quiet > /dev/null
printf "%5.1f s: warm-up done (one request to each of %d tenants); checkpoints %s (%s s)\n" "$(since)" "$T" "$(metric siglake_wal_checkpoints_total)" "$(metric siglake_wal_checkpoint_seconds_total)"
wrk -t1 -c64 -d"${SECS}"s -s "$HERE/native-bench/wrk-post.lua" "http://127.0.0.1:$PORT/v1/logs" -- "$BODY" "$T" > /dev/null &
W=$!
R0=$(metric siglake_ingest_requests_total)
for _ in $(seq 1 "$SECS"); do
  sleep 1
  R=$(metric siglake_ingest_requests_total)
  printf "%5.1f s: %6.0f requests since the last line, checkpoints %s (%s s)\n" "$(since)" "$(echo "$R - $R0" | bc)" "$(metric siglake_wal_checkpoints_total)" "$(metric siglake_wal_checkpoint_seconds_total)"
  R0=$R
done
wait $W
