// The file-system calls the WAL writer makes, behind one small interface so
// that tests can inject ENOSPC or EIO with a faulty implementation. The
// default goes straight to node:fs. Every write is positional (pwritev): the
// writer knows its offsets, and a failed write is cut back with ftruncate.

import {
  close,
  closeSync,
  write,
  fdatasync,
  fsync,
  open,
  fdatasyncSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  renameSync,
  unlinkSync,
  writevSync,
} from 'node:fs';

/** Buffers one writev may take (Linux IOV_MAX). */
export const IOV_MAX = 1024;

export interface FileOps {
  /** `wx` creates exclusively for writing; `r+` reopens an existing segment for writing. */
  open(path: string, flags: 'wx' | 'r+'): number;
  /** One pwritev at `position`; returns the bytes written, which may be fewer than asked. */
  writev(fd: number, buffers: readonly Uint8Array[], position: number): number;
  fdatasyncSync(fd: number): void;
  /** fdatasync on the libuv thread pool, so the syncs of many files run in parallel. */
  fdatasync(fd: number): Promise<void>;
  ftruncate(fd: number, length: number): void;
  close(fd: number): void;
  rename(from: string, to: string): void;
  unlink(path: string): void;
  /** Makes one directory level; throws EEXIST when it exists and ENOENT when its parent does not. */
  mkdir(path: string): void;
  /** fsync of a directory, so that entries made or renamed in it survive a crash. */
  fsyncDir(path: string): void;
  /** fsyncDir on the libuv thread pool (a checkpoint's); without it, fsyncDirAsync() calls fsyncDir. */
  fsyncDirAsync?(path: string): Promise<void>;
  /** One pwrite at `position` on the libuv thread pool (a journal file's prefill); without it, writeAsync() calls writev. */
  writeAsync?(fd: number, buffer: Uint8Array, position: number): Promise<number>;
}

export const NODE_FILE_OPS: FileOps = Object.freeze({
  open: (path: string, flags: 'wx' | 'r+') => openSync(path, flags, 0o644),
  writev: (fd: number, buffers: readonly Uint8Array[], position: number) => writevSync(fd, buffers, position),
  fdatasyncSync: (fd: number) => fdatasyncSync(fd),
  fdatasync: (fd: number) =>
    new Promise<void>((resolve, reject) => fdatasync(fd, (err) => (err ? reject(err) : resolve()))),
  ftruncate: (fd: number, length: number) => ftruncateSync(fd, length),
  close: (fd: number) => closeSync(fd),
  rename: (from: string, to: string) => renameSync(from, to),
  unlink: (path: string) => unlinkSync(path),
  mkdir: (path: string) => mkdirSync(path, 0o755),
  fsyncDir: (path: string) => {
    const fd = openSync(path, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  },
  writeAsync: (fd: number, buffer: Uint8Array, position: number) =>
    new Promise<number>((resolve, reject) => write(fd, buffer, 0, buffer.length, position, (err, n) => (err ? reject(err) : resolve(n)))),
  fsyncDirAsync: (path: string) =>
    new Promise<void>((resolve, reject) =>
      open(path, 'r', (err, fd) => {
        if (err) return reject(err);
        fsync(fd, (syncErr) => close(fd, (closeErr) => (syncErr ?? closeErr ? reject(syncErr ?? closeErr) : resolve())));
      }),
    ),
});

/** ops.fsyncDirAsync, or ops.fsyncDir for an implementation without it. */
export function fsyncDirAsync(ops: FileOps, path: string): Promise<void> {
  if (ops.fsyncDirAsync !== undefined) return ops.fsyncDirAsync(path);
  try {
    ops.fsyncDir(path);
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err);
  }
}

/** ops.writeAsync, or one ops.writev for an implementation without it. */
export function writeAsync(ops: FileOps, fd: number, buffer: Uint8Array, position: number): Promise<number> {
  if (ops.writeAsync !== undefined) return ops.writeAsync(fd, buffer, position);
  try {
    return Promise.resolve(ops.writev(fd, [buffer], position));
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The errno code of a Node file-system error (`ENOSPC`), if any. */
export function errnoCode(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Writes all of `iov` at `position`, IOV_MAX buffers per pwritev, resuming
 * after short writes. Returns the bytes written; throws what writev throws.
 */
export function writevAll(ops: FileOps, fd: number, iov: Uint8Array[], position: number): number {
  let total = 0;
  let idx = 0;
  let skip = 0; // bytes of iov[idx] already written
  while (idx < iov.length) {
    const end = Math.min(idx + IOV_MAX, iov.length);
    let chunk = iov;
    if (idx !== 0 || end !== iov.length || skip !== 0) {
      chunk = iov.slice(idx, end);
      if (skip !== 0) chunk[0] = chunk[0].subarray(skip);
    }
    const n = ops.writev(fd, chunk, position + total);
    if (n <= 0) throw Object.assign(new Error('writev made no progress'), { code: 'EIO' });
    total += n;
    let c = skip + n;
    while (idx < iov.length && c >= iov[idx].length) {
      c -= iov[idx].length;
      idx++;
    }
    skip = c;
  }
  return total;
}
