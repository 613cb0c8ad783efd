// A writer shard's round as the commit journal sees it (docs/wal-format.md
// "A round, in order", steps 2 and 5): stage E entries of B bytes, one
// writev, one fdatasync on this thread; R rounds per run, runs of the
// journal lengthened ahead of its entries (the default) and of a journal
// that appends (extendBytes 0, as before) taking turns. Prints the fdatasync
// latency (p50/p90/p99) and rounds per second of each, medians over runs.
//
//   node perf/run-ts.mjs perf/journal-round.ts [--rounds 2000] [--entries 25] [--bytes 1100] [--runs 5] [--dir /path/on/the/wal/disk]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ShardJournal } from '../src/wal/journal.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i === -1 ? dflt : process.argv[i + 1]!;
}
const ROUNDS = Number(arg('--rounds', '2000'));
const ENTRIES = Number(arg('--entries', '25'));
const BYTES = Number(arg('--bytes', '1100'));
const RUNS = Number(arg('--runs', '5'));
const DIR = arg('--dir', os.tmpdir());

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * q) - 1)]!;

const tag = Buffer.from('acme/logs');
// The journal writes what it is given (the records' bytes, as a lane wrote them); their content does not matter here.
const body = Buffer.alloc(BYTES, 0x61);

function run(extendBytes: number): { p50: number; p90: number; p99: number; roundsPerSec: number } {
  const dir = fs.mkdtempSync(path.join(DIR, 'siglake-journal-round-'));
  const j = new ShardJournal({ dir: path.join(dir, '.journal', 'shard-0-of-1'), extendBytes });
  const syncs: number[] = [];
  let offset = 32;
  const t0 = performance.now();
  for (let r = 0; r < ROUNDS; r++) {
    for (let e = 0; e < ENTRIES; e++) {
      j.stage(tag, 1, offset, [body], 0, 1, body.length, 1);
      offset += body.length;
    }
    j.write();
    const s = performance.now();
    j.syncNow();
    syncs.push(performance.now() - s);
  }
  const secs = (performance.now() - t0) / 1000;
  j.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { p50: quantile(syncs, 0.5), p90: quantile(syncs, 0.9), p99: quantile(syncs, 0.99), roundsPerSec: ROUNDS / secs };
}

const rows: Record<string, ReturnType<typeof run>[]> = { extended: [], appending: [] };
for (let i = 0; i < RUNS; i++) {
  const order = i % 2 === 0 ? (['extended', 'appending'] as const) : (['appending', 'extended'] as const);
  for (const k of order) rows[k]!.push(run(k === 'extended' ? 16 * 1024 * 1024 : 0));
}
process.stdout.write(`rounds ${ROUNDS} x ${ENTRIES} entries of ${body.length} B, ${RUNS} runs each, interleaved, in ${DIR} (medians over runs)\n\n`);
process.stdout.write('| journal | fdatasync p50 ms | p90 ms | p99 ms | rounds/s |\n| --- | --- | --- | --- | --- |\n');
for (const [k, rs] of Object.entries(rows)) {
  const m = (f: (r: ReturnType<typeof run>) => number) => median(rs.map(f));
  process.stdout.write(`| ${k} | ${m((r) => r.p50).toFixed(3)} | ${m((r) => r.p90).toFixed(3)} | ${m((r) => r.p99).toFixed(3)} | ${m((r) => r.roundsPerSec).toFixed(0)} |\n`);
}
