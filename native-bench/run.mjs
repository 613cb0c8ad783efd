#!/usr/bin/env node
// The side-by-side run of docs/performance.md and the spec's performance.md:
// in one run, with the same load tool, the same canned bodies (made by the
// project's FixtureGenerator) and the same connection count, it measures
//
//   ceiling     uWebSockets.js discard server (servers/uws-discard.mjs)
//   disk        sequential writes + fdatasync of the body size (disk-ceiling.mjs)
//   baseline    plain node:http + protobufjs + append + fdatasync per batch
//   grpc-js     discard server (and a bare node:http2 one, for reference)
//   siglake     `siglake ingest` in batch, interval and never fsync modes,
//               OTLP/HTTP (wrk + wrk-post.lua, 1 thread, 64 connections) and
//               OTLP/gRPC (h2load, 64 connections x 10 streams, pre-framed bodies),
//               1 KiB and 256 KiB bodies, 1 and 10,000 tenants
//   P4          `siglake loadgen --rate` at half and a quarter of P1's best rate, and the
//               same generator against the uWS discard server (its own latency floor)
//   P6, P7      the micro-benchmark probes of perf/check.ts
//   acceptors   (not a goal) uWS discard with 1, 2 and 4 threads on one port, wrk -t1, -t2, -t4:
//               the ceiling of more acceptor threads (`--only acceptors`)
//   timeline    (not a goal, not in a full run) P1's siglake row with the round trace on
//               (src/shard/round-trace.ts): where a request's and a round's time goes
//               (`--only timeline`; native-bench/timeline.mjs)
//   curve       (not a goal, not in a full run) siglake batch with 1, 2, 4, 8 writer workers
//               (BENCH_CURVE_WORKERS), 64 tenants, 1 KiB and 256 KiB, wrk -t2
//               (BENCH_CURVE_WRK_THREADS), beside the disk ceiling: `--only curve`
//
// and prints one table (requests/s, MB/s, records/s, p50/p99, peak RSS, each
// siglake row's ratio to its ceiling and to the baseline) and the P1-P7 rows
// with goal and met/short; writes JSON and an HTML chart under results/.
//
//   node native-bench/run.mjs [--only p1,p3,siglake-http-never-1k] [--no-build] [--list]
//                             [--compare DIR]
//   --compare DIR: also measure DIR's built `dist/cli.js` (another checkout, e.g. a
//        `git worktree` of an older commit, built) as the row siglake-http-batch-1k-compare,
//        interleaved with this tree's P1 row in the same run: a before/after of P1; and as
//        siglake-http-batch-256k-compare beside P2's row, siglake-http-batch-1k-10k-compare
//        right after the 10,000-tenant row (with p5 selected) and siglake-http-never-1k-compare
//        (selected by id) beside this tree's rows of the same names.
//   env: BENCH_SECS (5) seconds per measured run, BENCH_RUNS (3) runs per row
//        (medians are reported), BENCH_WARMUP_SECS (1), BENCH_CONNECTIONS (64),
//        BENCH_DIR (os.tmpdir()) where WALs, the baseline's file and the disk
//        ceiling write, SIGLAKE_WORKERS (ingester --workers; default: its own),
//        BENCH_LOADGEN_THREADS (1) P4's generator threads, BENCH_P4_SECS (BENCH_SECS) P4's run length
//        and BENCH_P4_WARMUP_SECS (3) the generator's warm-up before it, BENCH_CURVE_WORKERS (1,2,4,8)
//        and BENCH_CURVE_WRK_THREADS (2) for `--only curve`.

import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stopChild } from './proc.mjs';
import { analyse, describe } from './timeline.mjs';
import { FD_SETTING, chart, goalRows, goalTable, ratios, resultFiles, table } from './report.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const CLI = path.join(REPO, 'dist', 'cli.js');
const FIXTURES = path.join(HERE, 'fixtures');
const RESULTS = path.join(HERE, 'results');

const SECS = Number(process.env.BENCH_SECS ?? 5);
const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 3));
const WARMUP = Number(process.env.BENCH_WARMUP_SECS ?? 1);
const CONNS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const STREAMS = 10;
const BENCH_DIR = process.env.BENCH_DIR ?? os.tmpdir();
const TENANTS_MANY = 10_000;
// P4's generator threads: 1 on a 2-core machine (the server needs the other
// core); 2 on a machine with the cores for it, as the bar asks.
const LOADGEN_THREADS = Math.max(1, Number(process.env.BENCH_LOADGEN_THREADS ?? 1));
// P4's seconds per fixed-rate run (BENCH_SECS unless set), and the generator's
// warm-up before them: 3 s, because loadgen's own start leaves a backlog of
// requests due at once (p99 95-280 ms in its first second, against the uWS
// discard server too) that a 1 s warm-up let spill into the first measured
// second (docs/performance.md, "On 16 cores").
const P4_SECS = Number(process.env.BENCH_P4_SECS ?? SECS);
const P4_WARMUP_SECS = Number(process.env.BENCH_P4_WARMUP_SECS ?? 3);
// The worker curve (`--only curve`): siglake with this many writer workers
// each, 64 tenants spread over them, under wrk with BENCH_CURVE_WRK_THREADS.
const CURVE_WORKERS = (process.env.BENCH_CURVE_WORKERS ?? '1,2,4,8').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
const CURVE_WRK_THREADS = Math.max(1, Number(process.env.BENCH_CURVE_WRK_THREADS ?? 2));
const CURVE_TENANTS = 64;

