#!/bin/bash
# The P4 stall on a small machine, reproduced with CPU profiles of every
# thread (docs/performance.md, "The loadgen's HTTP path, and P4 on 2 cores"):
# siglake (batch, compactor on at its default 30 s), 14 s of closed-loop load
# to leave a WAL backlog, then 20 s at 12,000 requests a second, during which
# the compactor's first rounds run. Prints each second's p99/max and the
# rounds; the profiles (main thread, writer worker, compactor) are left in
# DIR/prof, one .cpuprofile per thread. Extra arguments go to node.
#
#   npm run build && perf/p4-round-stall.sh [DIR] [node flags...]
#
# SIGLAKE_COMPACTOR_PLACEMENT=thread|process|process-idle picks the placement
# inside siglake ingest; OUTSIDE="chrt -i 0" (or "nice -n 19", or "") runs
# `siglake compact` beside it under that prefix instead (ingest with
# --compactor=false), as the trials of docs/performance.md, "The compactor
# as a process at SCHED_IDLE" did.
set -u
D=${1:-/tmp/siglake-p4-stall}; shift || true
rm -rf "$D"; mkdir -p "$D/prof"
cd "$(dirname "$0")/.."
INSIDE=(); [ -n "${OUTSIDE+set}" ] && INSIDE=(--compactor=false)
node --cpu-prof --cpu-prof-dir="$D"/prof "$@" dist/cli.js ingest "${INSIDE[@]}" --http-listen 127.0.0.1:14318 --grpc-listen 127.0.0.1:0 --wal-dir "$D"/wal --wal-fsync batch --log-level info --catalog-url sqlite:"$D"/catalog.db --warehouse "$D"/wh > "$D"/siglake.log 2>&1 &
PID=$!
CPID=
if [ -n "${OUTSIDE+set}" ]; then
  $OUTSIDE node dist/cli.js compact --wal-dir "$D"/wal --catalog-url sqlite:"$D"/catalog.db --warehouse "$D"/wh --log-level info >> "$D"/siglake.log 2>&1 &
  CPID=$!
fi
sleep 2
node dist/cli.js loadgen --target http://127.0.0.1:14318 --connections 64 --duration 14 --no-progress --quiet --out "$D"/fill.json
node dist/cli.js loadgen --target http://127.0.0.1:14318 --rate 12000 --connections 64 --duration 20 --warmup 2 --no-progress --quiet --out "$D"/rate.json
kill -TERM $PID $CPID; wait $PID $CPID
node -e '
const j = require(process.argv[1]);
console.log("fill", JSON.parse(require("fs").readFileSync(process.argv[2])).rates.requestsPerSec);
console.log("rate p99", j.latencyMs.p99, "max", j.latencyMs.max);
console.log((j.timeline||[]).filter(t=>!t.warmup).map(t=>`${t.t}:${t.p99Ms}/${t.maxMs}`).join(" "));
' "$D"/rate.json "$D"/fill.json
grep -a "compaction round" "$D"/siglake.log | head -3 | cut -c1-300
for f in "$D"/prof/*.cpuprofile; do
  echo "== $f"
  node perf/cpuprofile-seconds.mjs "$f" 14
done
