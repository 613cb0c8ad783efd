// LaneWriter against the real file system, with failures injected through a
// faulty FileOps (the "faulty file handle" of Prometheus' wlog tests).

import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { walVerify } from '../../src/wal/commands.js';
import { IOV_MAX, NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { RECORD_HEADER_SIZE, RecordType, SEGMENT_HEADER_SIZE, type RecordType as RecordTypeT } from '../../src/wal/format.js';
import { LOGS_TABLE, laneDir } from '../../src/wal/layout.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { recoverWal } from '../../src/wal/recovery.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';
import { WalArgumentError } from '../../src/wal/wal-argument-error.js';
import { WalWriteError } from '../../src/wal/wal-write-error.js';

function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected`), { code });
}

type OpName = keyof FileOps;

/** node:fs, with one-shot failures and a log of writev calls. */
class FaultyOps implements FileOps {
  readonly calls = new Map<OpName, number>();
  readonly writevLog: { buffers: readonly Uint8Array[]; bytes: number }[] = [];
  /** Next call of the op throws this errno code (one shot each). */
  readonly failNext = new Map<OpName, string[]>();
  /** Next writev writes this many bytes for real, then throws. */
  partialThenFail: { bytes: number; code: string } | null = null;
  /** Every writev writes at most half of what it is given. */
  shortWrites = false;

  #hit(op: OpName): void {
    this.calls.set(op, (this.calls.get(op) ?? 0) + 1);
    const queue = this.failNext.get(op);
    const code = queue?.shift();
    if (code !== undefined) throw errno(code);
  }

  fail(op: OpName, ...codes: string[]): void {
    this.failNext.set(op, [...(this.failNext.get(op) ?? []), ...codes]);
  }

  count(op: OpName): number {
    return this.calls.get(op) ?? 0;
  }

  open(path: string, flags: 'wx' | 'r+'): number {
    this.#hit('open');
    return NODE_FILE_OPS.open(path, flags);
  }
  writev(fd: number, buffers: readonly Uint8Array[], position: number): number {
    this.#hit('writev');
    const bytes = buffers.reduce((n, b) => n + b.length, 0);
    this.writevLog.push({ buffers: [...buffers], bytes });
    const partial = this.partialThenFail;
    if (partial !== null) {
      this.partialThenFail = null;
      const all = Buffer.concat(buffers);
      NODE_FILE_OPS.writev(fd, [all.subarray(0, partial.bytes)], position);
      throw errno(partial.code);
    }
    if (this.shortWrites && bytes > 1) {
      const all = Buffer.concat(buffers);
      return NODE_FILE_OPS.writev(fd, [all.subarray(0, Math.ceil(bytes / 2))], position);
    }
    return NODE_FILE_OPS.writev(fd, buffers, position);
  }
  fdatasyncSync(fd: number): void {
    this.#hit('fdatasyncSync');
    NODE_FILE_OPS.fdatasyncSync(fd);
  }
  async fdatasync(fd: number): Promise<void> {
    this.#hit('fdatasync');
    await NODE_FILE_OPS.fdatasync(fd);
  }
  ftruncate(fd: number, length: number): void {
    this.#hit('ftruncate');
    NODE_FILE_OPS.ftruncate(fd, length);
  }
  close(fd: number): void {
    this.#hit('close');
    NODE_FILE_OPS.close(fd);
  }
  rename(from: string, to: string): void {
    this.#hit('rename');
    NODE_FILE_OPS.rename(from, to);
  }
  unlink(path: string): void {
    this.#hit('unlink');
    NODE_FILE_OPS.unlink(path);
  }
  mkdir(path: string): void {
    this.#hit('mkdir');
    NODE_FILE_OPS.mkdir(path);
  }
  fsyncDir(path: string): void {
    this.#hit('fsyncDir');
    NODE_FILE_OPS.fsyncDir(path);
  }
}

interface Rec {
  type: RecordTypeT;
  count: number;
  timeMs: number;
  text: string;
}

function readLane(dir: string): { segment: string; recs: Rec[]; size: number }[] {
  return readdirSync(dir)
    .filter((n) => n.endsWith('.seg'))
    .sort()
    .map((name) => {
      const r = new SegmentReader(join(dir, name));
      const recs: Rec[] = [];
      for (const x of r) recs.push({ type: x.type, count: x.count, timeMs: x.timeMs, text: Buffer.from(x.payload).toString() });
      r.close();
      expect(r.stop?.kind, `${name} ends cleanly`).toBe('end');
      return { segment: name, recs, size: r.size };
    });
}

const allTexts = (dir: string) => readLane(dir).flatMap((s) => s.recs.map((r) => r.text));

async function verifyClean(dir: string): Promise<string[]> {
  const lines: string[] = [];
  expect(await walVerify(dir, (l) => lines.push(l))).toBe(0);
  expect(lines.some((l) => l.includes('torn tail in'))).toBe(false);
  expect(lines.at(-1)).toMatch(/ 0 torn tails, 0 problems: OK$/);
  return lines;
}

let base: string;
let walDir: string;
let dir: string;
const writers: LaneWriter[] = [];

function writer(opts: Partial<ConstructorParameters<typeof LaneWriter>[0]> = {}): LaneWriter {
  const w = new LaneWriter({ dir, segmentBytes: 1 << 20, ...opts });
  writers.push(w);
  return w;
}

const bytesOf = (...texts: string[]) => texts.reduce((n, t) => n + RECORD_HEADER_SIZE + Buffer.byteLength(t), 0);
const put = (w: LaneWriter, ...texts: string[]) => {
  for (const t of texts) w.stage(RecordType.LOGS, 1, 1_767_225_600_000, Buffer.from(t));
};

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'siglake-wal-writer-'));
  walDir = join(base, 'wal');
  dir = laneDir(walDir, 'acme', LOGS_TABLE);
});
afterEach(async () => {
  for (const w of writers.splice(0)) await w.close().catch(() => undefined);
  rmSync(base, { recursive: true, force: true });
});

describe('LaneWriter', () => {
  it('touches nothing on disk until a flush has records', async () => {
    const w = writer();
    expect(w.flush()).toBe(0);
    await w.sync();
    await w.seal();
    await w.close();
    expect(existsSync(walDir)).toBe(false);
    expect(w.segment).toBe(0);

    const v = writer();
    v.stage(RecordType.LOGS, 3, 1_767_225_600_001, Buffer.from('hello'));
    v.stage(RecordType.TRACES, 5, 1_767_225_600_002, Buffer.from('spans'));
    expect(v.stagedRecords).toBe(2);
    expect(v.stagedBytes).toBe(bytesOf('hello', 'spans'));
    expect(v.flush()).toBe(bytesOf('hello', 'spans'));
    expect(v.stagedRecords).toBe(0);
    await v.sync();
    expect(readdirSync(dir)).toEqual(['00000001.seg']);
    expect(v.segment).toBe(1);
    expect(v.segmentSize).toBe(SEGMENT_HEADER_SIZE + bytesOf('hello', 'spans'));
    expect(readLane(dir)[0].recs).toEqual([
      { type: 1, count: 3, timeMs: 1_767_225_600_001, text: 'hello' },
      { type: 2, count: 5, timeMs: 1_767_225_600_002, text: 'spans' },
    ]);
  });

  it('rotates by size; a record never crosses a segment; an oversized record goes alone', async () => {
    const rec = 'x'.repeat(100); // 124 bytes on disk
    const w = writer({ segmentBytes: SEGMENT_HEADER_SIZE + 3 * 124 });
    for (let i = 0; i < 7; i++) w.stage(RecordType.LOGS, 1, 1, Buffer.from(`${i}`.padEnd(100, 'x')));
    w.flush();
    put(w, rec); // fills segment 3 to 2 records
    put(w, 'big'.padEnd(1000, '!'));
    w.flush();
    put(w, rec);
    w.flush();
    await w.sync();
    const segs = readLane(dir);
    expect(segs.map((s) => s.segment)).toEqual(['00000001.seg', '00000002.seg', '00000003.seg', '00000004.seg', '00000005.seg']);
    expect(segs.map((s) => s.recs.length)).toEqual([3, 3, 2, 1, 1]);
    expect(segs[0].recs.map((r) => r.text[0])).toEqual(['0', '1', '2']);
    for (const s of segs.filter((x) => x.recs.length > 1)) expect(s.size).toBeLessThanOrEqual(SEGMENT_HEADER_SIZE + 3 * 124);
    expect(segs[3].size).toBe(SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + 1000);
    expect(w.segment).toBe(5);
    await verifyClean(dir);
  });

  it('starts a new segment in each life and continues numbering after repair', async () => {
    const one = writer();
    put(one, 'life one');
    one.flush();
    await one.close();
    const two = writer();
    put(two, 'life two');
    two.flush();
    await two.sync();
    expect(two.segment).toBe(2);
    expect(two.recovery?.nextSegment).toBe(2);
    // A crash: the live segment gets a torn tail and a .tmp is left behind.
    appendFileSync(join(dir, '00000002.seg'), Buffer.from([1, 0, 0, 0, 0xff]));
    writeFileSync(join(dir, '00000005.seg.tmp'), Buffer.alloc(10));
    const three = writer();
    put(three, 'life three');
    three.flush();
    expect(three.segment).toBe(6);
    expect(three.recovery?.truncatedBytes).toBe(5);
    expect(three.recovery?.removedTmp).toEqual(['00000005.seg.tmp']);
    await three.close();
    // Recovery run by the caller hands the number over.
    const rec = recoverWal(walDir);
    expect(rec.nextSegment.get(dir)).toBe(7);
    const four = writer({ nextSegment: rec.nextSegment.get(dir) });
    put(four, 'life four');
    four.flush();
    await four.close();
    expect(four.recovery).toBeNull();
    const segs = readLane(dir);
    expect(segs.map((s) => [s.segment, s.recs.map((r) => r.text)])).toEqual([
      ['00000001.seg', ['life one']],
      ['00000002.seg', ['life two']],
      ['00000006.seg', ['life three']],
      ['00000007.seg', ['life four']],
    ]);
    await verifyClean(walDir);
  });

  it('writes payload views over a SharedArrayBuffer as they are, with one writev per flush', async () => {
    const ops = new FaultyOps();
    const sab = new SharedArrayBuffer(4096);
    const bytes = new Uint8Array(sab);
    const texts = ['alpha', 'bravo-bravo', '', 'charlie'];
    let at = 17;
    const w = writer({ fileOps: ops });
    for (const t of texts) {
      bytes.set(Buffer.from(t), at);
      w.stage(RecordType.LOGS, 1, 1, new Uint8Array(sab, at, t.length));
      at += t.length + 3;
    }
    w.flush();
    await w.sync();
    const recordWrites = ops.writevLog.slice(1); // the first writev is the segment header
    expect(recordWrites.length).toBe(1);
    const passed = recordWrites[0].buffers;
    expect(passed.length).toBe(7); // four headers, three non-empty payloads
    expect(passed.filter((b) => b.buffer === sab).length).toBe(3); // the caller's views, not copies
    expect(allTexts(dir)).toEqual(texts);
  });

  it(`splits a batch into writev calls of at most ${IOV_MAX} buffers and survives short writes`, async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops, slabRecords: 4 });
    ops.shortWrites = true;
    const texts = Array.from({ length: 1500 }, (_, i) => `record-${i}`);
    put(w, ...texts);
    expect(w.flush()).toBe(bytesOf(...texts));
    await w.sync();
    const recordWrites = ops.writevLog.slice(1);
    expect(Math.max(...recordWrites.map((c) => c.buffers.length))).toBe(IOV_MAX);
    expect(recordWrites.length).toBeGreaterThan(3); // chunks, and resumed short writes
    expect(allTexts(dir)).toEqual(texts);
    // The slab grew to 1500 slots and is reused: a second, smaller batch is still right.
    ops.shortWrites = false;
    put(w, 'after');
    w.flush();
    expect(allTexts(dir).at(-1)).toBe('after');
  });

  it('cuts a failed write back (ENOSPC), drops the batch, stays valid and writes again', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'kept');
    w.flush();
    const size = statSync(join(dir, '00000001.seg')).size;
    put(w, 'lost-1', 'lost-2', 'lost-3');
    ops.partialThenFail = { bytes: 40, code: 'ENOSPC' };
    let caught: unknown;
    try {
      w.flush();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(WalWriteError);
    const e = caught as WalWriteError;
    expect([e.code, e.op, e.errno, e.httpStatus]).toEqual(['SIGLAKE_WAL_DISK', 'write', 'ENOSPC', 503]);
    expect(w.stagedRecords).toBe(0);
    expect(statSync(join(dir, '00000001.seg')).size).toBe(size);
    expect(w.segmentSize).toBe(size);
    await verifyClean(dir);
    put(w, 'resumed');
    w.flush();
    await w.sync();
    expect(allTexts(dir)).toEqual(['kept', 'resumed']);
    expect(w.segment).toBe(1);
  });

  it('retries a failed cut-back before writing again, and refuses to write past garbage', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'kept');
    w.flush();
    const size = statSync(join(dir, '00000001.seg')).size;
    put(w, 'lost');
    ops.partialThenFail = { bytes: 10, code: 'ENOSPC' };
    ops.fail('ftruncate', 'EIO');
    expect(() => w.flush()).toThrow(WalWriteError);
    expect(statSync(join(dir, '00000001.seg')).size).toBe(size + 10); // garbage still there
    put(w, 'blocked');
    ops.fail('ftruncate', 'EIO');
    expect(() => w.flush()).toThrow(expect.objectContaining({ op: 'truncate', errno: 'EIO' }));
    expect(statSync(join(dir, '00000001.seg')).size).toBe(size + 10);
    put(w, 'resumed');
    w.flush();
    await w.sync();
    expect(allTexts(dir)).toEqual(['kept', 'resumed']);
    await verifyClean(dir);
  });

  it('leaves no .tmp when creating a segment fails, and burns that number', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'first try');
    ops.fail('open', 'ENOSPC');
    expect(() => w.flush()).toThrow(expect.objectContaining({ code: 'SIGLAKE_WAL_DISK', op: 'create', errno: 'ENOSPC' }));
    expect(readdirSync(dir)).toEqual([]); // the directory was made; nothing else
    put(w, 'second try');
    ops.partialThenFail = { bytes: 7, code: 'ENOSPC' }; // the header write itself fails half way
    expect(() => w.flush()).toThrow(expect.objectContaining({ op: 'create' }));
    expect(readdirSync(dir)).toEqual([]);
    put(w, 'third try');
    w.flush();
    await w.sync();
    expect(readdirSync(dir)).toEqual(['00000003.seg']);
    expect(allTexts(dir)).toEqual(['third try']);
    await verifyClean(dir);
  });

  it('makes every missing parent and fsyncs it', () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'x');
    w.flush();
    expect(ops.count('mkdir')).toBe(5); // logs and acme fail with ENOENT; wal, acme, logs are made
    expect(ops.count('fsyncDir')).toBe(3 + 1); // the parents of wal, acme and logs; then logs for the rename
  });

  it('prepareDir makes the directories without a sync and names each parent for the shard to sync once', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'x');
    expect(w.prepareDir()).toEqual([base, walDir, join(walDir, 'acme')]); // outermost first
    expect(existsSync(dir)).toBe(true);
    expect(ops.count('fsyncDir'), 'made, not synced').toBe(0);
    for (const d of [base, walDir, join(walDir, 'acme')]) await w.syncDir(d);
    w.dirDurable();
    expect(w.prepareDir(), 'ready: nothing more to make').toBeNull();
    w.flush();
    expect(ops.count('mkdir')).toBe(5);
    expect(ops.count('fsyncDir')).toBe(3 + 1); // the three the shard synced; then logs for the rename
    expect(allTexts(dir)).toEqual(['x']);
  });

  it('a lane whose directory sync failed makes and syncs it again at its flush', () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'x');
    expect(w.prepareDir()).toHaveLength(3);
    // The shard's sync failed: dirDurable() is not called.
    w.flush();
    expect(ops.count('mkdir')).toBe(5 + 1); // the flush's own mkdir finds logs (EEXIST)
    expect(ops.count('fsyncDir')).toBe(1 + 1); // the parent of logs, then logs for the rename
    expect(allTexts(dir)).toEqual(['x']);
  });

  it('prepareDir leaves a failure to the flush, which reports it', () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'x');
    ops.fail('mkdir', 'EACCES');
    expect(w.prepareDir()).toBeNull();
    ops.fail('mkdir', 'EACCES');
    expect(() => w.flush()).toThrow(expect.objectContaining({ op: 'mkdir', errno: 'EACCES' }));
    expect(existsSync(walDir)).toBe(false);
  });

  it('a new tenant under a WAL root: its two directories made by two mkdirs, nothing looked up, the lane at segment 1', () => {
    mkdirSync(walDir);
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops, root: walDir });
    put(w, 'x');
    expect(w.prepareDir()).toEqual([walDir, join(walDir, 'acme')]);
    expect(ops.count('mkdir'), 'acme and logs, each made at the first try').toBe(2);
    w.dirDurable();
    w.flush();
    expect(readdirSync(dir)).toEqual(['00000001.seg']);
    expect(allTexts(dir)).toEqual(['x']);
  });

  it('a tenant whose directory exists: its lane is checked and repaired as before (the next number after what is there; a link refused)', () => {
    const one = writer({ root: walDir });
    put(one, 'a');
    one.flush();
    writeFileSync(join(dir, '00000007.seg.tmp'), 'left over');
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops, root: walDir });
    put(w, 'b');
    expect(w.prepareDir()).toEqual([join(walDir, 'acme')]); // logs found: its parent synced, as before
    expect(w.recovery?.removedTmp).toEqual(['00000007.seg.tmp']);
    w.dirDurable();
    w.flush();
    expect(readdirSync(dir).sort()).toEqual(['00000001.seg', '00000008.seg']);

    // A link named as a new tenant: mkdir finds it (EEXIST), and the path check refuses it.
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, join(walDir, 'bolt'));
    const linked = writer({ dir: laneDir(walDir, 'bolt', LOGS_TABLE), root: walDir });
    put(linked, 'c');
    expect(linked.prepareDir()).toBeNull();
    expect(() => linked.flush()).toThrow(expect.objectContaining({ op: 'symlink' }));
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it('abandons a segment whose fdatasync failed (EIO) and carries on in a new one', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'before');
    w.flush();
    ops.fail('fdatasync', 'EIO');
    await expect(w.sync()).rejects.toMatchObject({ code: 'SIGLAKE_WAL_DISK', op: 'fdatasync', errno: 'EIO' });
    expect(w.segment).toBe(0);
    put(w, 'after');
    w.flush();
    await w.sync();
    expect(w.segment).toBe(2);
    expect(readLane(dir).map((s) => s.recs.map((r) => r.text))).toEqual([['before'], ['after']]);
    await verifyClean(dir);
  });

  it('syncNow: a blocking fdatasync with the same failure handling as sync()', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'one');
    w.flush();
    w.syncNow();
    expect(w.segment).toBe(1);
    put(w, 'two');
    w.flush();
    // The next fdatasyncSync is syncNow's (segment creation already happened).
    ops.fail('fdatasyncSync', 'EIO');
    expect(() => w.syncNow()).toThrow(expect.objectContaining({ code: 'SIGLAKE_WAL_DISK', op: 'fdatasync', errno: 'EIO' }));
    expect(w.segment).toBe(0);
    put(w, 'three');
    w.flush();
    w.syncNow();
    expect(w.segment).toBe(2);
    expect(readLane(dir).map((s) => s.recs.map((r) => r.text))).toEqual([['one', 'two'], ['three']]);
    await verifyClean(dir);
  });

  it('fails the flush when the fdatasync of a rotation fails', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops, segmentBytes: SEGMENT_HEADER_SIZE + 30 });
    put(w, 'one-one');
    w.flush();
    put(w, 'two-two');
    // fdatasyncSync calls: segment creation only so far; the next one is the rotation's.
    ops.fail('fdatasyncSync', 'EIO');
    expect(() => w.flush()).toThrow(expect.objectContaining({ op: 'fdatasync', errno: 'EIO' }));
    put(w, 'three');
    w.flush();
    await w.sync();
    expect(allTexts(dir)).toEqual(['one-one', 'three']);
    await verifyClean(dir);
  });

  it('shares one fdatasync between concurrent syncs, and syncs again after new writes', async () => {
    const ops = new FaultyOps();
    const w = writer({ fileOps: ops });
    put(w, 'a');
    w.flush();
    await Promise.all([w.sync(), w.sync()]);
    expect(ops.count('fdatasync')).toBe(1);
    await w.sync(); // clean: nothing to do
    expect(ops.count('fdatasync')).toBe(1);
    put(w, 'b');
    w.flush();
    const first = w.sync();
    put(w, 'c');
    w.flush();
    await Promise.all([first, w.sync()]);
    expect(ops.count('fdatasync')).toBe(3);
  });

  it('seals by age on request and starts the next segment on the next flush', async () => {
    let now = 1_000_000;
    const w = writer({ now: () => now });
    expect(w.liveSegmentAgeMs()).toBeNull();
    put(w, 'a');
    w.flush();
    now += 1500;
    expect(w.liveSegmentAgeMs()).toBe(1500);
    put(w, 'staged, not flushed');
    await w.seal();
    expect(w.liveSegmentAgeMs()).toBeNull();
    expect(w.segment).toBe(0);
    expect(w.stagedRecords).toBe(1);
    await w.seal(); // nothing live: a no-op
    w.flush();
    expect(w.segment).toBe(2);
    expect(w.liveSegmentAgeMs()).toBe(0);
    await w.close();
    expect(readLane(dir).map((s) => s.recs.map((r) => r.text))).toEqual([['a'], ['staged, not flushed']]);
    const header = readFileSync(join(dir, '00000002.seg')).readBigUInt64LE(16);
    expect(header).toBe(1_001_500n);
  });

  it('refuses use after close and values the format cannot hold', async () => {
    const w = writer();
    expect(() => w.stage(3 as RecordTypeT, 1, 1, Buffer.alloc(1))).toThrow(WalArgumentError);
    expect(() => w.stage(RecordType.LOGS, -1, 1, Buffer.alloc(1))).toThrow(WalArgumentError);
    expect(() => w.stage(RecordType.LOGS, 2 ** 32, 1, Buffer.alloc(1))).toThrow(WalArgumentError);
    expect(() => w.stage(RecordType.LOGS, 1, 1.5, Buffer.alloc(1))).toThrow(WalArgumentError);
    expect(() => new LaneWriter({ dir, segmentBytes: 32 })).toThrow(WalArgumentError);
    await w.close();
    expect(() => w.stage(RecordType.LOGS, 1, 1, Buffer.alloc(1))).toThrow(expect.objectContaining({ code: 'SIGLAKE_WAL_WRITE', op: 'closed' }));
    expect(() => w.flush()).toThrow(WalWriteError);
    expect(existsSync(walDir)).toBe(false);
  });
});
