#!/usr/bin/env node
// Runs one TypeScript file of perf/ on Node 20, which has no TypeScript loader:
// vite's module runner transpiles it (and the src/ modules it imports) on the
// fly, as the bench files' own "Run:" lines do. Arguments after the file are
// passed on in process.argv.
//
//   node [--expose-gc] perf/run-ts.mjs perf/check.ts --json out.json

import path from 'node:path';
import { runnerImport } from 'vite';

const [file, ...rest] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: node perf/run-ts.mjs FILE.ts [args...]\n');
  process.exit(2);
}
const abs = path.resolve(file);
process.argv = [process.argv[0], abs, ...rest];
await runnerImport(abs);