const { values: args } = parseArgs({
  options: { only: { type: 'string' }, 'no-build': { type: 'boolean' }, list: { type: 'boolean' }, render: { type: 'string' }, out: { type: 'string' }, compare: { type: 'string' } },
});
const COMPARE_CLI = args.compare === undefined ? undefined : path.join(path.resolve(args.compare), 'dist', 'cli.js');
if (COMPARE_CLI !== undefined && !existsSync(COMPARE_CLI)) throw new Error(`--compare: ${COMPARE_CLI} does not exist (build that checkout first)`);

// ---- the rows ----------------------------------------------------------------

/** @typedef {{id:string, kind:string, proto:'http'|'grpc'|'disk'|'micro', size:'1k'|'256k'|'1m', label:string, mode?:string, tenants?:number, cli?:string, threads?:number, wrkThreads?:number, workers?:number}} Row */
/** @type {Row[]} */
const ROWS = [
  { id: 'ceiling-1k', kind: 'ceiling', proto: 'http', size: '1k', label: 'uWS discard (ceiling)' },
  { id: 'baseline-1k', kind: 'baseline', proto: 'http', size: '1k', label: 'node:http + protobufjs + fdatasync/batch (baseline)' },
  { id: 'siglake-http-batch-1k', kind: 'siglake', proto: 'http', size: '1k', mode: 'batch', label: 'siglake HTTP batch' },
  { id: 'siglake-http-interval-1k', kind: 'siglake', proto: 'http', size: '1k', mode: 'interval', label: 'siglake HTTP interval' },
  { id: 'siglake-http-never-1k', kind: 'siglake', proto: 'http', size: '1k', mode: 'never', label: 'siglake HTTP never' },
  { id: 'siglake-http-batch-1k-10k', kind: 'siglake', proto: 'http', size: '1k', mode: 'batch', tenants: TENANTS_MANY, label: 'siglake HTTP batch, 10,000 tenants' },
  { id: 'ceiling-256k', kind: 'ceiling', proto: 'http', size: '256k', label: 'uWS discard (ceiling)' },
  { id: 'disk-256k', kind: 'disk', proto: 'disk', size: '256k', label: 'write 256 KiB + fdatasync (disk ceiling)' },
  { id: 'disk-1k', kind: 'disk', proto: 'disk', size: '1k', label: 'write 1 KiB + fdatasync' },
  { id: 'disk-1m', kind: 'disk', proto: 'disk', size: '1m', label: 'write 1 MiB + fdatasync' },
  { id: 'baseline-256k', kind: 'baseline', proto: 'http', size: '256k', label: 'node:http + protobufjs + fdatasync/batch (baseline)' },
  { id: 'siglake-http-batch-256k', kind: 'siglake', proto: 'http', size: '256k', mode: 'batch', label: 'siglake HTTP batch' },
  { id: 'siglake-http-interval-256k', kind: 'siglake', proto: 'http', size: '256k', mode: 'interval', label: 'siglake HTTP interval' },
  { id: 'siglake-http-never-256k', kind: 'siglake', proto: 'http', size: '256k', mode: 'never', label: 'siglake HTTP never' },
  { id: 'siglake-http-batch-256k-10k', kind: 'siglake', proto: 'http', size: '256k', mode: 'batch', tenants: TENANTS_MANY, label: 'siglake HTTP batch, 10,000 tenants' },
  { id: 'grpc-discard-1k', kind: 'grpc-ceiling', proto: 'grpc', size: '1k', label: 'grpc-js discard (gRPC ceiling)' },
  { id: 'h2-discard-1k', kind: 'h2-reference', proto: 'grpc', size: '1k', label: 'bare node:http2 discard (reference)' },
  { id: 'siglake-grpc-batch-1k', kind: 'siglake', proto: 'grpc', size: '1k', mode: 'batch', label: 'siglake gRPC batch' },
  { id: 'siglake-grpc-interval-1k', kind: 'siglake', proto: 'grpc', size: '1k', mode: 'interval', label: 'siglake gRPC interval' },
  { id: 'siglake-grpc-never-1k', kind: 'siglake', proto: 'grpc', size: '1k', mode: 'never', label: 'siglake gRPC never' },
  { id: 'grpc-discard-256k', kind: 'grpc-ceiling', proto: 'grpc', size: '256k', label: 'grpc-js discard (gRPC ceiling)' },
  { id: 'siglake-grpc-batch-256k', kind: 'siglake', proto: 'grpc', size: '256k', mode: 'batch', label: 'siglake gRPC batch' },
  { id: 'micro', kind: 'micro', proto: 'micro', size: '1k', label: 'perf/check.ts probes (P6, P7)' },
  // The second-acceptor experiment (issue 18 part 3): what a second uWS thread on the same
  // port could buy at best on this machine, with one and two wrk threads.
  { id: 'ceiling-1k-wrk2', kind: 'ceiling-threads', proto: 'http', size: '1k', threads: 1, wrkThreads: 2, label: 'uWS discard, 1 thread; wrk -t2' },
  { id: 'ceiling-1k-2t', kind: 'ceiling-threads', proto: 'http', size: '1k', threads: 2, label: 'uWS discard, 2 threads on one port (SO_REUSEPORT)' },
  { id: 'ceiling-1k-2t-wrk2', kind: 'ceiling-threads', proto: 'http', size: '1k', threads: 2, wrkThreads: 2, label: 'uWS discard, 2 threads on one port; wrk -t2' },
  { id: 'ceiling-1k-4t-wrk4', kind: 'ceiling-threads', proto: 'http', size: '1k', threads: 4, wrkThreads: 4, label: 'uWS discard, 4 threads on one port; wrk -t4' },
  // P1's row with the round trace (test hooks on): a timeline of the rounds, not a goal.
  { id: 'timeline-1k', kind: 'siglake', proto: 'http', size: '1k', mode: 'batch', trace: true, label: 'siglake HTTP batch, with the round trace (SIGLAKE_TEST_ROUND_TRACE)' },
  // The worker curve (issue 18 part 3): one acceptor, W writer workers, 64 tenants
  // (lanes hash over the workers), wrk with CURVE_WRK_THREADS threads; not a goal.
  ...CURVE_WORKERS.flatMap((w) =>
    ['1k', '256k'].map((size) => ({
      id: `curve-${size}-w${w}`,
      kind: 'siglake',
      proto: 'http',
      size,
      mode: 'batch',
      tenants: CURVE_TENANTS,
      workers: w,
      wrkThreads: CURVE_WRK_THREADS,
      label: `siglake HTTP batch, ${CURVE_TENANTS} tenants, --workers ${w}; wrk -t${CURVE_WRK_THREADS}`,
    })),
  ),
];
if (COMPARE_CLI !== undefined) {
  // Right after this tree's P1 row, so both share the machine's state of the moment.
  const at = ROWS.findIndex((r) => r.id === 'siglake-http-batch-1k') + 1;
  ROWS.splice(at, 0, { id: 'siglake-http-batch-1k-compare', kind: 'siglake', proto: 'http', size: '1k', mode: 'batch', label: `siglake HTTP batch (--compare ${args.compare})`, cli: COMPARE_CLI });
  // And right after P5's 10,000-tenant row: a before/after of P5 in one run.
  const at10k = ROWS.findIndex((r) => r.id === 'siglake-http-batch-1k-10k') + 1;
  ROWS.splice(at10k, 0, { id: 'siglake-http-batch-1k-10k-compare', kind: 'siglake', proto: 'http', size: '1k', mode: 'batch', tenants: TENANTS_MANY, label: `siglake HTTP batch, 10,000 tenants (--compare ${args.compare})`, cli: COMPARE_CLI });
  // The acceptor alone (no sync on the path), for changes to the answer path: by id only.
  const atNever = ROWS.findIndex((r) => r.id === 'siglake-http-never-1k') + 1;
  ROWS.splice(atNever, 0, { id: 'siglake-http-never-1k-compare', kind: 'siglake', proto: 'http', size: '1k', mode: 'never', label: `siglake HTTP never (--compare ${args.compare})`, cli: COMPARE_CLI });
  // The same for P2's row: right after this tree's 256 KiB batch row.
  const at256 = ROWS.findIndex((r) => r.id === 'siglake-http-batch-256k') + 1;
  ROWS.splice(at256, 0, { id: 'siglake-http-batch-256k-compare', kind: 'siglake', proto: 'http', size: '256k', mode: 'batch', label: `siglake HTTP batch (--compare ${args.compare})`, cli: COMPARE_CLI });
}

