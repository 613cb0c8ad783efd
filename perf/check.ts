// The performance regression check CI runs (`npm run perf:check`, well under a
// minute). A shared 2-core machine makes absolute times meaningless, so every
// probe (perf/check-probes.ts) is timed in short samples alternating with a
// fixed calibration loop and expressed as a ratio to it: the lower quartile
// of each (being descheduled or a GC pause only ever adds time), the median
// over several passes, compared with the committed perf/baseline.json.
// A probe fails only when it is more than
// --threshold (default 2) times slower than its baseline ratio in every one of
// three attempts: noise slows a sample down now and then, a regression slows
// every one. And "slower" is counted against the machine: the median change
// of all the probes (at least 1) multiplies the threshold. Some machines run
// memory, Atomics and Map-heavy code much slower next to the calibration loop
// than the one the baseline was made on (on 2026-12-02 every probe was
// 1.3-2.5x its baseline, the median 1.6x, in this tree and in the one before
// alike); a regression in one component still shows as that probe far off the
// others. A change that slows every probe alike is not what this catches.
//
//   npm run perf:check                     compare with perf/baseline.json
//   npm run perf:baseline                  measure (more passes) and write perf/baseline.json
//   node perf/run-ts.mjs perf/check.ts --measure-only --json out.json
//                                          absolute figures (native-bench's P6/P7 rows),
//                                          with the admission probe's bytes allocated per op
//   options: --only id,id  --threshold 2  --passes 3  --wal-dir DIR (default /dev/shm when present)

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { makeProbes, sink, type Probe } from './check-probes.js';

type HeapNode = { callFrame: { functionName: string }; selfSize: number; children: HeapNode[] };

interface ProbeResult {
  id: string;
  label: string;
  /** Median over passes of (probe time per run) / (calibration time per run), each the lower quartile of its samples. */
  ratio: number;
  nsPerOp: number;
  mbPerSec?: number;
  perOp: string;
  allocBytesPerOp?: number;
}

interface Baseline {
  schema: 1;
  createdAt: string;
  node: string;
  machine: string;
  calibrationNs: number;
  probes: Record<string, { ratio: number; nsPerOp: number }>;
}

const HERE = dirname(fileURLToPath(import.meta.url));
const BASELINE = join(HERE, 'baseline.json');
/** Target time of one timed sample. */
const SAMPLE_NS = 1_000_000;
const ROUNDS = 30;
const WARM_MS = 120;

const { values: args } = parseArgs({
  args: process.argv.slice(2),
  options: {
    'write-baseline': { type: 'boolean' },
    'measure-only': { type: 'boolean' },
    json: { type: 'string' },
    only: { type: 'string' },
    threshold: { type: 'string', default: '2' },
    passes: { type: 'string' },
    'wal-dir': { type: 'string' },
  },
});

// ---- the calibration loop: data-dependent loads, integer multiply, stores ----

const calArr = new Int32Array(4096);
function calibration(): void {
  let h = 0x811c9dc5 | 0;
  for (let i = 0; i < 4096; i++) {
    h ^= calArr[(h >>> 7) & 4095];
    h = Math.imul(h, 0x01000193);
    calArr[i & 4095] = h;
  }
  sink[0] += h & 1;
}

const now = (): bigint => process.hrtime.bigint();

function timeRuns(fn: () => void, n: number): number {
  const t0 = now();
  for (let i = 0; i < n; i++) fn();
  return Number(now() - t0) / n;
}

/** How many runs of `fn` make one sample of about SAMPLE_NS (after warming it for WARM_MS). */
function runsPerSample(fn: () => void): number {
  const end = now() + BigInt(WARM_MS * 1e6);
  let n = 0;
  const t0 = now();
  while (now() < end) {
    fn();
    n++;
  }
  const per = Number(now() - t0) / n;
  return Math.max(1, Math.round(SAMPLE_NS / per));
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The lower quartile: preemption and GC pauses only ever add time, so the low end of the samples is what the code costs. */
const lowQuartile = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 4)];

/**
 * One pass over a probe: ROUNDS of [calibration sample, probe sample], each
 * about SAMPLE_NS; the ratio of their lower quartiles. On a loaded machine a
 * sample is often descheduled part-way, which only ever adds time.
 */
