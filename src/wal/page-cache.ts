// --wal-drop-synced-pages: once a segment's bytes are durable, its pages
// leave the page cache. A WAL segment is written once and read again only by
// the compactor (and by recovery, `wal dump`, `wal verify`), so keeping its
// pages cached buys little, while every page a segment keeps is one the
// kernel must find anew for the next append (measured in docs/performance.md,
// "Releasing synced WAL pages": on the VMs this project is measured on that
// is most of a 256 KiB request's cost). PostgreSQL gives the same advice for
// its WAL segments.
//
// The segment files' FileOps get an fdatasync that, in native code, reads the
// file's size, fdatasyncs, and advises POSIX_FADV_DONTNEED for the whole
// pages below that size (native/page-cache.c): what the sync made durable and
// nothing written since; the last, partly written page stays for the next
// append. Failures are the fdatasync's, as errors shaped like node:fs's.
// The commit journal's files are not dropped: they are reused as spares, and
// a write into an uncached page of an existing file reads it from disk first.

import { getSystemErrorMap } from 'node:util';
import { loadAddon } from '../native/addon.js';
import { NODE_FILE_OPS, type FileOps } from './file-ops.js';

/** The FileOps for segment files with --wal-drop-synced-pages, or `base` and why when the addon did not load. */
export function dropSyncedPagesOps(base: FileOps = NODE_FILE_OPS): { ops: FileOps; failure?: string } {
  const r = loadAddon();
  if (r.addon === null) return { ops: base, failure: r.failure };
  const addon = r.addon;
  return {
    ops: Object.freeze({
      ...base,
      fdatasyncSync: (fd: number) => {
        const errno = addon.fdatasyncDropSync(fd);
        if (errno !== 0) throw syscallError(errno, 'fdatasync');
      },
      fdatasync: (fd: number) =>
        new Promise<void>((resolve, reject) => addon.fdatasyncDrop(fd, (errno) => (errno === 0 ? resolve() : reject(syscallError(errno, 'fdatasync'))))),
    }),
  };
}

/** An Error as node:fs throws it for `syscall` failing with `errno` (positive): code, errno (negative), syscall. */
export function syscallError(errno: number, syscall: string): NodeJS.ErrnoException {
  const [code, message] = getSystemErrorMap().get(-errno) ?? [`E${errno}`, 'unknown error'];
  return Object.assign(new Error(`${code}: ${message}, ${syscall}`), { errno: -errno, code, syscall });
}