/** Rows each goal needs (P4 rides on the P1 siglake row's server). */
const GOAL_ROWS = {
  p1: ['ceiling-1k', 'baseline-1k', 'siglake-http-batch-1k', ...(COMPARE_CLI !== undefined ? ['siglake-http-batch-1k-compare'] : [])],
  p2: ['disk-256k', 'siglake-http-batch-256k', 'ceiling-256k', 'baseline-256k', ...(COMPARE_CLI !== undefined ? ['siglake-http-batch-256k-compare'] : [])],
  p3: ['grpc-discard-1k', 'h2-discard-1k', 'siglake-grpc-batch-1k'],
  p4: ['siglake-http-batch-1k'],
  p5: ['siglake-http-batch-1k', 'siglake-http-batch-1k-10k', ...(COMPARE_CLI !== undefined ? ['siglake-http-batch-1k-compare', 'siglake-http-batch-1k-10k-compare'] : [])],
  p6: ['micro'],
  p7: ['micro'],
  // Not a goal of the bar: the ceiling of a second acceptor thread (docs/performance.md).
  acceptors: ['ceiling-1k', 'ceiling-1k-wrk2', 'ceiling-1k-2t', 'ceiling-1k-2t-wrk2', 'ceiling-1k-4t-wrk4'],
  // Not a goal: where P1's row spends a request's time (native-bench/timeline.mjs).
  timeline: ['timeline-1k'],
  // Not a goal either: requests/s and MB/s by writer workers (BENCH_CURVE_WORKERS).
  curve: ['disk-1k', 'disk-256k', ...CURVE_WORKERS.flatMap((w) => [`curve-1k-w${w}`, `curve-256k-w${w}`])],
};

function selected() {
  // Everything but the worker curve, which is for a machine with the cores for it (`--only curve`),
  // and the traced row (`--only timeline`), whose trace costs the path it measures a little.
  if (args.only === undefined || args.only === 'all') return { rows: ROWS.filter((r) => r.workers === undefined && r.trace === undefined), goals: Object.keys(GOAL_ROWS).filter((g) => g !== 'curve' && g !== 'timeline') };
  const ids = new Set();
  const goals = [];
  for (const tok of args.only.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean)) {
    if (GOAL_ROWS[tok] !== undefined) {
      goals.push(tok);
      for (const r of GOAL_ROWS[tok]) ids.add(r);
    } else if (ROWS.some((r) => r.id === tok)) {
      ids.add(tok);
    } else {
      throw new Error(`--only: unknown goal or row ${tok} (goals: ${Object.keys(GOAL_ROWS).join(', ')}; rows: --list)`);
    }
  }
  return { rows: ROWS.filter((r) => ids.has(r.id)), goals };
}

// ---- processes ---------------------------------------------------------------

const log = (s) => process.stderr.write(`${s}\n`);

