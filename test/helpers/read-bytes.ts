// The bytes real `siglake` processes read (rchar of /proc/self/io), as
// read-bytes-preload.cjs wrote them at their exit.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { largestFigure, preloadEnv } from './max-rss.js';

const PRELOAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'read-bytes-preload.cjs');

/** Env for a process whose read bytes are to be read back with readBytes(file). */
export function readBytesEnv(file: string): Record<string, string> {
  return preloadEnv(PRELOAD, 'SIGLAKE_TEST_READ_BYTES_FILE', file);
}

/** The bytes the process read, as written to `file`; throws when nothing was written (it never exited cleanly). */
export function readBytes(file: string): number {
  return largestFigure(file, 'read bytes');
}
