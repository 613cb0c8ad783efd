// FdCache bounding the descriptors of many lanes, measured in /proc/self/fd.

import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { walVerify } from '../../src/wal/commands.js';
import { FdCache } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { RecordType } from '../../src/wal/format.js';
import { LOGS_TABLE, TRACES_TABLE, laneDir } from '../../src/wal/layout.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';

const hasProcFd = existsSync('/proc/self/fd');
const openFds = () => readdirSync('/proc/self/fd').length;

/** node:fs, counting fdatasyncs, with an async fdatasync the test can hold and a one-shot sync failure. */
class HeldOps implements FileOps {
  syncs = 0;
  asyncSyncs = 0;
  hold = false;
  failSync: string | null = null;
  readonly #held: (() => void)[] = [];

  release(): void {
    for (const go of this.#held.splice(0)) go();
  }

  open = NODE_FILE_OPS.open;
  writev = NODE_FILE_OPS.writev;
  ftruncate = NODE_FILE_OPS.ftruncate;
  close = NODE_FILE_OPS.close;
  rename = NODE_FILE_OPS.rename;
  unlink = NODE_FILE_OPS.unlink;
  mkdir = NODE_FILE_OPS.mkdir;
  fsyncDir = NODE_FILE_OPS.fsyncDir;
  fdatasyncSync(fd: number): void {
    this.syncs++;
    const code = this.failSync;
    this.failSync = null;
    if (code !== null) throw Object.assign(new Error(`${code}: injected`), { code });
    NODE_FILE_OPS.fdatasyncSync(fd);
  }
  async fdatasync(fd: number): Promise<void> {
    this.asyncSyncs++;
    if (this.hold) await new Promise<void>((resolve) => this.#held.push(resolve));
    await NODE_FILE_OPS.fdatasync(fd);
  }
}

let base: string;
const writers: LaneWriter[] = [];

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'siglake-wal-fdcache-'));
});
afterEach(async () => {
  for (const w of writers.splice(0)) await w.close().catch(() => undefined);
  rmSync(base, { recursive: true, force: true });
});

function lanes(n: number, cache: FdCache): LaneWriter[] {
  const out: LaneWriter[] = [];
  for (let i = 0; i < n; i++) {
    const w = new LaneWriter({ dir: laneDir(join(base, 'wal'), `t${i}`, i % 2 ? TRACES_TABLE : LOGS_TABLE), segmentBytes: 1 << 20, fdCache: cache });
    out.push(w);
    writers.push(w);
  }
  return out;
}

