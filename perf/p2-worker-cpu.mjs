#!/usr/bin/env node
// What one 256 KiB request costs each thread of the ingester, in CPU time: the
// P2 row's load (wrk, 64 connections, native-bench/fixtures/logs-256k.pb, one
// tenant) against `siglake ingest`, with the CPU time of every thread read
// from /proc/<pid>/task/*/stat before and after each run. On a shared, noisy
// machine the requests/s of a row move with whatever else runs, and the disk's
// sync time with whatever else writes; the CPU time a thread spends per
// request does not, and the busiest thread's figure bounds what one lane can
// reach: 262,144 bytes / (its CPU per request) is the lane's ceiling in MB/s
// were that thread never to wait.
//
//   node perf/p2-worker-cpu.mjs [--compare DIR] [--secs 5] [--runs 3] [--fsync batch] [--compactor off]
//
// DIR is another checkout with its dist/ built; its runs are interleaved with
// this tree's, and medians per thread are printed side by side.
//
// Also the disk's side: bytes the block device under the WAL wrote
// (/sys/class/block/<dev>/stat, sectors written) over each run, against the
// WAL bytes the ingester wrote (siglake_wal_bytes_written_total). A journaled
// round puts every byte on the disk twice (journal, then segment); a direct
// round (docs/wal-format.md "Direct rounds") once. Other writers on the
// machine count too (the compactor's Parquet files among them: `--compactor
// off` leaves them out): read it as a ratio between trees in the same run.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const { values: args } = parseArgs({
  options: { compare: { type: 'string' }, secs: { type: 'string', default: '5' }, runs: { type: 'string', default: '3' }, fsync: { type: 'string', default: 'batch' }, compactor: { type: 'string', default: 'on' } },
});
const SECS = Number(args.secs);
const RUNS = Number(args.runs);
const BODY = path.join(REPO, 'native-bench', 'fixtures', 'logs-256k.pb');
const LUA = path.join(REPO, 'native-bench', 'wrk-post.lua');
const TICK = 100; // USER_HZ on Linux
const BODY_BYTES = statSync(BODY).size;
const trees = [['this tree', path.join(REPO, 'dist', 'cli.js')]];
if (args.compare) trees.push([`--compare ${args.compare}`, path.join(path.resolve(args.compare), 'dist', 'cli.js')]);

/** CPU ticks (utime + stime) of every thread of `pid`, by thread name and tid. */
function threads(pid) {
  const out = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, { name, ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      // the thread ended
    }
  }
  return out;
}

function start(cli, dir) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--wal-fsync', args.fsync, '--log-level', 'info', ...(args.compactor === 'off' ? ['--compactor=false'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    let port;
    child.stdout.on('data', (d) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          const j = JSON.parse(line);
          if (j.msg === 'listening') port = j.http;
          if (j.msg === 'ready' && port !== undefined) resolve({ child, port });
        } catch {
          // not JSON
        }
      }
    });
    child.on('exit', (code) => reject(new Error(`ingester exited ${code}`)));
  });
}

/** Sectors (512 bytes) written by the block device holding `dir`, or NaN when it cannot be read. */
function sectorsWritten(dir) {
  const src = spawnSync('df', ['--output=source', dir], { encoding: 'utf8' }).stdout.trim().split('\n').pop() ?? '';
  try {
    return Number(readFileSync(`/sys/class/block/${path.basename(src)}/stat`, 'utf8').trim().split(/\s+/)[6]);
  } catch {
    return NaN;
  }
}

async function walBytes(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(/^siglake_wal_bytes_written_total (\S+)$/m.exec(text)?.[1] ?? NaN);
}

function wrk(port, secs) {
  const r = spawnSync('wrk', ['-t1', '-c64', `-d${secs}s`, '--timeout', '10s', '-s', LUA, `http://127.0.0.1:${port}/v1/logs`, '--', BODY, '0'], { encoding: 'utf8' });
  const total = Number(/(\d+) requests in/.exec(r.stdout)?.[1] ?? NaN);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(r.stdout)?.[1] ?? 0);
  return { ok: total - non2xx, rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(r.stdout)?.[1] ?? NaN) };
}

const results = new Map(trees.map(([label]) => [label, []]));
for (let run = 0; run < RUNS; run++) {
  for (const [label, cli] of trees) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'siglake-p2cpu-'));
    const { child, port } = await start(cli, dir);
    try {
      wrk(port, 1); // warm-up
      const before = threads(child.pid);
      const disk0 = sectorsWritten(dir);
      const wal0 = await walBytes(port);
      const w = wrk(port, SECS);
      const after = threads(child.pid);
      // Bytes still in the page cache when the load stops are written within the next checkpoint.
      const wal1 = await walBytes(port);
      await new Promise((r) => setTimeout(r, 11_000));
      const disk1 = sectorsWritten(dir);
      const per = {};
      for (const [tid, t] of after) {
        const d = t.ticks - (before.get(tid)?.ticks ?? 0);
        if (d > 0) per[`${t.name}#${tid}`] = d;
      }
      // Name the threads by role: the busiest worker-like thread is the lane's writer.
      const byName = Object.entries(per).sort((a, b) => b[1] - a[1]);
      const main = byName.find(([k]) => k.startsWith('node#') && Number(k.split('#')[1]) === child.pid);
      const others = byName.filter(([k]) => k !== main?.[0]);
      const busiest = others[0];
      const sample = {
        rps: w.rps,
        ok: w.ok,
        mainUsPerReq: main ? (main[1] * 1e6) / TICK / w.ok : 0,
        busiestName: busiest?.[0] ?? '-',
        busiestUsPerReq: busiest ? (busiest[1] * 1e6) / TICK / w.ok : 0,
        totalUsPerReq: (Object.values(per).reduce((a, b) => a + b, 0) * 1e6) / TICK / w.ok,
        diskPerWal: ((disk1 - disk0) * 512) / (wal1 - wal0),
      };
      results.get(label).push(sample);
      process.stderr.write(`${label} run ${run + 1}: ${w.rps.toFixed(0)} req/s; main ${sample.mainUsPerReq.toFixed(0)} us/req, busiest other (${sample.busiestName}) ${sample.busiestUsPerReq.toFixed(0)} us/req, all ${sample.totalUsPerReq.toFixed(0)} us/req; disk bytes per WAL byte ${sample.diskPerWal.toFixed(2)}\n`);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

const med = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
console.log(`\n${RUNS} runs of ${SECS} s, --wal-fsync ${args.fsync}, medians (CPU time per accepted 256 KiB request)`);
console.log('tree'.padEnd(40), 'req/s'.padStart(8), 'acceptor us'.padStart(12), 'writer us'.padStart(10), 'all us'.padStart(8), 'writer-bound MB/s'.padStart(18), 'disk/WAL'.padStart(9));
for (const [label, rs] of results) {
  const w = med(rs.map((r) => r.busiestUsPerReq));
  console.log(label.padEnd(40), med(rs.map((r) => r.rps)).toFixed(0).padStart(8), med(rs.map((r) => r.mainUsPerReq)).toFixed(0).padStart(12), w.toFixed(0).padStart(10), med(rs.map((r) => r.totalUsPerReq)).toFixed(0).padStart(8), (BODY_BYTES / w).toFixed(0).padStart(18), med(rs.map((r) => r.diskPerWal)).toFixed(2).padStart(9));
}
