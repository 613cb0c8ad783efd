// A checkpoint's write of a segment's deferred runs in native code
// (native/deferred-runs.c, docs/wal-format.md "Deferred lane writes"): the
// records a lane left in the commit journal are read back, written to their
// places in the segment and fdatasynced on libuv's thread pool, in one call
// from the worker and one callback to it. In JavaScript the same is a
// readSync a run and the segment's pwritev on the worker's own thread,
// between its rounds; at 10,000 lanes that was most of a checkpoint's cost to
// the rounds (docs/performance.md, "The checkpoint's deferred runs off the
// writer's thread"). Without the addon the lane writer does it in
// JavaScript, as before.

import { loadAddon } from '../native/addon.js';
import { syscallError } from './page-cache.js';

/**
 * Writes `count` runs, four numbers each in `runs` (journal file number,
 * offset there, length, offset in the segment; in segment order), from the
 * journal to `segment`, then fdatasyncs it. Rejects with an Error shaped like
 * node:fs's, its `syscall` the step that failed: `open` (the segment),
 * `read` (a journal file: opening or reading it, a short read is EIO),
 * `write` or `fdatasync`.
 */
export type RunsWriter = (segment: string, runs: Uint32Array, count: number) => Promise<void>;

const SYSCALL = ['', 'open', 'read', 'read', 'write', 'fdatasync'] as const;
const SYNC = 1;
const DROP = 2;

/**
 * The native RunsWriter for a shard's journal (`journalPath` names its file
 * `n`), dropping the synced pages with `dropPages`; null and why when the
 * addon did not load or is older than this code.
 */
export function nativeRunsWriter(journalPath: (file: number) => string, dropPages: boolean): { writer: RunsWriter | null; failure?: string } {
  const r = loadAddon();
  if (r.addon === null) return { writer: null, failure: r.failure };
  const addon = r.addon;
  if (typeof addon.writeRuns !== 'function') return { writer: null, failure: 'native addon: no writeRuns (rebuild it: npm run build)' };
  const flags = SYNC | (dropPages ? DROP : 0);
  // The journal files of one call, by number (a lane's runs of a checkpoint span a few).
  const files: number[] = [];
  return {
    writer: (segment, runs, count) => {
      const spec = runs.slice(0, count * 4);
      files.length = 0;
      for (let k = 0; k < count; k++) {
        const file = spec[k * 4]!;
        let i = files.lastIndexOf(file);
        if (i < 0) i = files.push(file) - 1;
        spec[k * 4] = i;
      }
      const journals = files.map(journalPath);
      return new Promise<void>((resolve, reject) =>
        addon.writeRuns(segment, journals, spec, flags, (errno, op) => (errno === 0 ? resolve() : reject(syscallError(errno, SYSCALL[op] ?? 'write')))),
      );
    },
  };
}
