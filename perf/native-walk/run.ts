// Weighs a native validator (issue 18, P2, option b): builds walk.c (the fast
// walk in C, same action table, same rules) with the system's cc and runs it
// beside the JS walks on the same bodies, in thread/process CPU time.
//
//   npx tsc -p tsconfig.test.json --noEmit false --outDir perf/results/tmp/build
//   node perf/results/tmp/build/perf/native-walk/run.js [--reps 200]
// (node perf/run-ts.mjs perf/native-walk/run.ts also runs it, but vite's module
// runner turns the exact walk's imported constants into property loads and
// makes it look 2-3x slower than it is in the ingester.)
//
// Needs cc. Writes its build and the bodies under perf/results/tmp/native-walk/.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import { ROOT_MSG, type Signal } from '../../src/otlp/schema.js';
import { ACTIONS, fastWalk, validateExportRequestExact } from '../../src/otlp/wire-validator.js';

// Run from the repository root (also as tsc output: node perf/results/tmp/build/perf/native-walk/run.js).
const REPO = process.cwd();
const HERE = path.join(REPO, 'perf', 'native-walk');
const OUT = path.join(REPO, 'perf', 'results', 'tmp', 'native-walk');
const i = process.argv.indexOf('--reps');
const REPS = i > 0 ? Number(process.argv[i + 1]) : 200;
mkdirSync(OUT, { recursive: true });

const exe = path.join(OUT, 'walk');
execFileSync('cc', ['-O2', '-o', exe, path.join(HERE, 'walk.c')], { stdio: 'inherit' });
const actionsFile = path.join(OUT, 'actions.bin');
writeFileSync(actionsFile, new Uint8Array(ACTIONS.buffer, ACTIONS.byteOffset, ACTIONS.byteLength));

const gen = new FixtureGenerator(20240601, ProtoRoot.load());
const bodies: [string, Signal, Uint8Array][] = [
  ['native-bench logs-256k.pb (loadgen)', 'logs', readFileSync(path.join(REPO, 'native-bench', 'fixtures', 'logs-256k.pb'))],
  ['native-bench traces-256k.pb (loadgen)', 'traces', readFileSync(path.join(REPO, 'native-bench', 'fixtures', 'traces-256k.pb'))],
  ['generator logs 256 KiB', 'logs', gen.request('logs', { targetBytes: 256 * 1024 }).protobuf],
  ['generator traces 256 KiB', 'traces', gen.request('traces', { targetBytes: 256 * 1024 }).protobuf],
];

const rows: Record<string, string | number>[] = [];
for (const [label, signal, body] of bodies) {
  const file = path.join(OUT, `${label.replace(/[^a-z0-9]+/gi, '-')}.pb`);
  writeFileSync(file, body);
  const out = execFileSync(exe, [actionsFile, String(ROOT_MSG[signal]), String(REPS), file], { encoding: 'utf8' }).split('\t');
  const cRecords = Number.parseInt(out[1], 10);
  const js = (f: () => number): number => {
    const runs: number[] = [];
    for (let r = 0; r < 7; r++) {
      const t0 = process.cpuUsage();
      for (let k = 0; k < REPS / 4; k++) f();
      const c = process.cpuUsage(t0);
      runs.push((c.user + c.system) / (REPS / 4));
    }
    return runs.sort((a, b) => a - b)[3];
  };
  const exact = js(() => validateExportRequestExact(signal, body));
  const fast = js(() => fastWalk(ROOT_MSG[signal], body));
  const cUs = Number.parseFloat(out[4]);
  if (cRecords !== fastWalk(ROOT_MSG[signal], body)) throw new Error(`${label}: C counted ${cRecords}`);
  rows.push({
    body: label,
    bytes: body.length,
    'exact walk us': Math.round(exact),
    'fast walk us': Math.round(fast),
    'C walk us': Number(cUs.toFixed(1)),
    'exact MB/s': Math.round(body.length / exact),
    'fast MB/s': Math.round(body.length / fast),
    'C MB/s': Math.round(body.length / cUs),
  });
}
console.table(rows);
console.log(`median of 7 rounds, CPU time; node ${process.version}; cc -O2`);
