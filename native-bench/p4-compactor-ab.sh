#!/usr/bin/env bash
# P4's question on a small machine: is the fixed-rate p99 the compactor's
# doing? For one built tree, PAIRS times: `siglake ingest` (batch mode) with
# the compactor off (--compactor=false), then with it on (the default,
# process-idle). Each run writes a P1-sized WAL first (15 s of wrk, 64
# connections, 1 KiB bodies, as the bench's P1 row), so that the compactor
# has WAL to land, then measures `siglake loadgen --rate RATE` for 5 s
# after 3 s of warm-up, and prints its p99 (and by second) and the journal
# fdatasyncs of the window, with those over 5 ms (docs/performance.md,
# "Stop 54").
#
#   native-bench/p4-compactor-ab.sh RATE PAIRS TREE
#   e.g. native-bench/p4-compactor-ab.sh 5000 2 /work/main
set -euo pipefail
rate=$1 pairs=$2 tree=$3
here=$(cd "$(dirname "$0")" && pwd)
metric() { # port name-regex -> value
  curl -s "http://127.0.0.1:$1/metrics" | grep -E "$2" | awk '{print $2}' | head -1
}
one() {
  local flags=$1 dir port pid c0 s0 c1 s1
  dir=$(mktemp -d "${TMPDIR:-/tmp}/siglake-p4c-XXXXXX")
  # shellcheck disable=SC2086
  node "$tree/dist/cli.js" ingest --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --wal-dir "$dir/wal" \
    --warehouse "$dir/warehouse" --catalog-url "sqlite:$dir/catalog.db" --wal-fsync batch --log-level info $flags >"$dir/out.log" 2>&1 &
  pid=$!
  port=
  for _ in $(seq 1 300); do
    port=$(grep '"listening"' "$dir/out.log" | grep -oE '"http":[^,}]*' | grep -oE '[0-9]+$' | head -1 || true)
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$dir/out.log"; exit 1; }
  wrk -t1 -c64 -d15s -s "$here/wrk-post.lua" "http://127.0.0.1:$port/v1/logs" -- "$here/fixtures/logs-1k.pb" 0 >/dev/null
  c0=$(metric "$port" '^siglake_wal_fsync_seconds_count')
  s0=$(metric "$port" '^siglake_wal_fsync_seconds_bucket[{]le="0.005"[}]')
  node "$tree/dist/cli.js" loadgen --target "http://127.0.0.1:$port" --rate "$rate" --connections 64 --duration 5 --warmup 3 \
    --threads 1 --no-progress --quiet --out "$dir/lg.json" || true
  c1=$(metric "$port" '^siglake_wal_fsync_seconds_count')
  s1=$(metric "$port" '^siglake_wal_fsync_seconds_bucket[{]le="0.005"[}]')
  kill -TERM "$pid"
  wait "$pid" || true
  node -e 'const j = require(process.argv[1]); const l = j.latencyMs; const s = (j.timeline ?? []).filter((t) => !t.warmup).map((t) => t.p99Ms); console.log(`  p50 ${l.p50} p99 ${l.p99} max ${l.max} ms; p99 by second ${s.join(" ")}`)' "$dir/lg.json"
  echo "  [${flags:-compactor on}] journal fdatasyncs in the window: $((c1 - c0)), over 5 ms: $(((c1 - c0) - (s1 - s0)))"
  rm -rf "$dir"
}
for _ in $(seq 1 "$pairs"); do
  one "--compactor=false"
  one ""
done
