#!/bin/bash
# What the compactor gets of the CPU, by compactor.placement, while the
# ingest path keeps the machine busy (docs/performance.md, "The compactor as
# a process at SCHED_IDLE"): for each placement, siglake (batch, a round
# every 5 s), SECS of closed-loop load (every core busy), then SECS at RATE
# requests a second (cores to spare). After each phase: WAL written, WAL the
# compactor landed, its busy seconds, its lag, and the phase's p99.
#
#   npm run build && perf/compactor-share.sh [SECS] [RATE] [placements...]
#   perf/compactor-share.sh 30 12000 process-idle process thread
set -u
SECS=${1:-30}; RATE=${2:-12000}; shift 2 || true
PLACEMENTS=${*:-process-idle thread}
cd "$(dirname "$0")/.."
metric() { curl -s "http://127.0.0.1:14319/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1e6 }'; }
printf '%-13s %-12s %8s %8s %8s %7s %8s %8s\n' placement phase 'req/s' 'WAL MB' 'landed' 'busy s' 'lag s' 'p99 ms'
for P in $PLACEMENTS; do
  D=$(mktemp -d /tmp/siglake-share-XXXX)
  node dist/cli.js ingest --http-listen 127.0.0.1:14319 --grpc-listen 127.0.0.1:0 --wal-dir "$D"/wal --wal-fsync batch \
    --compact-interval-secs 5 --compactor-placement "$P" --catalog-url sqlite:"$D"/catalog.db --warehouse "$D"/wh > "$D"/siglake.log 2>&1 &
  PID=$!
  sleep 2
  w0=0; l0=0; b0=0
  for phase in closed-loop rate; do
    if [ $phase = closed-loop ]; then
      node dist/cli.js loadgen --target http://127.0.0.1:14319 --connections 64 --duration "$SECS" --no-progress --quiet --out "$D"/$phase.json
    else
      node dist/cli.js loadgen --target http://127.0.0.1:14319 --rate "$RATE" --connections 64 --duration "$SECS" --no-progress --quiet --out "$D"/$phase.json
    fi
    w=$(metric siglake_wal_bytes_written_total); l=$(metric siglake_compactor_wal_bytes_read_total); b=$(metric siglake_compactor_busy_seconds_total)
    read -r rps p99 < <(node -e 'const j=require(process.argv[1]); console.log(j.rates.requestsPerSec.toFixed(0), j.latencyMs.p99)' "$D"/$phase.json)
    printf '%-13s %-12s %8s %8s %8s %7.1f %8s %8s\n' "$P" $phase "$rps" "$(mb $((${w%.*} - w0)))" "$(mb $((${l%.*} - l0)))" "$(awk -v a="$b" -v z="$b0" 'BEGIN{print a-z}')" "$(metric siglake_compactor_lag_seconds)" "$p99"
    w0=${w%.*}; l0=${l%.*}; b0=$b
  done
  kill -TERM $PID; wait $PID
  rm -rf "$D"
done