describe('FdCache', () => {
  it('keeps open descriptors at the cap with many more lanes than the cap (counted in /proc/self/fd: Linux only, like the ingester)', async () => {
    expect(hasProcFd, '/proc/self/fd is readable').toBe(true);
    const cap = 8;
    const cache = new FdCache(cap);
    const ws = lanes(64, cache);
    const before = openFds();
    let most = 0;
    for (let round = 0; round < 3; round++) {
      for (const [i, w] of ws.entries()) {
        w.stage(RecordType.LOGS, 1, 1, Buffer.from(`lane ${i} round ${round}`));
        w.flush();
        expect(cache.openCount).toBeLessThanOrEqual(cap);
        most = Math.max(most, openFds() - before);
      }
      await Promise.all(ws.map((w) => w.sync()));
    }
    expect(most).toBeLessThanOrEqual(cap);
    expect(most).toBeGreaterThan(0);
    // Reopened segments were appended at their offsets: one segment per lane, three records in order.
    for (const [i, w] of ws.entries()) {
      expect(w.segment).toBe(1);
      const r = new SegmentReader(join(w.dir, '00000001.seg'));
      expect([...r].map((x) => Buffer.from(x.payload).toString())).toEqual([0, 1, 2].map((k) => `lane ${i} round ${k}`));
      r.close();
      expect(r.stop?.kind).toBe('end');
    }
    for (const w of ws) await w.close();
    expect(cache.openCount).toBe(0);
    expect(openFds()).toBeLessThanOrEqual(before);
    expect(await walVerify(join(base, 'wal'), () => undefined)).toBe(0);
  });

  it('fdatasyncs a dirty descriptor when it is evicted, and only then', async () => {
    const ops = new HeldOps();
    const cache = new FdCache(2, ops);
    const [a, b, c] = lanes(3, cache);
    for (const w of [a, b]) {
      w.stage(RecordType.LOGS, 1, 1, Buffer.from('x'));
      w.flush();
    }
    const creations = ops.syncs; // one per new segment
    expect(creations).toBe(2);
    await a.sync(); // a is clean now
    expect(ops.asyncSyncs).toBe(1);
    c.stage(RecordType.LOGS, 1, 1, Buffer.from('x'));
    c.flush(); // creates c's segment (1 sync) and evicts a, which is clean
    expect(ops.syncs).toBe(creations + 1);
    a.stage(RecordType.LOGS, 1, 1, Buffer.from('y'));
    a.flush(); // reopens a, evicts b, which is dirty
    expect(ops.syncs).toBe(creations + 2);
    await b.sync(); // already durable and closed: nothing to do
    expect(ops.asyncSyncs).toBe(1);
    expect(cache.openCount).toBe(2);
  });

  it('does not close a descriptor under an fdatasync in flight', async () => {
    const ops = new HeldOps();
    const cache = new FdCache(1, ops);
    const [a, b] = lanes(2, cache);
    a.stage(RecordType.LOGS, 1, 1, Buffer.from('a1'));
    a.flush();
    ops.hold = true;
    const pending = a.sync();
    b.stage(RecordType.LOGS, 1, 1, Buffer.from('b1'));
    b.flush(); // evicts a while its sync runs: a lingers
    expect(cache.openCount).toBe(2);
    ops.hold = false;
    ops.release();
    await pending;
    expect(cache.openCount).toBe(1);
    a.stage(RecordType.LOGS, 1, 1, Buffer.from('a2'));
    a.flush();
    await a.sync();
    const r = new SegmentReader(join(a.dir, '00000001.seg'));
    expect([...r].map((x) => Buffer.from(x.payload).toString())).toEqual(['a1', 'a2']);
    r.close();
  });

  it("reports a failed fdatasync at eviction on the owner's next sync, which then moves on", async () => {
    const ops = new HeldOps();
    const cache = new FdCache(1, ops);
    const [a, b] = lanes(2, cache);
    a.stage(RecordType.LOGS, 1, 1, Buffer.from('a1'));
    a.flush();
    b.stage(RecordType.LOGS, 1, 1, Buffer.from('b1'));
    ops.failSync = null;
    // b's segment creation fdatasyncs first, then a is evicted dirty: fail that second one.
    let n = 0;
    const real = ops.fdatasyncSync.bind(ops);
    ops.fdatasyncSync = (fd: number) => {
      if (++n === 2) ops.failSync = 'EIO';
      real(fd);
    };
    b.flush();
    await expect(a.sync()).rejects.toMatchObject({ code: 'SIGLAKE_WAL_DISK', op: 'fdatasync', errno: 'EIO' });
    a.stage(RecordType.LOGS, 1, 1, Buffer.from('a2'));
    a.flush();
    expect(a.segment).toBe(2);
    await a.sync();
    await b.sync();
  });

  it('a flush while seal() awaits its fdatasync makes the sealed segment durable before the next exists', async () => {
    const ops = new HeldOps();
    const cache = new FdCache(4, ops);
    const [w] = lanes(1, cache);
    w.stage(RecordType.LOGS, 1, 1, Buffer.from('one'));
    w.flush();
    expect(ops.syncs).toBe(1); // the new segment's header
    ops.hold = true;
    const sealed = w.seal();
    expect(ops.asyncSyncs).toBe(1);
    w.stage(RecordType.LOGS, 1, 1, Buffer.from('two'));
    w.flush();
    expect(ops.syncs).toBe(3); // segment 1 made durable, then segment 2's header
    expect(w.segment).toBe(2);
    expect(cache.openCount).toBe(2); // segment 1 stays open until its sync returns
    ops.hold = false;
    ops.release();
    await sealed;
    expect(cache.openCount).toBe(1);
  });

  it('refuses a capacity below one', () => {
    expect(() => new FdCache(0)).toThrow(expect.objectContaining({ code: 'SIGLAKE_WAL_ARGUMENT' }));
  });
});
