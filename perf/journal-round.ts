// A writer shard's round as the commit journal sees it (docs/wal-format.md
// "A round, in order", steps 2 and 5): stage E entries of B bytes, one
// writev, one fdatasync on this thread; R rounds per run. Two kinds of file
// take turns: a new journal file that rounds append to (as before spares),
// and a spare (a file whose blocks are allocated and written: the prefilled
// first spare, which a reused retired file is like), docs/wal-format.md
// "Spares: reused journal files". Prints the fdatasync latency (p50, p90,
// p99) and rounds per second of each, medians over the runs.
//
//   node perf/run-ts.mjs perf/journal-round.ts [--rounds 1500] [--entries 25] [--bytes 1100] [--runs 3] [--dir /path/on/the/wal/disk]
//
// Also the other cost a checkpoint used to have, with --unlink MIB: while a
// worker thread syncs 27.5 KiB rounds in a file, the main thread unlinks a
// file of MIB MiB (as a checkpoint deleted a retired journal file); prints
// the unlink's duration and the longest round fdatasync around it. On a
// file system mounted with `discard` the trim holds every other fdatasync.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ShardJournal } from '../src/wal/journal.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i === -1 ? dflt : process.argv[i + 1]!;
}
const ROUNDS = Number(arg('--rounds', '1500'));
const ENTRIES = Number(arg('--entries', '25'));
const BYTES = Number(arg('--bytes', '1100'));
const RUNS = Number(arg('--runs', '3'));
const DIR = arg('--dir', os.tmpdir());
const UNLINK_MIB = Number(arg('--unlink', '0'));

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;
const median = (xs: number[]) => quantile(xs, 0.5);
const tag = Buffer.from('acme/logs');
// The journal writes what it is given (a lane's record bytes); their content does not matter here.
const body = Buffer.alloc(BYTES, 0x61);

interface Run {
  p50: number;
  p90: number;
  p99: number;
  roundsPerSec: number;
}

/** `spare`: the rounds go to a file made from a prefilled spare; else to a new file they append to. */
async function run(spare: boolean): Promise<Run> {
  const dir = fs.mkdtempSync(path.join(DIR, 'siglake-journal-round-'));
  const j = new ShardJournal({ dir: path.join(dir, 'j'), prefillBytes: spare ? 64 * 1024 * 1024 : 0 });
  // The first file prefills the spare once it holds 1 MiB; the next round moves on into the spare.
  const big = Buffer.alloc(1024 * 1024);
  j.stage(tag, 1, 32, [big], 0, 1, big.length, 1);
  j.write();
  j.syncNow();
  await j.spareSettled();
  const syncs: number[] = [];
  const t0 = performance.now();
  for (let r = 0; r < ROUNDS; r++) {
    for (let e = 0; e < ENTRIES; e++) j.stage(tag, 1, 32, [body], 0, 1, body.length, 1);
    j.write();
    const s = performance.now();
    j.syncNow();
    syncs.push(performance.now() - s);
  }
  const roundsPerSec = ROUNDS / ((performance.now() - t0) / 1000);
  if (j.reused !== spare) throw new Error(`the rounds ran in ${j.reused ? 'a spare' : 'a new file'}`);
  j.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { p50: quantile(syncs, 0.5), p90: quantile(syncs, 0.9), p99: quantile(syncs, 0.99), roundsPerSec };
}

/** The worker thread of --unlink (plain JavaScript: run with eval): 27.5 KiB write + fdatasync rounds until told to stop; posts each latency. */
const SYNC_LOOP = `
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const fd = fs.openSync(workerData.file, 'w');
const buf = Buffer.alloc(27500, 0x62);
let off = 0;
let stop = false;
parentPort.on('message', () => (stop = true));
const step = () => {
  for (let i = 0; i < 20 && !stop; i++) {
    const s = performance.now();
    fs.writeSync(fd, buf, 0, buf.length, off);
    off += buf.length;
    fs.fdatasyncSync(fd);
    parentPort.postMessage(performance.now() - s);
  }
  if (stop) { fs.closeSync(fd); parentPort.close(); } else setImmediate(step);
};
step();
`;

async function unlinkStall(mib: number): Promise<{ unlinkMs: number; maxBefore: number; maxAround: number }> {
  const dir = fs.mkdtempSync(path.join(DIR, 'siglake-unlink-stall-'));
  const victim = path.join(dir, 'retired.jnl');
  const fd = fs.openSync(victim, 'w');
  const mb = Buffer.alloc(1024 * 1024, 0x63);
  for (let i = 0; i < mib; i++) fs.writeSync(fd, mb);
  fs.fdatasyncSync(fd);
  fs.closeSync(fd);
  const w = new Worker(SYNC_LOOP, { eval: true, workerData: { file: path.join(dir, 'live.jnl') } });
  let current: number[] = [];
  w.on('message', (ms: number) => current.push(ms));
  await new Promise((r) => setTimeout(r, 500));
  const before = current;
  current = [];
  const s = performance.now();
  fs.unlinkSync(victim);
  const unlinkMs = performance.now() - s;
  await new Promise((r) => setTimeout(r, 500));
  w.postMessage('stop');
  await new Promise((r) => w.once('exit', r));
  fs.rmSync(dir, { recursive: true, force: true });
  return { unlinkMs, maxBefore: Math.max(...before), maxAround: Math.max(...current) };
}

async function main(): Promise<void> {
  const rows: Record<'new file' | 'spare', Run[]> = { 'new file': [], spare: [] };
  for (let i = 0; i < RUNS; i++) {
    // Take turns at going first.
    for (const k of i % 2 === 0 ? (['new file', 'spare'] as const) : (['spare', 'new file'] as const)) rows[k].push(await run(k === 'spare'));
  }
  process.stdout.write(`${ROUNDS} rounds of ${ENTRIES} entries of ${BYTES} B, ${RUNS} runs each, taking turns, in ${DIR} (medians over runs)\n\n`);
  process.stdout.write('| journal file | fdatasync p50 ms | p90 ms | p99 ms | rounds/s |\n| --- | --- | --- | --- | --- |\n');
  for (const [k, rs] of Object.entries(rows)) {
    const m = (f: (r: Run) => number) => median(rs.map(f));
    process.stdout.write(`| ${k} | ${m((r) => r.p50).toFixed(3)} | ${m((r) => r.p90).toFixed(3)} | ${m((r) => r.p99).toFixed(3)} | ${m((r) => r.roundsPerSec).toFixed(0)} |\n`);
  }
  if (UNLINK_MIB > 0) {
    const u = await unlinkStall(UNLINK_MIB);
    process.stdout.write(
      `\nunlink of a ${UNLINK_MIB} MiB file: ${u.unlinkMs.toFixed(1)} ms; longest 27.5 KiB round fdatasync in the 0.5 s before: ${u.maxBefore.toFixed(2)} ms, in the 0.5 s from the unlink on: ${u.maxAround.toFixed(2)} ms\n`,
    );
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