/** Starts a server process; resolves once `ready(line)` returns a port object. */
function startServer(cmd, argv, ready, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { cwd: REPO, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    let err = '';
    let info = {};
    let done = false;
    const timer = setTimeout(() => fail(new Error(`${path.basename(argv[0] ?? cmd)} did not start in time: ${err}`)), 60_000);
    const fail = (e) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(e);
    };
    child.stdout.setEncoding('utf8').on('data', (c) => {
      buf += c;
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (done) continue;
        const r = ready(line, info);
        if (r === undefined) continue;
        info = r;
        if (r.done) {
          done = true;
          clearTimeout(timer);
          resolve({ child, ...r });
        }
      }
    });
    child.stderr.setEncoding('utf8').on('data', (c) => {
      err = (err + c).slice(-4000);
    });
    child.on('exit', (code) => fail(new Error(`${path.basename(argv[0] ?? cmd)} exited with ${code} before it was ready: ${err}`)));
  });
}

const portLine = (line) => {
  try {
    const j = JSON.parse(line);
    return typeof j.port === 'number' ? { port: j.port, done: true } : undefined;
  } catch {
    return undefined;
  }
};

function siglakeLine(line, info) {
  let j;
  try {
    j = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (j.msg === 'listening') return { ...info, http: j.http, grpc: j.grpc };
  if (j.msg === 'ready') return { ...info, done: true };
  return undefined;
}

/**
 * Peak and current RSS of the server, its child processes included (the
 * compactor runs as one by default, compactor.placement process-idle): the
 * sum of their peaks, an upper bound of what they held at once.
 */
function procStatus(pid) {
  let hwmMiB = 0;
  let rssMiB = 0;
  for (const p of [pid, ...childPids(pid)]) {
    try {
      const s = readFileSync(`/proc/${p}/status`, 'utf8');
      const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? 0);
      hwmMiB += kb('VmHWM') / 1024;
      rssMiB += kb('VmRSS') / 1024;
    } catch {
      // gone meanwhile
    }
  }
  return { hwmMiB, rssMiB };
}

/** The direct children of `pid` (every thread's /proc children list). */
function childPids(pid) {
  const out = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const list = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (list !== '') out.push(...list.split(' ').map(Number));
    }
  } catch {
    // no such process, or a kernel without the children file
  }
  return out;
}

function fdCount(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** utime + stime of every thread of `pid`, in clock ticks, by thread id. */
function threadCpu(pid) {
  const out = new Map();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        out.set(Number(tid), Number(f[11]) + Number(f[12]));
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    // the process is gone
  }
  return out;
}

/** µs of CPU per request over a run: the main thread's, and the whole process's. */
function cpuPerRequest(before, after, pid, requests) {
  let all = 0;
  for (const [tid, t] of after) all += t - (before.get(tid) ?? 0);
  const main = (after.get(pid) ?? 0) - (before.get(pid) ?? 0);
  const us = (ticks) => (requests > 0 ? (ticks * 1e6) / CLK_TCK / requests : NaN);
  return { mainUs: us(main), allUs: us(all) };
}

function run(cmd, argv, timeoutMs) {
  const r = spawnSync(cmd, argv, { cwd: REPO, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 256 << 20 });
  if (r.error) throw r.error;
  return r;
}

// ---- load tools --------------------------------------------------------------

function parseDuration(v, unit) {
  const n = Number(v);
  return unit === 'us' ? n / 1000 : unit === 's' ? n * 1000 : unit === 'm' ? n * 60_000 : n;
}

