// Reading a small WAL file whose name says what it is (a `.sealed` marker, a
// commit journal file, the root's lock) without trusting what stands there.
// A disk holds whatever was put on it: a FIFO under such a name blocked
// `readFileSync` for ever (recovery never ready, `wal verify` never done), a
// symbolic link to /dev/zero read without end, and a directory failed with
// EISDIR and no path. Here the file is opened without following a link and
// without blocking, and anything but a regular file is refused by name.

import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';

/** What a name holds, for messages: `a directory`, `a FIFO`, … */
export function kindOf(st: Pick<Stats, 'isDirectory' | 'isFIFO' | 'isSocket' | 'isSymbolicLink' | 'isCharacterDevice' | 'isBlockDevice'>): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/** A WAL file that is not a regular file, or one too long to read whole. */
export class WalFileTypeError extends Error {
  readonly code = 'SIGLAKE_WAL_NOT_A_FILE';
  constructor(
    readonly path: string,
    readonly why: string,
  ) {
    super(`${path}: ${why}`);
    this.name = 'WalFileTypeError';
  }
}

/** Node reads at most this much into one buffer (2 GiB − 1). */
const MAX_READ = 0x7fff_ffff;

/**
 * Opens the regular file at `path` read-only, for a reader that reads it a
 * piece at a time. Throws WalFileTypeError when the name holds anything else
 * (a symbolic link is not followed, a FIFO does not block); other errors
 * (ENOENT, EIO) as the system gave them. The caller closes `fd`.
 */
export function openRegularFile(path: string): { fd: number; size: number } {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // O_NOFOLLOW on a link: ELOOP. A socket cannot be opened: ENXIO.
    if (code === 'ELOOP') throw new WalFileTypeError(path, 'a symbolic link, not a regular file (not followed)');
    if (code === 'ENXIO') throw new WalFileTypeError(path, 'not a regular file (a socket or a device)');
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new WalFileTypeError(path, `${kindOf(st)}, not a regular file`);
    return { fd, size: st.size };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Reads `len` bytes at `pos` of `fd` into `buf[0, len)`; returns how many
 * it got (fewer only at the end of the file).
 */
export function readAt(fd: number, buf: Uint8Array, len: number, pos: number): number {
  let got = 0;
  while (got < len) {
    const n = readSync(fd, buf, got, Math.min(len - got, MAX_READ), pos + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

/**
 * The bytes of the regular file at `path`. Throws WalFileTypeError when the
 * name holds anything else (a symbolic link is not followed) or more than
 * `maxBytes`; other errors (ENOENT, EIO) as the system gave them.
 */
export function readRegularFile(path: string, maxBytes = MAX_READ): Buffer {
  const { fd, size } = openRegularFile(path);
  try {
    if (size > maxBytes) throw new WalFileTypeError(path, `${size} bytes, more than the ${maxBytes} this reads`);
    const buf = Buffer.allocUnsafe(size);
    const got = readAt(fd, buf, size, 0);
    return got === buf.length ? buf : buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}
