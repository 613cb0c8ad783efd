#!/bin/bash
# fdatasync, fsync, openat and close calls of `siglake ingest` (1 worker, batch,
# --wal-max-open-files 512) while `siglake loadgen` sends REQUESTS 1 KiB requests
# round-robin to TENANTS tenants whose lanes already exist (a warm-up sends one
# to each first). Counts, not timings: what the commit journal changed
# (docs/performance.md "The shard commit journal"). Needs strace.
#
#   perf/fsync-count.sh CLI LABEL TENANTS REQUESTS
#   e.g. perf/fsync-count.sh dist/cli.js after 2000 20000
#        perf/fsync-count.sh /tmp/before/dist/cli.js before 2000 20000
#   INGEST_FLAGS="--wal-segment-max-age-secs 1" perf/fsync-count.sh ...  (extra ingest
#   flags; with age sealing every lane makes new segments during the load: the
#   segment files made under strace are counted, for the syncs per creation)
set -euo pipefail
CLI=$1; LABEL=$2; T=$3; R=$4
D=$(mktemp -d /tmp/siglake-fsync-count-XXXX)
PORT=$((20000 + RANDOM % 20000))
SIGLAKE_COMPACTOR=false node "$CLI" ingest --http-listen 127.0.0.1:$PORT --grpc-listen 127.0.0.1:0 --wal-dir "$D/wal" \
  --wal-fsync batch --workers 1 --trust-tenant-header --ingest-max-lanes $((2 * T)) --wal-max-open-files 512 \
  --log-level warn ${INGEST_FLAGS:-} > "$D/ing.log" 2>&1 &
PID=$!
for _ in $(seq 1 150); do curl -s "127.0.0.1:$PORT/readyz" > /dev/null && break; sleep 0.2; done
load() {
  node "$CLI" loadgen --target "http://127.0.0.1:$PORT" --tenants "$T" --tenant-prefix t --requests "$1" \
    --connections 64 --threads 1 --body-bytes 1024 --bodies 2 --duration 0 --no-progress --quiet "${@:2}"
}
load "$T" > /dev/null
BEFORE=$(curl -s "127.0.0.1:$PORT/metrics" | grep -E '^siglake_wal_(fsync_seconds_count|checkpoints_total)' || true)
segs() { find "$D/wal" -name '*.seg' | wc -l; }
strace -f -c -e trace=fdatasync,fsync,openat,close -p $PID -o "$D/strace.txt" 2> /dev/null &
SP=$!
sleep 1
SEG0=$(segs)
load "$R" --out "$D/lg.json" > /dev/null 2>&1
AFTER=$(curl -s "127.0.0.1:$PORT/metrics" | grep -E '^siglake_wal_(fsync_seconds_count|checkpoints_total)' || true)
SEG1=$(segs)
kill -INT $SP; wait $SP 2> /dev/null || true
kill -TERM $PID; wait $PID || true
echo "== $LABEL: $T tenants, $R requests (under strace: rates are not the point)"
node -e "const j=require('$D/lg.json'); console.log('answered', JSON.stringify(j.statusCounts))"
echo "segment files made during the measured load: $((SEG1 - SEG0))"
echo "metrics before the measured load:"; echo "$BEFORE"
echo "metrics after it (fsync_seconds_count counts request-path syncs: lanes before, the journal after):"; echo "$AFTER"
grep -E 'fdatasync|fsync|openat|close|total' "$D/strace.txt"
rm -rf "$D"
