#!/usr/bin/env bash
# Where each thread of the ingester spends CPU under wrk's closed loop, per
# request: `perf record -e cpu-clock` (time on a core only, kernel included)
# over the whole process, then per thread its samples and the syscalls it
# spends them in (inclusive), as µs of CPU per request. 1 KiB bodies,
# `batch`, the compactor off (SIGLAKE_COMPACTOR=true to keep it); with
# TENANTS > 0, wrk rotates X-Scope-OrgID over t0..t<TENANTS-1> as the bench's
# 10,000-tenant row does, after a warm-up of one request to each, with
# --wal-max-open-files 512.
#
#   perf/thread-profile.sh CLI TENANTS [SECS=10]
#   e.g. perf/thread-profile.sh dist/cli.js 0 && perf/thread-profile.sh dist/cli.js 10000
#   INGEST_FLAGS="..." perf/thread-profile.sh ...   (extra ingest flags)
#   BODY=native-bench/fixtures/logs-256k.pb perf/thread-profile.sh ...   (another body, e.g. P2's)
#
# The main thread (tid = pid) is the acceptor; the busiest other one is the
# writer worker; four alike with fdatasync are libuv's pool (the checkpoint's
# and the early writeback's syncs). Needs perf (Debian's linux-perf) and wrk.
# Leaves perf.data in a temporary directory it names.
set -euo pipefail
CLI=$1; T=$2; SECS=${3:-10}; HZ=1999
HERE=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d /tmp/siglake-thread-profile-XXXX)
PORT=$((20000 + RANDOM % 20000))
FLAGS=(ingest --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" --wal-fsync batch --log-level warn)
[ "$T" -gt 0 ] && FLAGS+=(--trust-tenant-header --ingest-max-lanes $((2 * T)) --wal-max-open-files 512)
# shellcheck disable=SC2086
SIGLAKE_COMPACTOR=${SIGLAKE_COMPACTOR:-false} node --perf-basic-prof-only-functions "$CLI" "${FLAGS[@]}" ${INGEST_FLAGS:-} > "$D/ingest.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 150); do curl -s -o /dev/null "127.0.0.1:$PORT/readyz" && break; sleep 0.2; done
BODY=${BODY:-$HERE/native-bench/fixtures/logs-1k.pb}
LUA=$HERE/native-bench/wrk-post.lua
if [ "$T" -gt 0 ]; then
  node "$CLI" loadgen --target "http://127.0.0.1:$PORT" --tenants "$T" --tenant-prefix t --requests "$T" --connections 64 --threads 1 \
    --body-bytes 1024 --bodies 2 --duration 0 --no-progress --quiet > /dev/null
fi
wrk -t1 -c64 -d3s -s "$LUA" "http://127.0.0.1:$PORT/v1/logs" -- "$BODY" "$T" > /dev/null
count() { curl -s "127.0.0.1:$PORT/metrics" | awk '/^siglake_ingest_requests_total/ {s += $2} END {printf "%d", s}'; }
wrk -t1 -c64 -d$((SECS + 2))s -s "$LUA" "http://127.0.0.1:$PORT/v1/logs" -- "$BODY" "$T" > "$D/wrk.txt" &
WRK=$!
sleep 1
cpu() { awk '{print $14 + $15}' /proc/$PID/stat; }
R0=$(count); C0=$(cpu)
perf record -e cpu-clock -F $HZ -g -p $PID -o "$D/perf.data" -- sleep "$SECS" 2> "$D/perf-record.log"
R1=$(count); C1=$(cpu)
wait $WRK
N=$((R1 - R0))
echo "tenants $T: $N requests in the ${SECS} s window ($((N / SECS)) req/s), process CPU $(awk -v c=$((C1 - C0)) -v n="$N" -v t="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", c / t / n * 1e6}') us/req (/proc), load average $(cut -d' ' -f1 /proc/loadavg); perf data in $D"
perf report -i "$D/perf.data" --no-children --sort pid -g none -q -n 2>/dev/null > "$D/threads.txt"
S=$(awk '{s += $2} END {print s}' "$D/threads.txt")
awk -v n="$N" -v hz=$HZ -v pid=$PID '{ split($3, a, ":"); us = $2 / hz / n * 1e6; if (us >= 0.5) printf "  thread %s%s: %.1f us/req\n", a[1], (a[1] == pid ? " (acceptor)" : ""), us }' "$D/threads.txt"
# --children: the first column is the inclusive share of all samples.
perf report -i "$D/perf.data" --children --sort pid,sym -g none -q 2>/dev/null | awk -v n="$N" -v hz=$HZ -v s="$S" '
  $NF ~ /^__x64_sys_/ { us = ($1 + 0) / 100 * s / hz / n * 1e6; split($3, a, ":"); if (us >= 0.2) printf "    thread %s %-14s %.1f us/req\n", a[1], substr($NF, 11), us }'
kill -TERM $PID; wait $PID || true
trap - EXIT
rm -rf "$D/wal"
