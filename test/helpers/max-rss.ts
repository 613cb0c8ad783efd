// The peak resident set of real `siglake` processes, read from what
// max-rss-preload.cjs wrote at their exit.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PRELOAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'max-rss-preload.cjs');

/** Env that makes a child process `--require` `preload`, which writes its figure to `file` (named by `envVar`). */
export function preloadEnv(preload: string, envVar: string, file: string): Record<string, string> {
  return { NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --require ${preload}`.trim(), [envVar]: file };
}

/** The largest figure a preload wrote to `file`, one a line; throws when none was written (the process never exited cleanly). */
export function largestFigure(file: string, what: string): number {
  const figures = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map(Number);
  if (figures.length === 0) throw new Error(`no ${what} written to ${file}`);
  return Math.max(...figures);
}

/** Env for a process whose peak RSS is to be read back with peakRssBytes(file). */
export function maxRssEnv(file: string): Record<string, string> {
  return preloadEnv(PRELOAD, 'SIGLAKE_TEST_MAX_RSS_FILE', file);
}

/** The largest peak RSS (bytes) written to `file`; throws when none was written (the process never exited cleanly). */
export function peakRssBytes(file: string): number {
  return largestFigure(file, 'peak RSS') * 1024;
}
