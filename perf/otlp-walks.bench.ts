// The protobuf wire walks side by side on the bodies P2 sends (about 256 KiB
// of generator logs or traces) and on small all-kinds log bodies: the exact
// walk alone (what every body cost before issue 18), the fast walk alone, and
// the entry point the workers call (fast walk, exact walk where it gives up).
//
//   node perf/run-ts.mjs perf/otlp-walks.bench.ts [--rounds 9] [--reps 30]
//
// Time is the process's CPU time (process.cpuUsage), not the wall clock: on a
// shared machine a thread that is not running does not count, so the figures
// hold still when other work runs beside. Walks are interleaved round by
// round; the median of the rounds is printed (and the best, for the spread).

import { FixtureGenerator } from '../src/otlp/fixtures.js';
import { ProtoRoot } from '../src/otlp/proto-root.js';
import { ROOT_MSG, type Signal } from '../src/otlp/schema.js';
import { fastWalk, validateExportRequest, validateExportRequestExact } from '../src/otlp/wire-validator.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROUNDS = arg('--rounds', 9);
const REPS = arg('--reps', 30);

const gen = new FixtureGenerator(20240601, ProtoRoot.load());
const corpora: { label: string; signal: Signal; bodies: Uint8Array[] }[] = [
  { label: 'logs 256 KiB', signal: 'logs', bodies: [] },
  { label: 'traces 256 KiB', signal: 'traces', bodies: [] },
  { label: 'logs 4 KiB all kinds', signal: 'logs', bodies: [] },
];
for (let i = 0; i < 4; i++) {
  corpora[0].bodies.push(gen.request('logs', { targetBytes: 256 * 1024 }).protobuf);
  corpora[1].bodies.push(gen.request('traces', { targetBytes: 256 * 1024 }).protobuf);
}
for (let i = 0; i < 64; i++) corpora[2].bodies.push(gen.request('logs', { targetBytes: 4096, allValueKinds: true }).protobuf);

const walks: [string, (s: Signal, b: Uint8Array) => number][] = [
  ['exact walk (before)', validateExportRequestExact],
  ['fast walk alone', (s, b) => fastWalk(ROOT_MSG[s], b)],
  ['validateExportRequest', validateExportRequest],
];

const rows: Record<string, string | number>[] = [];
for (const c of corpora) {
  const bytes = c.bodies.reduce((n, b) => n + b.length, 0);
  for (const [name, walk] of walks) {
    for (const b of c.bodies) if (walk(c.signal, b) < 0) throw new Error(`${name} gave up on a ${c.label} fixture`);
  }
  const mbps = new Map<string, number[]>(walks.map(([n]) => [n, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, walk] of walks) {
      const t0 = process.cpuUsage();
      let sink = 0;
      for (let k = 0; k < REPS; k++) for (const b of c.bodies) sink += walk(c.signal, b);
      const cpu = process.cpuUsage(t0);
      if (sink < 0) throw new Error('unreachable');
      mbps.get(name)!.push((bytes * REPS) / ((cpu.user + cpu.system) / 1e6) / 1e6);
    }
  }
  const med = (a: number[]) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  const before = med(mbps.get(walks[0][0])!);
  for (const [name] of walks) {
    const a = mbps.get(name)!;
    rows.push({ bodies: c.label, walk: name, 'median MB/s (CPU time)': Math.round(med(a)), 'best MB/s': Math.round(Math.max(...a)), 'vs exact': `${(med(a) / before).toFixed(2)}x` });
  }
}
console.table(rows);
console.log(`node ${process.version}, ${ROUNDS} rounds of ${REPS} passes, CPU time`);