function wrk(url, bodyFile, secs, tenants = 0, threads = 1) {
  const lua = path.join(HERE, 'wrk-post.lua');
  const r = run('wrk', [`-t${threads}`, `-c${CONNS}`, `-d${secs}s`, '--latency', '--timeout', '10s', '-s', lua, url, '--', bodyFile, String(tenants)], (secs + 30) * 1000);
  const out = r.stdout;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN);
  const lat = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)`, 'm').exec(out);
    return m ? parseDuration(m[1], m[2]) : NaN;
  };
  const total = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const socketErrors = sock ? sock.slice(1).reduce((n, v) => n + Number(v), 0) : 0;
  if (!Number.isFinite(rps)) throw new Error(`wrk gave no result: ${out}\n${r.stderr}`);
  return { rps, p50: lat(50), p99: lat(99), requests: total, errors: non2xx + socketErrors };
}

function h2load(url, bodyFile, secs) {
  const logFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'siglake-h2load-')), 'req.log');
  const r = run(
    'h2load',
    ['-c', String(CONNS), '-m', String(STREAMS), '-t', '1', '-D', String(secs), '-d', bodyFile, '-H', 'content-type: application/grpc', '-H', 'te: trailers', `--log-file=${logFile}`, url],
    (secs + 60) * 1000,
  );
  const out = r.stdout;
  const rps = Number(/finished in [\d.]+\w*, ([\d.]+) req\/s/.exec(out)?.[1] ?? NaN);
  const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  if (!Number.isFinite(rps) || req === null) throw new Error(`h2load gave no result: ${out}\n${r.stderr}`);
  const lats = [];
  if (existsSync(logFile)) {
    for (const line of readFileSync(logFile, 'utf8').split('\n')) {
      const cols = line.split('\t');
      if (cols.length >= 3) lats.push(Number(cols[2]) / 1000);
    }
    rmSync(path.dirname(logFile), { recursive: true, force: true });
  }
  lats.sort((a, b) => a - b);
  const pct = (p) => (lats.length === 0 ? NaN : lats[Math.min(lats.length - 1, Math.ceil((p / 100) * lats.length) - 1)]);
  return { rps, p50: pct(50), p99: pct(99), requests: Number(req[3]), errors: Number(req[5]) + Number(req[6]) + Number(req[7]) };
}

/** GET /metrics; tried again after a connection error (a kept-alive socket the server closed during a long run). */
async function scrape(port) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    } catch (e) {
      if (attempt === 3) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function siglakeCounts(port) {
  const text = await scrape(port);
  let ok = 0;
  let all = 0;
  let syncs = 0;
  // 499: the client closed the connection before the answer. wrk does that to
  // the requests in flight when its time is up (at most one per connection);
  // its own timeouts it reports as socket errors, which count.
  let abandoned = 0;
  let checkpoints = 0;
  let checkpointSecs = 0;
  // Bodies that found their shard's request ring full (a second copy each).
  let backlogged = 0;
  for (const line of text.split('\n')) {
    const b = /^siglake_ingest_ring_backlog_total(?:\{[^}]*\})? (\d+)/.exec(line);
    if (b) backlogged += Number(b[1]);
    const f = /^siglake_wal_fsync_seconds_count(?:\{[^}]*\})? (\d+)/.exec(line);
    if (f) syncs += Number(f[1]);
    const c = /^siglake_wal_checkpoints_total(?:\{[^}]*\})? (\d+)/.exec(line);
    if (c) checkpoints += Number(c[1]);
    const cs = /^siglake_wal_checkpoint_seconds_total(?:\{[^}]*\})? ([\d.e+-]+)/.exec(line);
    if (cs) checkpointSecs += Number(cs[1]);
    const m = /^siglake_ingest_requests_total\{endpoint="[^"]+",status="(\d+)"\} (\d+)/.exec(line);
    if (m) {
      if (m[1] === '499') abandoned += Number(m[2]);
      else all += Number(m[2]);
      if (m[1] === '200') ok += Number(m[2]);
    }
  }
  return { ok, all, syncs, abandoned, checkpoints, checkpointSecs, backlogged };
}

// ---- measuring a row ---------------------------------------------------------

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 === 1 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function fixture(size, ext) {
  const f = path.join(FIXTURES, `logs-${size}.${ext}`);
  if (!existsSync(f)) throw new Error(`fixture ${f} missing`);
  return f;
}

const manifest = () => JSON.parse(readFileSync(path.join(FIXTURES, 'manifest.json'), 'utf8'));

async function measureServer(row, srv, extra) {
  const m = manifest()[`logs-${row.size}`];
  const isGrpc = row.proto === 'grpc';
  const port = isGrpc ? srv.grpc ?? srv.port : srv.http ?? srv.port;
  const target = isGrpc ? `http://127.0.0.1:${port}/opentelemetry.proto.collector.logs.v1.LogsService/Export` : `http://127.0.0.1:${port}/v1/logs`;
  const body = fixture(row.size, isGrpc ? 'grpc' : 'pb');
  const load = (secs) => (isGrpc ? h2load(target, body, secs) : wrk(target, body, secs, row.tenants ?? 0, row.wrkThreads ?? 1));
  if (row.tenants !== undefined) {
    // Steady state for P5: every tenant's lane exists (directory, segment, open file) before
    // anything is measured. wrk's script names tenants t0..t<N-1>, and so does this pass.
    const bytes = row.size === '1k' ? 1024 : 256 * 1024;
    log(`    warm-up: siglake loadgen, one request to each of ${row.tenants} tenants`);
    const w = run(process.execPath, [CLI, 'loadgen', '--target', `http://127.0.0.1:${srv.http}`, '--tenants', String(row.tenants), '--tenant-prefix', 't', '--requests', String(row.tenants), '--connections', String(CONNS), '--threads', '1', '--body-bytes', String(bytes), '--bodies', '2', '--duration', '0', '--no-progress', '--quiet'], 600_000);
    if (w.status !== 0) throw new Error(`warm-up loadgen failed: ${w.stderr}`);
    if (row.kind === 'siglake' && row.mode === 'batch' && row.tenants >= 1000) {
      // The lanes' creation is durable only once a checkpoint has synced
      // their new segments and directories (docs/wal-format.md "Checkpoint"):
      // a one-off far heavier than the checkpoints after it (7.7 s against
      // 2-4 s at 10,000 tenants; docs/performance.md "The creation
      // checkpoint"). Under load, wait for two more checkpoints to finish,
      // the second begun after the warm-up, so that the runs measure the
      // steady state, regular checkpoints included.
      const c0 = (await siglakeCounts(srv.http)).checkpoints;
      const t0 = Date.now();
      let c = c0;
      while (c < c0 + 2 && Date.now() - t0 < 60_000) {
        load(2);
        c = (await siglakeCounts(srv.http)).checkpoints;
      }
      log(`    warm-up: ${c - c0} checkpoints after the lanes were made, in ${((Date.now() - t0) / 1000).toFixed(0)} s under load`);
    }
  }
  if (WARMUP > 0) load(WARMUP);
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const before = row.kind === 'siglake' ? await siglakeCounts(srv.http) : undefined;
    const cpu0 = threadCpu(srv.child.pid);
    const r = load(SECS);
    const cpu = cpuPerRequest(cpu0, threadCpu(srv.child.pid), srv.child.pid, r.requests);
    r.cpuMainUs = cpu.mainUs;
    r.cpuAllUs = cpu.allUs;
    if (before !== undefined) {
      // gRPC refusals are HTTP 200 to h2load: count by what siglake answered.
      const after = await siglakeCounts(srv.http);
      r.errors = Math.max(r.errors, after.all - before.all - (after.ok - before.ok));
      // Group commit at work: requests answered per fdatasync (batch mode).
      r.reqPerSync = after.syncs > before.syncs ? (after.all - before.all) / (after.syncs - before.syncs) : NaN;
      r.abandoned = after.abandoned - before.abandoned;
      r.backlogged = after.backlogged - before.backlogged;
      // Checkpoints ended during the run and the seconds they took (a
      // checkpoint of 10,000 lanes is most of a run's worker CPU when it
      // lands in one, so it says which runs of P5's row paid for one).
      r.checkpoints = after.checkpoints - before.checkpoints;
      r.checkpointSecs = after.checkpointSecs - before.checkpointSecs;
    }
    // The rate of answered requests that were stored (or discarded, for the ceilings): wrk and
    // h2load count every response, so a server refusing under load (429, 503; gRPC refusals are
    // HTTP 200 to h2load) would otherwise pass on its refusals.
    if (r.errors > 0 && r.requests > 0) r.rps = (r.rps * Math.max(0, r.requests - r.errors)) / r.requests;
    runs.push(r);
    log(`    run ${i + 1}/${RUNS}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, errors ${r.errors}${r.abandoned > 0 ? ` (and ${r.abandoned} abandoned by the client when its time was up, 499)` : ''}; CPU µs/request: main thread ${r.cpuMainUs.toFixed(1)}, process ${r.cpuAllUs.toFixed(1)}${Number.isFinite(r.reqPerSync) ? `; ${r.reqPerSync.toFixed(1)} requests per fdatasync` : ''}${r.backlogged > 0 ? `; ${r.backlogged} found the request ring full` : ''}${r.checkpoints > 0 ? `; ${r.checkpoints} checkpoint${r.checkpoints === 1 ? '' : 's'} ended (${r.checkpointSecs.toFixed(2)} s)` : ''}`);
  }
  const ps = procStatus(srv.child.pid);
  const rps = median(runs.map((r) => r.rps));
  const out = {
    rps,
    mbps: (rps * m.bytes) / 1e6,
    recordsPerSec: rps * m.records,
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    rssMiB: ps.hwmMiB,
    errors: runs.reduce((n, r) => n + r.errors, 0),
    runs: runs.map((r) => Math.round(r.rps)),
    fds: fdCount(srv.child.pid),
    // CPU time per request (/proc/<pid>/task/*/stat over each run): the main thread is the
    // acceptor of siglake rows. Steadier than req/s on a shared machine, since it
    // counts what the server spent, not what it was given.
    cpuMainUs: median(runs.map((r) => r.cpuMainUs)),
    cpuAllUs: median(runs.map((r) => r.cpuAllUs)),
    reqPerSync: median(runs.map((r) => r.reqPerSync ?? NaN)),
  };
  if (extra) Object.assign(out, await extra(srv, out));
  return out;
}

