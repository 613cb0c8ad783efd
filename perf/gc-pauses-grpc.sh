#!/bin/bash
# gc-pauses.sh's twin for the gRPC port: the ingester runs with
# --trace-gc-nvp, a saturating h2load burst (P3's load: 64 connections x 10
# streams, the 1 KiB OTLP logs fixture) writes the WAL first, then h2load
# holds a fixed rate (--rps is per connection: RATE / 64 each, after a 2 s
# warm-up); the main isolate's scavenges from the start of the fixed rate are
# summed the same way: count, mean and largest pause, and the bytes each one
# kept (survived: the mean and the median, since a stalled second on a busy
# machine keeps many calls in flight, rightly) and promoted. Latency is
# h2load's per-request log (--log-file: p50, p99, max of the measured window).
# h2load's connections send in step (one call each per 1/rps tick), so the
# latencies include a burst of 64 calls queueing at each tick. `refused` is
# what siglake answered with a status other than OK (gRPC refusals are HTTP
# 200 to h2load), from /metrics (docs/performance.md, "Stop 51").
#
#   perf/gc-pauses-grpc.sh CLI LABEL RATE [BURST_SECS] [SECS]
#   e.g. perf/gc-pauses-grpc.sh dist/cli.js after 2560 8 15
#   BODY=native-bench/fixtures/traces-1k.grpc SVC=trace.v1.TraceService perf/gc-pauses-grpc.sh ...
set -euo pipefail
CLI=$(realpath "$1"); LABEL=$2; RATE=$3; BURST=${4:-8}; SECS=${5:-10}
CONNS=64
HERE=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d /tmp/siglake-gc-grpc-XXXX)
GP=$((20000 + RANDOM % 20000)); HP=$((GP + 1))
node --trace-gc-nvp "$CLI" ingest --http-listen 127.0.0.1:$HP --grpc-listen 127.0.0.1:$GP --wal-dir "$D/wal" \
  --wal-fsync batch --log-level warn > "$D/gc.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 150); do curl -s -o /dev/null "127.0.0.1:$HP/readyz" && break; sleep 0.2; done
URL=http://127.0.0.1:$GP/opentelemetry.proto.collector.${SVC:-logs.v1.LogsService}/Export
LOAD=(h2load -c $CONNS -m 10 -t 1 -d "${BODY:-$HERE/native-bench/fixtures/logs-1k.grpc}" -H 'content-type: application/grpc' -H 'te: trailers')
if [ "$BURST" -gt 0 ]; then "${LOAD[@]}" -D "$BURST" "$URL" > /dev/null; fi
# Scavenges are counted from here on (the log's own clock is ms since the isolate started).
START_MS=$(( ($(date +%s%N) - $(stat -c %Y /proc/$PID)000000000) / 1000000 ))
"${LOAD[@]}" --rps $(( (RATE + CONNS - 1) / CONNS )) --warm-up-time 2 -D "$SECS" --log-file="$D/req.log" "$URL" > "$D/h2load.txt"
REFUSED=$(curl -s "127.0.0.1:$HP/metrics" | awk '/^siglake_ingest_requests_total\{/ && !/status="(200|499)"/ {n += $NF} END {print n + 0}')
kill -TERM $PID; wait $PID || true
trap - EXIT
# The main isolate is the first one to log a scavenge (the workers start after it).
MAIN=$(grep -m1 -oE '^\[[0-9]+:0x[0-9a-f]+\]' "$D/gc.log")
# One line a scavenge (kept KB, promoted KB, pause ms), then the sums; the median of what a
# scavenge kept too: a stalled second on a busy machine keeps many calls in flight, legitimately.
SUM=$(grep -F "$MAIN" "$D/gc.log" | awk -v T0="$START_MS" '/gc=s / {
  match($0, /\] *[0-9]+ ms/); t = substr($0, RSTART + 1, RLENGTH - 4) + 0; if (t < T0) next
  delete v; n2 = split($0, a, " "); for (i = 1; i <= n2; i++) { split(a[i], kv, "="); v[kv[1]] = kv[2] }
  printf "%.3f %.3f %s\n", v["new_space_survived"] / 1024, v["promoted"] / 1024, v["pause"] }' | sort -n | awk '{
  n++; k[n] = $1; s += $1; pr += $2; p += $3; if ($3 + 0 > mx) mx = $3 + 0 }
  END { if (n == 0) { print "no scavenges"; exit } printf "scavenges %d, pause mean %.2f ms max %.2f ms, kept %.0f KB (median %.0f) and promoted %.0f KB each", n, p / n, mx, s / n, k[int((n + 1) / 2)], pr / n }')
RPS=$(awk '/finished in/ {print $4}' "$D/h2load.txt")
FAILED=$(grep -oE '[0-9]+ failed, [0-9]+ errored, [0-9]+ timeout' "$D/h2load.txt")
LAT=$(awk -F '\t' 'NF >= 3 {print $3 / 1000}' "$D/req.log" | sort -n | awk '{v[NR] = $1} END {
  if (NR == 0) { print "no requests logged"; exit }
  p50 = v[int((NR * 50 + 99) / 100)]; p99 = v[int((NR * 99 + 99) / 100)]; printf "p50 %.2f p99 %.2f max %.2f ms", p50, p99, v[NR] }')
echo "$LABEL rate $RPS $LAT ($FAILED, refused $REFUSED); $SUM"
rm -rf "$D"
