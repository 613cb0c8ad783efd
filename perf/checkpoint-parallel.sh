#!/usr/bin/env bash
# The 10,000-tenant row (P5's load: wrk, 64 connections, 1 KiB bodies,
# `batch`, --wal-max-open-files 512, the compactor off) with the checkpoint's
# lane fdatasyncs kept in flight N at a time (SIGLAKE_TEST_CHECKPOINT_PARALLEL,
# a test hook), the settings taking turns ROUNDS times so that drift on a
# shared machine falls on all of them. Per window: requests/s, process CPU per
# request (/proc), wrk's p99, the request path's fdatasync mean
# (siglake_wal_fsync_seconds), and the checkpoints done and the time they took
# (siglake_wal_checkpoints_total, siglake_wal_checkpoint_seconds_total).
#
#   perf/checkpoint-parallel.sh CLI "N1 N2 ..." [TENANTS=10000] [SECS=20] [ROUNDS=2]
#   e.g. perf/checkpoint-parallel.sh dist/cli.js "16 4 2 1"
set -euo pipefail
CLI=$1; SETTINGS=$2; T=${3:-10000}; SECS=${4:-20}; ROUNDS=${5:-2}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BODY=$HERE/native-bench/fixtures/logs-1k.pb
LUA=$HERE/native-bench/wrk-post.lua
[ -f "$BODY" ] || node "$HERE/native-bench/make-fixtures.mjs" > /dev/null
metric() { curl -s "127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {printf "%.6f", s}'; }
window() {
  local n=$1 D PID
  D=$(mktemp -d /tmp/siglake-ckpt-par-XXXX)
  PORT=$((20000 + RANDOM % 20000))
  SIGLAKE_TEST_HOOKS=1 SIGLAKE_TEST_CHECKPOINT_PARALLEL=$n SIGLAKE_COMPACTOR=false node "$CLI" ingest \
    --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" --wal-fsync batch \
    --trust-tenant-header --ingest-max-lanes $((2 * T)) --wal-max-open-files 512 --log-level warn > "$D/ingest.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 150); do curl -s -o /dev/null "127.0.0.1:$PORT/readyz" && break; sleep 0.2; done
  node "$CLI" loadgen --target "http://127.0.0.1:$PORT" --tenants "$T" --tenant-prefix t --requests "$T" --connections 64 --threads 1 \
    --body-bytes 1024 --bodies 2 --duration 0 --no-progress --quiet > /dev/null
  wrk -t1 -c64 -d3s -s "$LUA" "http://127.0.0.1:$PORT/v1/logs" -- "$BODY" "$T" > /dev/null
  local R0 C0 K0 KS0 F0 FS0 R1 C1 K1 KS1 F1 FS1
  R0=$(metric siglake_ingest_requests_total); C0=$(awk '{print $14 + $15}' /proc/$PID/stat)
  K0=$(metric siglake_wal_checkpoints_total); KS0=$(metric siglake_wal_checkpoint_seconds_total)
  F0=$(metric siglake_wal_fsync_seconds_count); FS0=$(metric siglake_wal_fsync_seconds_sum)
  wrk -t1 -c64 -d"${SECS}"s --latency -s "$LUA" "http://127.0.0.1:$PORT/v1/logs" -- "$BODY" "$T" > "$D/wrk.txt"
  R1=$(metric siglake_ingest_requests_total); C1=$(awk '{print $14 + $15}' /proc/$PID/stat)
  K1=$(metric siglake_wal_checkpoints_total); KS1=$(metric siglake_wal_checkpoint_seconds_total)
  F1=$(metric siglake_wal_fsync_seconds_count); FS1=$(metric siglake_wal_fsync_seconds_sum)
  kill -TERM $PID; wait $PID || true
  awk -v n="$n" -v r="$(echo "$R1 - $R0" | bc)" -v c="$((C1 - C0))" -v tck="$(getconf CLK_TCK)" -v secs="$SECS" \
    -v k="$(echo "$K1 - $K0" | bc)" -v ks="$(echo "$KS1 - $KS0" | bc)" -v f="$(echo "$F1 - $F0" | bc)" -v fs="$(echo "$FS1 - $FS0" | bc)" \
    -v p99="$(awk '$1 == "99%" {print $2}' "$D/wrk.txt")" \
    'BEGIN { printf "parallel %2d: %7.0f req/s, %6.1f us/req CPU, p99 %s, fdatasync mean %.2f ms, %d checkpoints taking %.1f s\n", n, r / secs, c / tck / r * 1e6, p99, (f > 0 ? fs / f * 1e3 : 0), k, ks }'
  rm -rf "$D"
}
read -r -a NS <<< "$SETTINGS"
for ((round = 0; round < ROUNDS; round++)); do
  if ((round % 2 == 0)); then order=("${NS[@]}"); else order=(); for ((i = ${#NS[@]} - 1; i >= 0; i--)); do order+=("${NS[i]}"); done; fi
  for n in "${order[@]}"; do window "$n"; done
done