async function runRow(row, goals) {
  log(`== ${row.id}: ${row.label}`);
  if (row.kind === 'disk') {
    const block = row.size === '1k' ? 1024 : row.size === '256k' ? 256 * 1024 : 1 << 20;
    const runs = [];
    for (let i = 0; i < RUNS; i++) {
      const r = run(process.execPath, [path.join(HERE, 'disk-ceiling.mjs'), '--block', String(block), '--secs', String(SECS), '--dir', BENCH_DIR], (SECS + 60) * 1000);
      runs.push(JSON.parse(r.stdout.trim().split('\n').pop()));
      log(`    run ${i + 1}/${RUNS}: ${runs[i].opsPerSec.toFixed(0)} writes+fdatasync/s, ${runs[i].mbPerSec.toFixed(1)} MB/s`);
    }
    return { rps: median(runs.map((r) => r.opsPerSec)), mbps: median(runs.map((r) => r.mbPerSec)), recordsPerSec: NaN, p50: median(runs.map((r) => r.p50Ms)), p99: median(runs.map((r) => r.p99Ms)), rssMiB: NaN, errors: 0, runs: runs.map((r) => Math.round(r.opsPerSec)) };
  }
  if (row.kind === 'micro') {
    const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'siglake-micro-')), 'micro.json');
    const r = run(process.execPath, ['--expose-gc', path.join(REPO, 'perf', 'run-ts.mjs'), 'perf/check.ts', '--measure-only', '--json', out], 600_000);
    if (r.status !== 0 || !existsSync(out)) throw new Error(`perf/check.ts failed: ${r.stderr}`);
    const j = JSON.parse(readFileSync(out, 'utf8'));
    rmSync(path.dirname(out), { recursive: true, force: true });
    log(`    ${j.probes.map((p) => `${p.id} ${p.perOp}`).join(', ')}`);
    return { micro: j };
  }
  const dir = mkdtempSync(path.join(BENCH_DIR, `siglake-bench-${row.id}-`));
  let srv;
  try {
    if (row.kind === 'ceiling') srv = await startServer(process.execPath, [path.join(HERE, 'servers', 'uws-discard.mjs'), '0'], portLine);
    else if (row.kind === 'ceiling-threads') srv = await startServer(process.execPath, [path.join(HERE, 'servers', 'uws-discard.mjs'), '0', String(row.threads)], portLine);
    else if (row.kind === 'baseline') srv = await startServer(process.execPath, [path.join(HERE, 'servers', 'node-http-baseline.mjs'), '0', path.join(dir, 'baseline.log')], portLine);
    else if (row.kind === 'grpc-ceiling') srv = await startServer(process.execPath, [path.join(HERE, 'servers', 'grpc-discard.mjs'), '0'], portLine);
    else if (row.kind === 'h2-reference') srv = await startServer(process.execPath, [path.join(HERE, 'servers', 'http2-discard.mjs'), '0'], portLine);
    else {
      const flags = ['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--wal-fsync', row.mode, '--log-level', 'info'];
      if (row.workers !== undefined) flags.push('--workers', String(row.workers));
      else if (process.env.SIGLAKE_WORKERS) flags.push('--workers', process.env.SIGLAKE_WORKERS);
      if (row.tenants !== undefined) flags.push('--trust-tenant-header', '--ingest-max-lanes', String(2 * row.tenants), '--wal-max-open-files', String(FD_SETTING));
      const env = row.trace ? { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_ROUND_TRACE: path.join(dir, 'trace') } : {};
      srv = await startServer(process.execPath, [row.cli ?? CLI, ...flags], siglakeLine, env);
    }
    const p4 = row.id === 'siglake-http-batch-1k' && goals.includes('p4');
    const out = await measureServer(row, srv, p4 ? fixedRateP4 : undefined);
    if (row.trace) {
      // The trace files are written as the process shuts down.
      await stopChild(srv.child);
      out.timeline = analyse(path.join(dir, 'trace'), WARMUP * 1000);
      for (const line of describe(out.timeline)) log(`    ${line}`);
    }
    return out;
  } finally {
    if (srv) await stopChild(srv.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * P4: loadgen at a fixed rate of half the row's best run, on the same server,
 * then at a quarter; and the same generator at the same two rates against the
 * uWS discard ceiling, which is the latency floor of the generator itself on
 * this machine (it shares the two cores with the server). The siglake server
 * is stopped before the floor runs: the P4 rows are its last use.
 */
async function fixedRateP4(srv, measured) {
  const best = Math.max(...measured.runs);
  const curve = [];
  for (const fraction of [0.5, 0.25]) {
    const rate = Math.max(1, Math.round(best * fraction));
    log(`    P4: loadgen --rate ${rate} (${fraction} of ${best}) for ${P4_SECS} s`);
    const w0 = await walSyncs(srv.http);
    const r = fixedRate(srv.http, rate);
    const wal = walSyncsDelta(w0, await walSyncs(srv.http));
    log(`      the WAL meanwhile: ${wal.syncs} fdatasyncs, mean ${wal.meanMs.toFixed(3)} ms, ${wal.over5ms} over 5 ms, ${wal.over25ms} over 25 ms; ${wal.checkpoints} checkpoints taking ${wal.checkpointSecs.toFixed(2)} s in all; the compactor busy ${wal.compactorBusySecs.toFixed(1)} s (${wal.compactorRounds} rounds ended)`);
    curve.push({ fraction, target: 'siglake', ...r, wal });
  }
  // The floor is the generator's own latency on a quiet machine: siglake stops
  // first, or its compactor, landing the WAL of the P1 runs, would share the
  // two cores with the generator (it put the floor's p99 at 112 ms once).
  await stopChild(srv.child);
  const floor = await startServer(process.execPath, [path.join(HERE, 'servers', 'uws-discard.mjs'), '0'], portLine);
  try {
    for (const fraction of [0.5, 0.25]) {
      const rate = Math.max(1, Math.round(best * fraction));
      log(`    P4 floor: the same loadgen --rate ${rate} against the uWS discard server`);
      curve.push({ fraction, target: 'uws-discard', ...fixedRate(floor.port, rate) });
    }
  } finally {
    await stopChild(floor.child);
  }
  const half = curve[0];
  return { p4: { ...half, curve } };
}

/** The WAL's fdatasync histogram and checkpoint counters, for what a P4 run saw of the disk. */
async function walSyncs(port) {
  const text = await scrape(port);
  const num = (re) => Number(re.exec(text)?.[1] ?? 0);
  return {
    count: num(/^siglake_wal_fsync_seconds_count(?:\{[^}]*\})? (\d+)/m),
    sum: num(/^siglake_wal_fsync_seconds_sum(?:\{[^}]*\})? ([\d.e+-]+)/m),
    le5ms: num(/^siglake_wal_fsync_seconds_bucket\{le="0.005"\} (\d+)/m),
    le25ms: num(/^siglake_wal_fsync_seconds_bucket\{le="0.025"\} (\d+)/m),
    checkpoints: num(/^siglake_wal_checkpoints_total(?:\{[^}]*\})? (\d+)/m),
    checkpointSecs: num(/^siglake_wal_checkpoint_seconds_total(?:\{[^}]*\})? ([\d.e+-]+)/m),
    compactorRounds: num(/^siglake_compactor_rounds_total(?:\{[^}]*\})? (\d+)/m),
    compactorBusySecs: num(/^siglake_compactor_busy_seconds_total(?:\{[^}]*\})? ([\d.e+-]+)/m),
  };
}

