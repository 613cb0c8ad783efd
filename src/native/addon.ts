// Siglake's native addon (native/*.c, built by `npm run build` with node-gyp
// into native/build/Release/siglake_native.node): the OTLP fast walk
// (./otlp-walk.ts), the WAL's fdatasync-and-drop (src/wal/page-cache.ts) and
// the checkpoint's write of deferred runs (src/wal/native-runs.ts).
// Optional: when it was not built or does not load, loadAddon() says why and
// each user falls back (the JavaScript walk; pages left to the kernel).

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** What native/addon.c exports. */
export interface Addon {
  init(actions: Int32Array, anyValue: number, maxAnyDepth: number, stackCap: number, layout: Int32Array): boolean;
  walk(rootMsg: number, bytes: Uint8Array): number;
  /** fdatasync, then drop the pages it made durable, on libuv's pool; the callback gets an errno (0: done). */
  fdatasyncDrop(fd: number, callback: (errno: number) => void): void;
  /** The same on this thread; returns the errno (0: done). */
  fdatasyncDropSync(fd: number): number;
  /**
   * A checkpoint's write of a segment's deferred runs (native/deferred-runs.c)
   * on libuv's pool: `runs` holds four numbers a run (index into `journals`,
   * offset there, length, offset in `segment`); flags 1 fdatasync, 2 drop
   * the synced pages. The callback gets an errno (0: done) and the step that
   * failed (1 open segment, 2 open journal, 3 read, 4 write, 5 fdatasync).
   */
  writeRuns(segment: string, journals: string[], runs: Uint32Array, flags: number, callback: (errno: number, op: number) => void): void;
  /** Every thread of this process to SCHED_IDLE (native/thread-sched.c); returns the first errno (0: done). */
  setProcessIdle(): number;
  /** The calling thread to SCHED_IDLE; returns the errno (0: done). */
  setThreadIdle(): number;
  /** The calling thread's scheduling policy (Linux's SCHED_* number: 0 SCHED_OTHER, 5 SCHED_IDLE). */
  threadPolicy(): number;
}

export type AddonLoad = { addon: Addon; failure?: undefined } | { addon: null; failure: string };

const ADDON_FILE = path.join('native', 'build', 'Release', 'siglake_native.node');

/**
 * Where `npm run build` leaves the addon: native/build/Release of the
 * checkout, two levels above this module (src/native or dist/native), or
 * further up when this module was compiled elsewhere in the tree (perf/'s
 * tsc output).
 */
export const ADDON_PATH = ((): string => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const near = path.resolve(here, '..', '..', ADDON_FILE);
  for (let dir = here; ; ) {
    const candidate = path.join(dir, ADDON_FILE);
    if (existsSync(candidate)) return candidate;
    const up = path.dirname(dir);
    if (up === dir) return near;
    dir = up;
  }
})();

/** Tests point the loader elsewhere to see a missing addon (SIGLAKE_TEST_HOOKS only). */
function addonPath(): string {
  const p = process.env['SIGLAKE_TEST_HOOKS'] === '1' ? process.env['SIGLAKE_TEST_NATIVE_PATH'] : undefined;
  return p !== undefined && p !== '' ? p : ADDON_PATH;
}

const loaded = new Map<string, AddonLoad>();

/** Loads the addon (once per thread and file), or says why it did not load. */
export function loadAddon(file: string = addonPath()): AddonLoad {
  let r = loaded.get(file);
  if (r === undefined) {
    try {
      r = { addon: createRequire(import.meta.url)(file) as Addon };
    } catch (e) {
      const why = (e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' ? 'not built (npm run build builds it; it needs a C compiler, make and python3)' : (e as Error).message.split('\n')[0]!;
      r = { addon: null, failure: `native addon ${path.basename(file)}: ${why}` };
    }
    loaded.set(file, r);
  }
  return r;
}
