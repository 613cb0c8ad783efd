// The bytes real `siglake` processes read (rchar of /proc/self/io), as
// read-bytes-preload.cjs wrote them at their exit.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PRELOAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'read-bytes-preload.cjs');

/** Env for a process whose read bytes are to be read back with readBytes(file). */
export function readBytesEnv(file: string): Record<string, string> {
  return { NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --require ${PRELOAD}`.trim(), SIGLAKE_TEST_READ_BYTES_FILE: file };
}

/** The bytes the process read, as written to `file`; throws when nothing was written (it never exited cleanly). */
export function readBytes(file: string): number {
  const figures = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map(Number);
  if (figures.length === 0) throw new Error(`no read bytes written to ${file}`);
  return Math.max(...figures);
}
