// Files of a newer release. A segment or journal whose magic is Siglake's but
// whose version is above what this release reads was written by a newer
// Siglake (a downgrade, or a volume moved back). Recovery must refuse it and
// say so: read as damage, a segment was cut to nothing and a journal deleted
// with every acknowledged record it held (docs/wal-format.md, "Versions").

import { crc32c } from '@node-rs/crc32';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

export class WalNewerFormatError extends Error {
  readonly code = 'SIGLAKE_WAL_NEWER_FORMAT';

  constructor(
    readonly path: string,
    readonly what: 'segment' | 'journal',
    readonly version: number,
    readonly supported: number,
  ) {
    super(
      `${path}: a WAL ${what} of format version ${version}, written by a newer release of Siglake (this release reads up to ${supported}); ` +
        'start that release on this WAL, or move the file aside',
    );
    this.name = 'WalNewerFormatError';
  }
}

/**
 * The version in a file's header when its magic is `magic`, the version is
 * above `supported` and the header's CRC (u32 at 28, over bytes 0..28, as both
 * segment and journal headers have it) matches; else null. A version field a
 * bit flip changed fails the CRC: damage, not a newer release.
 */
export function newerVersionOf(path: string, magic: readonly number[], supported: number): number | null {
  const b = Buffer.alloc(32);
  let fd: number;
  try {
    // Not through a link, and never blocking on a FIFO: what is not a regular file is no newer release's.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!fstatSync(fd).isFile() || readSync(fd, b, 0, 32, 0) < 32) return null;
  } finally {
    closeSync(fd);
  }
  for (let i = 0; i < 4; i++) if (b[i] !== magic[i]) return null;
  const version = b.readUInt16LE(4);
  if (version <= supported) return null;
  return crc32c(b.subarray(0, 28)) === b.readUInt32LE(28) ? version : null;
}

/** Throws WalNewerFormatError when `path` was written by a newer release. */
export function refuseNewer(path: string, what: 'segment' | 'journal', magic: readonly number[], supported: number): void {
  const v = newerVersionOf(path, magic, supported);
  if (v !== null) throw new WalNewerFormatError(path, what, v, supported);
}
