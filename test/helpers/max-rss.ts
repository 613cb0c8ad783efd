// The peak resident set of real `siglake` processes, read from what
// max-rss-preload.cjs wrote at their exit.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PRELOAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'max-rss-preload.cjs');

/** Env for a process whose peak RSS is to be read back with peakRssBytes(file). */
export function maxRssEnv(file: string): Record<string, string> {
  return { NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --require ${PRELOAD}`.trim(), SIGLAKE_TEST_MAX_RSS_FILE: file };
}

/** The largest peak RSS (bytes) written to `file`; throws when none was written (the process never exited cleanly). */
export function peakRssBytes(file: string): number {
  const figures = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map(Number);
  if (figures.length === 0) throw new Error(`no peak RSS written to ${file}`);
  return Math.max(...figures) * 1024;
}
