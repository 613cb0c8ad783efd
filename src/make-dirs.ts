// `mkdir -p` that always ends. Node's own (`mkdir(path, { recursive: true })`,
// sync and async, Node 20) never returns for a path under /proc: mkdir there
// fails with ENOENT, which its loop reads as "a parent is missing", makes the
// parent (which exists), and tries again, at 100 % of a core, deaf to SIGTERM
// (`--wal-dir /proc/x/wal` hung `siglake ingest` that way). These walk up to
// the closest directory that exists, then make each missing one below it with
// a plain mkdir, so any refusal is thrown as the error it is.

import { mkdirSync, statSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';

function code(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException).code;
}

/** The error mkdir gives for a path that is a file. */
function exists(path: string): Error {
  const e = new Error(`EEXIST: file already exists, mkdir '${path}'`) as NodeJS.ErrnoException;
  e.code = 'EEXIST';
  e.syscall = 'mkdir';
  e.path = path;
  return e;
}

/** Makes `dir` and the directories above it that are missing. */
export function makeDirsSync(dir: string): void {
  const target = resolve(dir);
  const missing: string[] = [];
  for (let at = target; ; ) {
    try {
      const st = statSync(at);
      if (!st.isDirectory() && at === target) throw exists(at);
      break; // a file above: the mkdir below it fails with ENOTDIR
    } catch (e) {
      if (code(e) !== 'ENOENT') throw e;
      missing.push(at);
      const up = dirname(at);
      if (up === at) break;
      at = up;
    }
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    try {
      mkdirSync(missing[i]!, 0o755);
    } catch (e) {
      // Made meanwhile by someone else: fine when it is a directory.
      if (code(e) === 'EEXIST' && statSync(missing[i]!).isDirectory()) continue;
      throw e;
    }
  }
}

/** makeDirsSync's asynchronous twin. */
export async function makeDirs(dir: string): Promise<void> {
  const target = resolve(dir);
  const missing: string[] = [];
  for (let at = target; ; ) {
    try {
      const st = await stat(at);
      if (!st.isDirectory() && at === target) throw exists(at);
      break;
    } catch (e) {
      if (code(e) !== 'ENOENT') throw e;
      missing.push(at);
      const up = dirname(at);
      if (up === at) break;
      at = up;
    }
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    try {
      await mkdir(missing[i]!, 0o755);
    } catch (e) {
      if (code(e) === 'EEXIST' && (await stat(missing[i]!)).isDirectory()) continue;
      throw e;
    }
  }
}
