// The three walks on the same bodies, in CPU time: the exact walk, the JS
// fast walk and the native one (native/otlp-walk.c, the addon `npm run
// build` makes), each called as the ingester calls it. Issue 18, P2.
//
//   npm run build && npx tsc -p tsconfig.test.json --noEmit false --outDir perf/results/tmp/build
//   node perf/results/tmp/build/perf/native-walk/run.js [--reps 200]
// (node perf/run-ts.mjs perf/native-walk/run.ts also runs it, but vite's module
// runner turns the exact walk's imported constants into property loads and
// makes it look 2-3x slower than it is in the ingester.)

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import { ROOT_MSG, type Signal } from '../../src/otlp/schema.js';
import { fastWalk, useOtlpWalk, validateExportRequest, validateExportRequestExact } from '../../src/otlp/wire-validator.js';

// Run from the repository root (also as tsc output: node perf/results/tmp/build/perf/native-walk/run.js).
const REPO = process.cwd();
const i = process.argv.indexOf('--reps');
const REPS = i > 0 ? Number(process.argv[i + 1]) : 200;

const choice = useOtlpWalk('native');
if (choice.failure !== undefined) throw new Error(`${choice.failure}: run npm run build first`);

const gen = new FixtureGenerator(20240601, ProtoRoot.load());
const bodies: [string, Signal, Uint8Array][] = [
  ['native-bench logs-256k.pb (loadgen)', 'logs', readFileSync(path.join(REPO, 'native-bench', 'fixtures', 'logs-256k.pb'))],
  ['native-bench traces-256k.pb (loadgen)', 'traces', readFileSync(path.join(REPO, 'native-bench', 'fixtures', 'traces-256k.pb'))],
  ['native-bench logs-1k.pb', 'logs', readFileSync(path.join(REPO, 'native-bench', 'fixtures', 'logs-1k.pb'))],
  ['generator logs 256 KiB', 'logs', gen.request('logs', { targetBytes: 256 * 1024 }).protobuf],
  ['generator traces 256 KiB', 'traces', gen.request('traces', { targetBytes: 256 * 1024 }).protobuf],
  ['generator logs 4 KiB, every value kind', 'logs', gen.request('logs', { targetBytes: 4096, allValueKinds: true }).protobuf],
];

/** CPU µs per call, median of 7 rounds. */
function cpu(reps: number, f: () => number): number {
  const runs: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t0 = process.cpuUsage();
    for (let k = 0; k < reps; k++) f();
    const c = process.cpuUsage(t0);
    runs.push((c.user + c.system) / reps);
  }
  return runs.sort((a, b) => a - b)[3]!;
}

const rows: Record<string, string | number>[] = [];
for (const [label, signal, body] of bodies) {
  const reps = body.length < 16_384 ? REPS * 50 : REPS;
  const root = ROOT_MSG[signal]!;
  const count = validateExportRequestExact(signal, body);
  if (validateExportRequest(signal, body) !== count || fastWalk(root, body) !== count) throw new Error(`${label}: the walks disagree`);
  const exact = cpu(reps / 4, () => validateExportRequestExact(signal, body));
  const js = cpu(reps, () => fastWalk(root, body));
  const native = cpu(reps, () => validateExportRequest(signal, body));
  rows.push({
    body: label,
    bytes: body.length,
    'exact walk us': Number(exact.toFixed(2)),
    'JS fast walk us': Number(js.toFixed(2)),
    'native walk us': Number(native.toFixed(2)),
    'exact MB/s': Math.round(body.length / exact),
    'JS fast MB/s': Math.round(body.length / js),
    'native MB/s': Math.round(body.length / native),
  });
}
console.table(rows);
console.log(`median of 7 rounds, CPU time; node ${process.version}; the native walk through validateExportRequest (--otlp-walk native)`);
