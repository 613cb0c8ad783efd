#!/usr/bin/env bash
# The bench's measurements that need more cores than the two of the
# development machine (issue 18 part 3; docs/performance.md "On 16 cores"),
# in one prepared run that fits a short lease of a larger machine:
#
#   A  P1 and P5 (wrk -t1, as the bar), and P4 with two generator threads
#      (BENCH_LOADGEN_THREADS=2): loadgen at half and a quarter of P1's best
#      rate, against siglake and against the uWS discard server
#   B  the worker curve: siglake batch with 1, 2, 4, 8 writer workers, 64
#      tenants, 1 KiB and 256 KiB (wrk -t2), beside the disk ceiling; and P2
#   C  the acceptor ceiling: uWS discard with 1, 2, 4 threads on one port
#      (wrk -t2, -t2, -t4); and P3 (h2load)
#   D  P4 again with --wal-rounds-in-flight 2 (the overlap of a round's sync
#      with the next round's write, off by default)
#   E  P5's row again with --worker-young-generation-mib 0 (V8's default
#      young generation in each worker), for its RSS
#   F  P1's row with the round trace (`--only timeline`: where a request's
#      time goes between the acceptor and its worker, and a round's), beside
#      P1's own row untraced, for what the trace costs
#   G  the same timeline with --wal-rounds-in-flight 2 (section D's setting)
#
#   native-bench/many-cores.sh OUTDIR [DEADLINE_SECS] [SECTIONS]
#
# SECTIONS: which of them, in order (default "A B C").
# P4's fixed-rate runs last BENCH_P4_SECS (default 6 here) each, and the
# results keep their p99 and max by second.
#
# Each section is one `run.mjs --no-build` (so build first, or unpack a
# pack-portable.sh bundle); its table goes to OUTDIR/run.log and its results
# JSON to OUTDIR/<section>.json. A section whose estimate does not fit in what
# is left of DEADLINE_SECS (default 600) is skipped and says so. WALs and the
# disk ceiling's file go to BENCH_DIR (default ./.bench-dir, the checkout's
# file system: /tmp may be a tmpfs, where fdatasync costs nothing).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: native-bench/many-cores.sh OUTDIR [DEADLINE_SECS] [SECTIONS]}
deadline=$(( $(date +%s) + ${2:-600} ))
sections=${3:-A B C}
mkdir -p "$out"
export BENCH_SECS=${BENCH_SECS:-3} BENCH_RUNS=${BENCH_RUNS:-3} BENCH_WARMUP_SECS=${BENCH_WARMUP_SECS:-1} BENCH_P4_SECS=${BENCH_P4_SECS:-6}
export BENCH_DIR=${BENCH_DIR:-$PWD/.bench-dir}
mkdir -p "$BENCH_DIR"
log=$out/run.log

{
  echo "== machine"
  date -u +%FT%TZ
  echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "memory: $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "node: $(node --version); wrk: $(wrk -v 2>&1 | head -1); h2load: $(h2load --version 2>&1 | head -1)"
  echo "BENCH_DIR $BENCH_DIR on: $(df -T "$BENCH_DIR" | tail -1)"
  echo "git: ${SIGLAKE_GIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
} >>"$log" 2>&1

section() {
  local name=$1 estimate=$2
  shift 2
  local left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt "$estimate" ]; then
    echo "== section $name skipped: ${left} s left, it needs about ${estimate} s" >>"$log"
    return
  fi
  echo "== section $name ($*), $(date -u +%T), ${left} s left" >>"$log"
  rm -f native-bench/results/latest-partial.json
  timeout "$left" env "$@" >>"$log" 2>&1
  echo "== section $name exited $? at $(date -u +%T)" >>"$log"
  [ -f native-bench/results/latest-partial.json ] && cp native-bench/results/latest-partial.json "$out/$name.json"
  rm -rf "${BENCH_DIR:?}"/siglake-bench-* 2>/dev/null
}

for name in $sections; do
  case $name in
    A) section A 130 BENCH_LOADGEN_THREADS=2 node native-bench/run.mjs --no-build --only p1,p4,p5 ;;
    B) section B 170 BENCH_CURVE_WORKERS=1,2,4,8 BENCH_CURVE_WRK_THREADS=2 node native-bench/run.mjs --no-build --only curve,p2 ;;
    C) section C 80 node native-bench/run.mjs --no-build --only ceiling-1k-wrk2,ceiling-1k-2t-wrk2,ceiling-1k-4t-wrk4,p3 ;;
    D) section D 60 BENCH_LOADGEN_THREADS=2 SIGLAKE_WAL_ROUNDS_IN_FLIGHT=2 node native-bench/run.mjs --no-build --only p4 ;;
    E) section E 40 SIGLAKE_WORKER_YOUNG_GENERATION_MIB=0 node native-bench/run.mjs --no-build --only siglake-http-batch-1k-10k ;;
    F) section F 50 node native-bench/run.mjs --no-build --only siglake-http-batch-1k,timeline ;;
    G) section G 30 SIGLAKE_WAL_ROUNDS_IN_FLIGHT=2 node native-bench/run.mjs --no-build --only timeline ;;
    *) echo "== no section $name" >>"$log" ;;
  esac
done
echo "== done $(date -u +%T)" >>"$log"
