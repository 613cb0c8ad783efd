// The scale knob of the reliability suites. By default (CI, `npm test`) every
// suite runs a short version that finishes in about two minutes on two shared
// cores; SIGLAKE_CHAOS=1 (`npm run test:chaos`) runs the long versions. The
// seed of every random choice is printed and can be pinned with SIGLAKE_SEED.

import fs from 'node:fs';
import path from 'node:path';
import { REPO } from '../../helpers/ingester.js';

export const CHAOS = process.env['SIGLAKE_CHAOS'] === '1';

/** `ci` in the short version, `chaos` in the long one; an env var may override either. */
export function scaled(ci: number, chaos: number, envName?: string): number {
  const raw = envName !== undefined ? process.env[envName] : undefined;
  if (raw !== undefined && raw !== '') {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${envName}=${raw}: not a non-negative number`);
    return n;
  }
  return CHAOS ? chaos : ci;
}

/** The base seed of a suite: SIGLAKE_SEED if set, else derived from the time (printed, so a failure can be replayed). */
export function baseSeed(suite: string): number {
  const raw = process.env['SIGLAKE_SEED'];
  const seed = raw !== undefined && raw !== '' ? Number(raw) >>> 0 : (Date.now() ^ (process.pid << 16)) >>> 0;
  console.log(`[${suite}] seed ${seed} (replay with SIGLAKE_SEED=${seed}${CHAOS ? ' SIGLAKE_CHAOS=1' : ''})`);
  return seed;
}

/** Where the suites write their measured figures (JSON) for docs/reliability.md. */
export function figuresDir(): string {
  const dir = process.env['SIGLAKE_RELIABILITY_OUT'] ?? path.join(REPO, 'perf', 'results', 'tmp', 'reliability');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** Writes `figures` as <suite>.json in figuresDir() and prints them on one line. */
export function recordFigures(suite: string, figures: Record<string, unknown>): void {
  const out = { suite, scale: CHAOS ? 'chaos' : 'ci', at: new Date().toISOString(), ...figures };
  const file = path.join(figuresDir(), `${suite}.json`);
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  console.log(`[${suite}] figures ${JSON.stringify(out)}`);
}