function measureOnce(p: Probe, calRuns: number): { ratio: number; ns: number } {
  const n = runsPerSample(() => p.run());
  const times: number[] = [];
  const cals: number[] = [];
  const run = (): void => p.run();
  for (let r = 0; r < ROUNDS; r++) {
    cals.push(timeRuns(calibration, calRuns));
    times.push(timeRuns(run, n));
  }
  const ns = lowQuartile(times);
  const cal = lowQuartile(cals);
  if (process.env['PERF_CHECK_DEBUG']) process.stderr.write(`${p.id}: cal ${(cal / 1000).toFixed(1)} µs, probe ${(ns / 1000).toFixed(1)} µs, ratio ${(ns / cal).toFixed(3)}\n`);
  return { ratio: ns / cal, ns };
}

function describe(p: Probe, ns: number): Pick<ProbeResult, 'nsPerOp' | 'mbPerSec' | 'perOp'> {
  const nsPerOp = ns / p.ops;
  const mbPerSec = p.bytes > 0 ? p.bytes / 1e6 / (ns / 1e9) : undefined;
  const t = nsPerOp >= 1e6 ? `${(nsPerOp / 1e6).toFixed(2)} ms` : nsPerOp >= 1e3 ? `${(nsPerOp / 1e3).toFixed(2)} µs` : `${nsPerOp.toFixed(1)} ns`;
  return { nsPerOp, ...(mbPerSec !== undefined ? { mbPerSec } : {}), perOp: mbPerSec !== undefined ? `${t}/op, ${Math.round(mbPerSec)} MB/s` : `${t}/op` };
}

/**
 * Bytes per operation allocated under the probe's run() (and what it calls),
 * by the sampling heap profiler with collected objects included. (Frames are
 * matched by name: under vite's module runner they carry no URL.)
 */