function walSyncsDelta(a, b) {
  const syncs = b.count - a.count;
  return {
    syncs,
    meanMs: syncs > 0 ? ((b.sum - a.sum) * 1000) / syncs : NaN,
    over5ms: syncs - (b.le5ms - a.le5ms),
    over25ms: syncs - (b.le25ms - a.le25ms),
    checkpoints: b.checkpoints - a.checkpoints,
    checkpointSecs: b.checkpointSecs - a.checkpointSecs,
    compactorRounds: b.compactorRounds - a.compactorRounds,
    compactorBusySecs: b.compactorBusySecs - a.compactorBusySecs,
  };
}

/** One fixed-rate `siglake loadgen` run against an HTTP port: its rate and latency figures. */
function fixedRate(port, rate) {
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'siglake-p4-')), 'p4.json');
  const r = run(process.execPath, [CLI, 'loadgen', '--target', `http://127.0.0.1:${port}`, '--rate', String(rate), '--connections', String(CONNS), '--duration', String(P4_SECS), '--warmup', String(P4_WARMUP_SECS), '--threads', String(LOADGEN_THREADS), '--no-progress', '--quiet', '--out', out], (P4_WARMUP_SECS + P4_SECS + 120) * 1000);
  if (!existsSync(out)) throw new Error(`loadgen failed: ${r.stderr}`);
  // Refusals or errors (loadgen exits 1): the rate below counts accepted requests only, so P4's
  // rate part falls short, and its p99 covers the accepted ones alone: said in the log.
  if (r.status !== 0) log(`      loadgen at ${rate}/s exited ${r.status}: it saw refusals or errors; P4's rate counts accepted requests only`);
  const j = JSON.parse(readFileSync(out, 'utf8'));
  rmSync(path.dirname(out), { recursive: true, force: true });
  // Each measured second's p99 and max: a stall shows as one bad second, a
  // generator that cannot keep up as a climb.
  const seconds = (j.timeline ?? []).filter((t) => !t.warmup).map((t) => ({ t: t.t, rps: t.requestsPerSec, p99: t.p99Ms, max: t.maxMs }));
  log(`      achieved ${j.rates.okPerSec}/s accepted, p50 ${j.latencyMs.p50} ms, p99 ${j.latencyMs.p99} ms, p99.9 ${j.latencyMs.p999} ms, unsent ${j.fixedRate.unsent}; p99/max by second: ${seconds.map((x) => `${x.p99}/${x.max}`).join(' ')}`);
  return { rate, exit: r.status, achieved: j.rates.okPerSec, p50: j.latencyMs.p50, p99: j.latencyMs.p99, p999: j.latencyMs.p999, max: j.latencyMs.max, unsent: j.fixedRate.unsent, statusCounts: j.statusCounts, seconds };
}

