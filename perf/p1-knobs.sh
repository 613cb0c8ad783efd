#!/usr/bin/env bash
# P1's row by hand, with the knobs the bench does not turn (docs/performance.md,
# "Four more tries at P1's chain on 2 cores"): one ingester (`batch`, the
# compactor off), wrk -t1 -c64 with the 1 KiB fixture, RUNS runs of SECS s
# after a warm-up of WARM s (0: none, so the first runs see a fresh journal),
# each printed with its requests/s, the mean of siglake_wal_fsync_seconds over
# it and the journal's files (MiB). Before the runs, optionally:
#   WORKER_NICE=N / ACCEPTOR_NICE=N   renice the writer worker / the acceptor
#   WORKER_CPUS=L / ACCEPTOR_CPUS=L   taskset them to the CPU list L
#   INGEST_FLAGS="..."                extra ingest flags
# The writer worker is taken as the busiest thread other than the main one.
#
#   perf/p1-knobs.sh [CLI=dist/cli.js] [RUNS=3] [SECS=5] [WARM=2]
#   e.g. WORKER_NICE=-10 perf/p1-knobs.sh;  perf/p1-knobs.sh dist/cli.js 14 1 0
set -euo pipefail
CLI=${1:-dist/cli.js}; RUNS=${2:-3}; SECS=${3:-5}; WARM=${4:-2}
HERE=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d /tmp/siglake-p1-knobs-XXXX)
PORT=$((20000 + RANDOM % 20000))
# shellcheck disable=SC2086
SIGLAKE_COMPACTOR=false node "$CLI" ingest --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" \
  --wal-fsync batch --log-level warn ${INGEST_FLAGS:-} > "$D/ingest.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$D"' EXIT
for _ in $(seq 1 150); do curl -s -o /dev/null "127.0.0.1:$PORT/readyz" && break; sleep 0.2; done
BODY=$HERE/native-bench/fixtures/logs-1k.pb
LUA=$HERE/native-bench/wrk-post.lua
rate() { wrk -t1 -c64 -d"$1"s -s "$LUA" "http://127.0.0.1:$PORT/v1/logs" -- "$BODY" 0 | awk '/Requests\/sec/ {printf "%d", $2}'; }
syncs() { curl -s "127.0.0.1:$PORT/metrics" | awk '/^siglake_wal_fsync_seconds_sum/ {s = $2} /^siglake_wal_fsync_seconds_count/ {c = $2} END {printf "%.6f %d", s, c}'; }
# One request makes the worker; the warm-up (or a short one) shows which thread it is.
rate 1 > /dev/null
[ "$WARM" -gt 0 ] && rate "$WARM" > /dev/null
W=$(for t in /proc/$PID/task/*; do tid=${t##*/}; [ "$tid" = "$PID" ] && continue; echo "$(awk '{print $14 + $15}' "$t/stat") $tid"; done | sort -n | tail -1 | cut -d' ' -f2)
[ -n "${WORKER_CPUS:-}" ] && taskset -p -c "$WORKER_CPUS" "$W" > /dev/null
[ -n "${ACCEPTOR_CPUS:-}" ] && taskset -p -c "$ACCEPTOR_CPUS" "$PID" > /dev/null
[ -n "${WORKER_NICE:-}" ] && renice -n "$WORKER_NICE" -p "$W" > /dev/null
[ -n "${ACCEPTOR_NICE:-}" ] && renice -n "$ACCEPTOR_NICE" -p "$PID" > /dev/null
echo "worker nice ${WORKER_NICE:-0} cpus ${WORKER_CPUS:-all}, acceptor nice ${ACCEPTOR_NICE:-0} cpus ${ACCEPTOR_CPUS:-all}, flags: ${INGEST_FLAGS:-none}"
for i in $(seq 1 "$RUNS"); do
  read -r s0 c0 <<< "$(syncs)"
  r=$(rate "$SECS")
  read -r s1 c1 <<< "$(syncs)"
  files=$(find "$D/wal/.journal" -type f -printf '%f:%s\n' 2>/dev/null | sort | awk -F: '{printf "%s:%d ", $1, $2 / 1048576}')
  awk -v i="$i" -v r="$r" -v ds="$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')" -v dc=$((c1 - c0)) -v f="$files" \
    'BEGIN {printf "  run %d: %d req/s, fsync mean %.0f us; journal %s\n", i, r, (dc > 0 ? ds / dc * 1e6 : 0), f}'
done