async function allocPerOp(p: Probe): Promise<number> {
  const session = new Session();
  session.connect();
  const runs = Math.ceil(200_000 / p.ops);
  for (let i = 0; i < 100; i++) p.run();
  await session.post('HeapProfiler.startSampling', { samplingInterval: 64, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  for (let i = 0; i < runs; i++) p.run();
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  let bytes = 0;
  const walk = (n: HeapNode, inRun: boolean): void => {
    const here = inRun || n.callFrame.functionName === 'run';
    if (here) bytes += n.selfSize;
    for (const c of n.children) walk(c, here);
  };
  walk(profile.head as unknown as HeapNode, false);
  return bytes / (runs * p.ops);
}

async function measureAll(probes: Probe[], passes: number, calRuns: number): Promise<Map<string, { ratio: number; ns: number }>> {
  const per = new Map<string, { ratio: number[]; ns: number[] }>();
  for (let pass = 0; pass < passes; pass++) {
    for (const p of probes) {
      const m = measureOnce(p, calRuns);
      const e = per.get(p.id) ?? { ratio: [], ns: [] };
      e.ratio.push(m.ratio);
      e.ns.push(m.ns);
      per.set(p.id, e);
    }
  }
  return new Map([...per].map(([id, e]) => [id, { ratio: median(e.ratio), ns: median(e.ns) }]));
}

function pad(rows: string[][]): string {
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')).join('\n');
}

async function main(): Promise<number> {
  const threshold = Number(args.threshold);
  const mode = args['write-baseline'] ? 'baseline' : args['measure-only'] ? 'measure' : 'check';
  const passes = Number(args.passes ?? (mode === 'baseline' ? 5 : 3));
  const walDir = args['wal-dir'] ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());
  let baseline: Baseline | undefined;
  if (mode === 'check') {
    if (!existsSync(BASELINE)) {
      process.stderr.write(`perf:check: no ${BASELINE}; run \`npm run perf:baseline\` and commit it\n`);
      return 2;
    }
    baseline = JSON.parse(readFileSync(BASELINE, 'utf8')) as Baseline;
  }
  const t0 = Date.now();
  let probes = await makeProbes({ walDir });
  const only = args.only?.split(',').map((s) => s.trim());
  if (only !== undefined) probes = probes.filter((p) => only.includes(p.id));
  if (baseline !== undefined) {
    const missing = probes.filter((p) => baseline!.probes[p.id] === undefined).map((p) => p.id);
    if (missing.length > 0) process.stderr.write(`perf:check: no baseline for ${missing.join(', ')} (not checked; refresh with npm run perf:baseline)\n`);
  }
  const calRuns = runsPerSample(calibration);
  const calNs = lowQuartile(Array.from({ length: 15 }, () => timeRuns(calibration, calRuns)));
  const measured = await measureAll(probes, passes, calRuns);

  const results: ProbeResult[] = [];
  for (const p of probes) {
    const m = measured.get(p.id)!;
    const r: ProbeResult = { id: p.id, label: p.label, ratio: m.ratio, ...describe(p, m.ns) };
    if (mode === 'measure' && p.allocates === 'measure') r.allocBytesPerOp = await allocPerOp(p);
    results.push(r);
  }

  let failed: string[] = [];
  let machineFactor = 1;
  let limit = threshold;
  const rows: string[][] = [['probe', 'per op', 'ratio', mode === 'check' ? 'baseline' : '', mode === 'check' ? 'change' : '']];
  const changes = new Map<string, number>();
  if (baseline !== undefined) {
    for (const r of results) {
      const b = baseline.probes[r.id];
      if (b !== undefined) changes.set(r.id, r.ratio / b.ratio);
    }
    // The machine's own factor: the median change of every probe, at least 1.
    const sorted = [...changes.values()].sort((a, b) => a - b);
    machineFactor = sorted.length === 0 ? 1 : Math.max(1, sorted[Math.floor(sorted.length / 2)]!);
    limit = threshold * machineFactor;
    // A probe over the limit is measured again, twice; it fails only if every attempt is over.
    let suspects = [...changes].filter(([, c]) => c > limit).map(([id]) => id);
    for (let attempt = 0; attempt < 2 && suspects.length > 0; attempt++) {
      process.stderr.write(`perf:check: ${suspects.join(', ')} over ${limit.toFixed(2)}x; measuring again (attempt ${attempt + 2} of 3)\n`);
      const again = await measureAll(probes.filter((p) => suspects.includes(p.id)), passes, calRuns);
      for (const [id, m] of again) {
        const c = m.ratio / baseline.probes[id].ratio;
        if (c < changes.get(id)!) {
          changes.set(id, c);
          const r = results.find((x) => x.id === id)!;
          const p = probes.find((x) => x.id === id)!;
          Object.assign(r, { ratio: m.ratio, ...describe(p, m.ns) });
        }
      }
      suspects = suspects.filter((id) => changes.get(id)! > limit);
    }
    failed = suspects;
  }
  for (const r of results) {
    const c = changes.get(r.id);
    const b = baseline?.probes[r.id];
    rows.push([
      `${r.id}${r.allocBytesPerOp !== undefined ? ` (${r.allocBytesPerOp.toFixed(2)} B/op allocated)` : ''}`,
      r.perOp,
      r.ratio.toPrecision(4),
      b !== undefined ? b.ratio.toPrecision(4) : '',
      c !== undefined ? `${c.toFixed(2)}x${c > limit ? ' SLOWER' : c < 1 / threshold ? ' faster' : ''}` : '',
    ]);
  }
  process.stdout.write(`${pad(rows)}\n`);
  process.stdout.write(`calibration loop ${(calNs / 1000).toFixed(1)} µs/run; ${passes} passes x ${ROUNDS} rounds per probe; node ${process.version}; ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  if (baseline !== undefined) process.stdout.write(`machine factor ${machineFactor.toFixed(2)} (median change of the probes): a probe fails over ${limit.toFixed(2)}x\n`);

  const out = { node: process.version, machine: `${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}`, calibrationNs: calNs, passes, threshold, machineFactor, limit, probes: results, changes: Object.fromEntries(changes), failed };
  if (args.json !== undefined) writeFileSync(args.json, JSON.stringify(out, null, 2) + '\n');
  if (mode === 'baseline') {
    const b: Baseline = {
      schema: 1,
      createdAt: new Date().toISOString(),
      node: process.version,
      machine: out.machine,
      calibrationNs: Math.round(calNs),
      probes: Object.fromEntries(results.map((r) => [r.id, { ratio: Number(r.ratio.toPrecision(5)), nsPerOp: Number(r.nsPerOp.toPrecision(5)) }])),
    };
    writeFileSync(BASELINE, JSON.stringify(b, null, 2) + '\n');
    process.stdout.write(`wrote ${BASELINE}\n`);
  }
  for (const p of probes) await p.close?.();
  if (mode === 'check') {
    if (baseline !== undefined && baseline.node.split('.')[0] !== process.version.split('.')[0]) {
      process.stdout.write(`note: baseline made on node ${baseline.node}, this is ${process.version}\n`);
    }
    if (failed.length > 0) {
      process.stdout.write(
        `perf:check FAILED: ${failed.join(', ')} more than ${limit.toFixed(2)}x (${threshold}x the machine factor ${machineFactor.toFixed(2)}) slower than perf/baseline.json relative to the calibration loop, in 3 attempts\n`,
      );
      return 1;
    }
    process.stdout.write(`perf:check passed: ${results.length} probes within ${limit.toFixed(2)}x (${threshold}x the machine factor ${machineFactor.toFixed(2)}) of perf/baseline.json\n`);
  }
  if (sink[0] === -1) process.stdout.write('\n');
  return 0;
}

process.exitCode = await main();