// ---- main --------------------------------------------------------------------

/** --render FILE: rebuilds the text tables and (with --out) the HTML page from a saved results JSON. */
function renderSaved(file) {
  const j = JSON.parse(readFileSync(file, 'utf8'));
  const entries = j.rows;
  ratios(entries);
  const goals = (j.goals ?? []).map((g) => String(g.id).toLowerCase());
  process.stdout.write(`${table(entries)}\n${goalTable(goalRows(entries, goals, j.meta))}`);
  if (args.out !== undefined) {
    writeFileSync(args.out, chart(entries, goals, j.meta, j.failures ?? {}));
    log(`wrote ${args.out}`);
  }
}

async function main() {
  if (args.list) {
    for (const r of ROWS) console.log(`${r.id.padEnd(30)} ${r.label}`);
    console.log(`goals: ${Object.entries(GOAL_ROWS).map(([g, rows]) => `${g} = ${rows.join(' + ')}`).join('; ')}`);
    return;
  }
  if (args.render !== undefined) return renderSaved(args.render);
  const { rows, goals } = selected();
  // Only the load tools the selected rows use (a machine that measures HTTP alone needs no h2load).
  const tools = [...new Set(rows.flatMap((r) => (r.proto === 'http' ? ['wrk'] : r.proto === 'grpc' ? ['h2load'] : [])))];
  for (const tool of tools) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) throw new Error(`${tool} not found: apt-get install wrk nghttp2-client`);
  }
  const partial = args.only !== undefined && args.only !== 'all';
  if (!args['no-build']) {
    log('building (npx tsc -p tsconfig.json)');
    const b = run('npx', ['tsc', '-p', 'tsconfig.json'], 300_000);
    if (b.status !== 0) throw new Error(`build failed: ${b.stdout}${b.stderr}`);
  }
  const sizes = [...new Set(rows.filter((r) => r.proto !== 'disk' && r.proto !== 'micro').map((r) => r.size))];
  const missing = sizes.filter((s) => !existsSync(path.join(FIXTURES, `logs-${s}.pb`)) || !existsSync(path.join(FIXTURES, `logs-${s}.grpc`)));
  if (missing.length > 0) {
    log(`making fixtures ${missing.join(', ')}`);
    const f = run(process.execPath, [path.join(HERE, 'make-fixtures.mjs'), '--sizes', missing.join(',')], 300_000);
    if (f.status !== 0) throw new Error(`make-fixtures failed: ${f.stderr}`);
  }
  const startedAt = new Date().toISOString();
  log(`native-bench: ${rows.length} rows, ${SECS} s x ${RUNS} runs each (+${WARMUP} s warm-up), ${CONNS} connections, files under ${BENCH_DIR}`);
  const results = {};
  const failures = {};
  for (const row of rows) {
    try {
      results[row.id] = await runRow(row, goals);
    } catch (e) {
      failures[row.id] = e.message;
      log(`    FAILED: ${e.message}`);
    }
  }
  const entries = ROWS.filter((r) => results[r.id] !== undefined).map((r) => ({ ...r, ...results[r.id] }));
  ratios(entries);
  const meta = {
    startedAt,
    host: `${os.hostname()} ${os.cpus().length} cpus ${os.cpus()[0]?.model ?? ''}`.trim(),
    secs: SECS,
    runs: RUNS,
    warmupSecs: WARMUP,
    connections: CONNS,
    streams: STREAMS,
    benchDir: BENCH_DIR,
    node: process.version,
    ...(partial ? { partial: true, only: args.only } : {}),
  };
  const gr = goalRows(entries, goals, meta);
  process.stdout.write(`\n${table(entries)}\n${goalTable(gr)}`);
  mkdirSync(RESULTS, { recursive: true });
  // A partial run (--only) never replaces the full run's latest.* (tracked in git).
  const files = resultFiles(startedAt.replace(/[:.]/g, '-'), partial);
  const json = { meta, fixtures: manifest(), rows: entries, goals: gr, failures };
  writeFileSync(path.join(RESULTS, files.json), JSON.stringify(json, null, 2) + '\n');
  writeFileSync(path.join(RESULTS, files.html), chart(entries, goals, meta, failures));
  copyFileSync(path.join(RESULTS, files.json), path.join(RESULTS, files.latestJson));
  copyFileSync(path.join(RESULTS, files.html), path.join(RESULTS, files.latestHtml));
  log(`\nwrote ${path.relative(REPO, path.join(RESULTS, files.json))} and .html (also ${files.latestJson}, ${files.latestHtml})`);
  if (Object.keys(failures).length > 0) process.exitCode = 1;
}

main().catch((e) => {
  log(`native-bench: ${e.stack ?? e}`);
  process.exit(1);
});
