// Second by second under P5's load, what each thread of the ingester is busy
// with beside the requests answered and the checkpoints: the acceptor (the
// main thread), the writer worker (the busiest other thread), libuv's pool
// (the rest: the checkpoint's syncs), wrk, and the machine's idle time, all
// as % of one core from /proc (utime + stime). It shows whether a slow
// second is short of CPU (idle near 0) or waits on the disk (idle left, the
// writer not busy). The load is perf/checkpoint-timeline.sh's: TENANTS lanes
// made with one request each, then wrk, 64 connections, 1 KiB bodies,
// `batch`, --wal-max-open-files 512, the compactor off; the first 10 s of
// wrk are left out (the creation checkpoint).
//
//   node perf/thread-timeline.mjs CLI [TENANTS=10000] [SECS=30]
//   INGEST_FLAGS="--wal-rounds-in-flight 2" node perf/thread-timeline.mjs dist/cli.js
//   INGEST_ENV="SIGLAKE_TEST_HOOKS=1 SIGLAKE_TEST_CHECKPOINT_PARALLEL=4" node perf/thread-timeline.mjs dist/cli.js
// The last line is the means over the window.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

const [cli, tenantsArg = '10000', secsArg = '30'] = process.argv.slice(2);
if (cli === undefined) {
  console.error('usage: node perf/thread-timeline.mjs CLI [TENANTS=10000] [SECS=30]');
  process.exit(2);
}
const tenants = Number(tenantsArg);
const secs = Number(secsArg);
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const body = path.join(here, 'native-bench', 'fixtures', 'logs-1k.pb');
const dir = mkdtempSync(path.join(tmpdir(), 'siglake-thread-timeline-'));
const port = 20000 + Math.floor(Math.random() * 20000);
const env = { ...process.env, SIGLAKE_COMPACTOR: 'false' };
for (const kv of (process.env.INGEST_ENV ?? '').split(/\s+/).filter(Boolean)) {
  const i = kv.indexOf('=');
  env[kv.slice(0, i)] = kv.slice(i + 1);
}
const flags = ['ingest', '--http-listen', `127.0.0.1:${port}`, '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--wal-fsync', 'batch', '--log-level', 'warn'];
if (tenants > 0) flags.push('--trust-tenant-header', '--ingest-max-lanes', String(2 * tenants), '--wal-max-open-files', '512');
flags.push(...(process.env.INGEST_FLAGS ?? '').split(/\s+/).filter(Boolean));
const ingester = spawn(process.execPath, [cli, ...flags], { env, stdio: 'ignore' });
const stop = () => {
  ingester.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', stop);

const base = `http://127.0.0.1:${port}`;
async function metrics() {
  const text = await (await fetch(`${base}/metrics`)).text();
  let requests = 0;
  let checkpoints = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('siglake_ingest_requests_total')) requests += Number(line.slice(line.lastIndexOf(' ') + 1));
    else if (line.startsWith('siglake_wal_checkpoints_total')) checkpoints += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return { requests, checkpoints };
}
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${base}/readyz`)).ok) break;
  } catch {
    // not listening yet
  }
  if (i > 150) throw new Error('the ingester did not become ready');
  await sleep(200);
}
if (tenants > 0) {
  const r = spawnSync(process.execPath, [cli, 'loadgen', '--target', base, '--tenants', String(tenants), '--tenant-prefix', 't', '--requests', String(tenants), '--connections', '64', '--threads', '1', '--body-bytes', '1024', '--bodies', '2', '--duration', '0', '--no-progress', '--quiet'], { stdio: 'ignore' });
  if (r.status !== 0) throw new Error('loadgen warm-up failed');
}
const wrk = spawn('wrk', ['-t1', '-c64', `-d${secs + 12}s`, '-s', path.join(here, 'native-bench', 'wrk-post.lua'), `${base}/v1/logs`, '--', body, String(tenants)], { stdio: 'ignore' });
await sleep(10_000);

/** utime + stime (clock ticks) of each thread of `pid`. */
function threadTicks(pid) {
  const out = new Map();
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
      out.set(Number(t), Number(fields[11]) + Number(fields[12]));
    } catch {
      // the thread ended
    }
  }
  return out;
}
function machine() {
  const v = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return { total: v.reduce((a, b) => a + b, 0), idle: v[3] + v[4] };
}
const cores = Number(spawnSync('nproc', { encoding: 'utf8' }).stdout.trim()) || 1;
const TICK = 100; // USER_HZ: ticks a second, so ticks in one second are % of a core
let a = threadTicks(ingester.pid);
let w = threadTicks(wrk.pid);
let m = machine();
let r = await metrics();
const rows = [];
for (let s = 1; s <= secs; s++) {
  await sleep(1000);
  const a2 = threadTicks(ingester.pid);
  const w2 = threadTicks(wrk.pid);
  const m2 = machine();
  const r2 = await metrics();
  const d = [...a2].map(([t, v]) => [t, v - (a.get(t) ?? 0)]);
  const acceptor = d.find(([t]) => t === ingester.pid)?.[1] ?? 0;
  const others = d.filter(([t]) => t !== ingester.pid).map(([, v]) => v).sort((x, y) => y - x);
  const row = {
    requests: r2.requests - r.requests,
    acceptor: (acceptor * 100) / TICK,
    writer: ((others[0] ?? 0) * 100) / TICK,
    pool: (others.slice(1).reduce((x, y) => x + y, 0) * 100) / TICK,
    wrk: (([...w2.values()].reduce((x, y) => x + y, 0) - [...w.values()].reduce((x, y) => x + y, 0)) * 100) / TICK,
    idle: (100 * cores * (m2.idle - m.idle)) / Math.max(1, m2.total - m.total),
  };
  rows.push(row);
  console.log(
    `${String(s).padStart(3)} s  ${String(row.requests).padStart(6)} req  checkpoints ${r2.checkpoints}  acceptor ${row.acceptor.toFixed(0).padStart(3)} %  writer ${row.writer.toFixed(0).padStart(3)} %  pool ${row.pool.toFixed(0).padStart(3)} %  wrk ${row.wrk.toFixed(0).padStart(3)} %  machine idle ${row.idle.toFixed(0).padStart(3)} % of ${cores * 100}`,
  );
  [a, w, m, r] = [a2, w2, m2, r2];
}
const mean = (k) => rows.reduce((x, row) => x + row[k], 0) / rows.length;
console.log(
  `mean: ${mean('requests').toFixed(0)} req/s, acceptor ${mean('acceptor').toFixed(0)} %, writer ${mean('writer').toFixed(0)} %, pool ${mean('pool').toFixed(0)} %, wrk ${mean('wrk').toFixed(0)} %, machine idle ${mean('idle').toFixed(0)} % (checkpoints ${r.checkpoints} since the start)`,
);
wrk.kill('SIGTERM');
process.exit(0);
