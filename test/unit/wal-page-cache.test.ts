// --wal-drop-synced-pages (src/wal/page-cache.ts, native/page-cache.c) on
// real files: after the fdatasync, the whole pages that were in the file
// before it leave the page cache (util-linux `fincore` reads what is
// resident), the last, partly written page stays, pages written after the
// sync began are not touched, the bytes read back are the bytes written, and
// a failed fdatasync is an error shaped like node:fs's. The addon must be
// built here (npm run build); without it this file fails.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../src/native/addon.js';
import { FdCache } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS } from '../../src/wal/file-ops.js';
import { dropSyncedPagesOps, syscallError } from '../../src/wal/page-cache.js';
import { tempDir } from '../helpers/ingester.js';

const PAGE = 4096;
const dir = tempDir('siglake-page-cache-');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Bytes of `file` in the page cache, as fincore reports them. */
function resident(file: string): number {
  return Number(execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', file], { encoding: 'utf8' }).trim());
}

function bytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 131 + seed) & 0xff;
  return b;
}

const { ops, failure } = dropSyncedPagesOps();

describe('fdatasync and drop the synced pages', () => {
  it('loads with the addon built', () => {
    expect(failure).toBeUndefined();
    expect(loadAddon().addon).not.toBeNull();
    expect(ops).not.toBe(NODE_FILE_OPS);
  });

  it('drops the whole pages below the size the sync began with, keeps the partial last page, and the bytes read back are the bytes written', () => {
    const file = path.join(dir, 'drop-sync.seg');
    const fd = ops.open(file, 'wx');
    const first = bytes(64 * PAGE + 1000, 1);
    ops.writev(fd, [first], 0);
    expect(resident(file)).toBe(65 * PAGE);
    ops.fdatasyncSync(fd);
    // 64 whole pages dropped; the 65th, holding 1,000 bytes, stays for the next append.
    expect(resident(file)).toBe(PAGE);
    const second = bytes(8 * PAGE, 2);
    ops.writev(fd, [second], first.length);
    ops.close(fd);
    expect(fs.readFileSync(file).equals(Buffer.concat([first, second]))).toBe(true);
  });

  it('on the thread pool, the same; and a cached descriptor of the FdCache syncs through it', async () => {
    const file = path.join(dir, 'drop-async.seg');
    const fd = ops.open(file, 'wx');
    ops.writev(fd, [bytes(32 * PAGE, 3)], 0);
    await ops.fdatasync(fd);
    expect(resident(file)).toBe(0);
    ops.close(fd);

    const cache = new FdCache(4, ops);
    const segment = path.join(dir, 'cached.seg');
    const h = cache.adopt(segment, ops.open(segment, 'wx'));
    ops.writev(cache.fd(h), [bytes(16 * PAGE + 10, 4)], 0);
    cache.markDirty(h);
    await cache.sync(h);
    expect(resident(segment)).toBe(PAGE);
    cache.closeAll();
  });

  it('leaves pages alone without the option (the plain fdatasync keeps them cached)', () => {
    const file = path.join(dir, 'keep.seg');
    const fd = NODE_FILE_OPS.open(file, 'wx');
    NODE_FILE_OPS.writev(fd, [bytes(16 * PAGE, 5)], 0);
    NODE_FILE_OPS.fdatasyncSync(fd);
    expect(resident(file)).toBe(16 * PAGE);
    NODE_FILE_OPS.close(fd);
  });

  it('a failed fdatasync is an error as node:fs throws it, on this thread and on the pool', async () => {
    const fd = fs.openSync(path.join(dir, 'closed.seg'), 'w');
    fs.closeSync(fd);
    let thrown: NodeJS.ErrnoException | undefined;
    try {
      ops.fdatasyncSync(fd);
    } catch (e) {
      thrown = e as NodeJS.ErrnoException;
    }
    expect(thrown?.code).toBe('EBADF');
    expect(thrown?.syscall).toBe('fdatasync');
    expect(thrown?.errno).toBe(-9);
    expect(thrown?.message).toBe('EBADF: bad file descriptor, fdatasync');
    await expect(ops.fdatasync(fd)).rejects.toMatchObject({ code: 'EBADF', syscall: 'fdatasync', errno: -9 });
    // The same shape as node:fs's own.
    let node: NodeJS.ErrnoException | undefined;
    try {
      fs.fdatasyncSync(fd);
    } catch (e) {
      node = e as NodeJS.ErrnoException;
    }
    expect({ code: thrown?.code, errno: thrown?.errno, syscall: thrown?.syscall, message: thrown?.message }).toEqual({
      code: node?.code,
      errno: node?.errno,
      syscall: node?.syscall,
      message: node?.message,
    });
    expect(syscallError(28, 'fdatasync').code).toBe('ENOSPC');
  });

  it('refuses arguments that are not a descriptor', () => {
    const addon = loadAddon().addon!;
    expect(() => addon.fdatasyncDropSync(-1)).toThrow(/fdatasyncDropSync\(fd\) takes a descriptor/);
    expect(() => (addon as unknown as { fdatasyncDrop: (...a: unknown[]) => void }).fdatasyncDrop(3)).toThrow(/takes a descriptor and a function/);
  });
});

describe('without the addon', () => {
  it('says why, and the segment files keep the plain fdatasync', () => {
    const missing = loadAddon('/nonexistent/siglake_native.node');
    expect(missing.addon).toBeNull();
    expect(missing.failure).toBe('native addon siglake_native.node: not built (npm run build builds it; it needs a C compiler, make and python3)');
  });
});
