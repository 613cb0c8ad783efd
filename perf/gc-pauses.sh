#!/bin/bash
# The acceptor thread's scavenges under P4's load: the ingester runs with
# --trace-gc-nvp, a saturating wrk burst writes the WAL first (as P1's runs
# do before P4's), then loadgen holds a fixed rate; the main isolate's
# scavenges during the fixed rate are summed: count, mean and largest pause,
# and the bytes each one kept (survived) and promoted. A scavenge that keeps
# every request's objects pauses the thread for milliseconds, and P4's p99
# with it (docs/performance.md, stop 50: the dispatcher's Map).
#
#   perf/gc-pauses.sh CLI LABEL RATE [BURST_SECS] [SECS]
#   e.g. perf/gc-pauses.sh dist/cli.js after 16000 15 10
set -euo pipefail
CLI=$(realpath "$1"); LABEL=$2; RATE=$3; BURST=${4:-15}; SECS=${5:-10}
HERE=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d /tmp/siglake-gc-XXXX)
PORT=$((20000 + RANDOM % 20000))
node --trace-gc-nvp "$CLI" ingest --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" \
  --wal-fsync batch --log-level warn > "$D/gc.log" 2>&1 &
PID=$!
for _ in $(seq 1 150); do curl -s "127.0.0.1:$PORT/readyz" > /dev/null && break; sleep 0.2; done
if [ "$BURST" -gt 0 ]; then
  wrk -t1 -c64 -d"${BURST}s" --timeout 10s -s "$HERE/native-bench/wrk-post.lua" "http://127.0.0.1:$PORT/v1/logs" -- "$HERE/native-bench/fixtures/logs-1k.pb" 1 > /dev/null
fi
# Scavenges are counted from here on (the log's own clock is ms since the isolate started).
START_MS=$(( ($(date +%s%N) - $(stat -c %Y /proc/$PID)000000000) / 1000000 ))
node "$CLI" loadgen --target "http://127.0.0.1:$PORT" --rate "$RATE" --connections 64 --duration "$SECS" --warmup 2 \
  --threads 1 --no-progress --quiet --out "$D/lg.json" > /dev/null 2>&1 || true
kill -TERM $PID; wait $PID || true
# The main isolate is the first one to log a scavenge (the workers start after it).
MAIN=$(grep -m1 -oE '^\[[0-9]+:0x[0-9a-f]+\]' "$D/gc.log")
SUM=$(grep -F "$MAIN" "$D/gc.log" | awk -v T0="$START_MS" '/gc=s / {
  match($0, /\] *[0-9]+ ms/); t = substr($0, RSTART + 1, RLENGTH - 4) + 0; if (t < T0) next
  delete v; n2 = split($0, a, " "); for (i = 1; i <= n2; i++) { split(a[i], kv, "="); v[kv[1]] = kv[2] }
  n++; p += v["pause"]; s += v["new_space_survived"]; pr += v["promoted"]; if (v["pause"] + 0 > mx) mx = v["pause"] + 0 }
  END { if (n == 0) { print "no scavenges"; exit } printf "scavenges %d, pause mean %.2f ms max %.2f ms, kept %.0f KB and promoted %.0f KB each", n, p / n, mx, s / n / 1024, pr / n / 1024 }')
node -e "const j=require('$D/lg.json'); console.log('$LABEL', 'rate', j.rates.okPerSec, 'p50', j.latencyMs.p50, 'p99', j.latencyMs.p99, 'max', j.latencyMs.max, 'ms;', '$SUM')"
rm -rf "$D"
