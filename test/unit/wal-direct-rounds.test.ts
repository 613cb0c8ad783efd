// Direct rounds (docs/wal-format.md "Direct rounds"): a large round of one
// lane skips the commit journal and fdatasyncs the lane's own segments. Each
// case runs the shard loop's steps on a real ShardJournal, LaneWriter and lazy
// FdCache on the real file system. The lane's FileOps note what each
// fdatasync and directory fsync made durable (the file's size at the sync,
// the names in the directory at its fsync), and the power loss keeps exactly
// that of every segment: a name no directory fsync saw vanishes, a file is
// cut to its last synced size. The journal keeps what its own syncs made
// durable. Then replay and the tail repair run as a restart does, and every
// acknowledged record must be back, in order, once.

import { existsSync, fstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { decodeJournal } from '../../src/wal/journal-format.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { WalWriteError } from '../../src/wal/wal-write-error.js';
import { eio, journaledLane, laneRecords } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-direct-'));
});
afterEach(() => rmSync(wal, { recursive: true, force: true }));

const pathOf = (fd: number): string => readlinkSync(`/proc/self/fd/${fd}`);

/** A lane on its shard's journal, with what the lane's syncs made durable. */
function rig(segmentBytes = 1 << 20) {
  const fault = { laneSyncNow: false, laneSync: false };
  /** Segment path → its size at its last fdatasync. */
  const synced = new Map<string, number>();
  /** Segment names a directory fsync saw. */
  const entries = new Set<string>();
  const syncs: string[] = [];
  const note = (fd: number): void => {
    const p = pathOf(fd);
    synced.set(p, fstatSync(fd).size);
    syncs.push(basename(p));
  };
  const lops: FileOps = {
    ...NODE_FILE_OPS,
    fdatasyncSync: (fd) => {
      if (fault.laneSyncNow) throw eio();
      NODE_FILE_OPS.fdatasyncSync(fd);
      note(fd);
    },
    fdatasync: async (fd) => {
      if (fault.laneSync) throw eio();
      await NODE_FILE_OPS.fdatasync(fd);
      note(fd);
    },
    fsyncDir: (d) => {
      NODE_FILE_OPS.fsyncDir(d);
      for (const n of readdirSync(d)) entries.add(join(d, n));
      syncs.push(`dir ${basename(d)}`);
    },
    fsyncDirAsync: async (d) => {
      const names = readdirSync(d);
      await NODE_FILE_OPS.fsyncDirAsync!(d);
      for (const n of names) entries.add(join(d, n));
      syncs.push(`dir ${basename(d)}`);
    },
  };
  const journaling = { on: true };
  const l = journaledLane(wal, { journalOps: NODE_FILE_OPS, laneOps: lops, segmentBytes, journaling, unconfirmedFlushes: 2 });
  const { journal, lane, dir } = l;
  const stage = (texts: string[]): void => {
    for (const t of texts) lane.stage(RecordType.LOGS, 1, 1, Buffer.from(t));
  };
  /** A journaled round as #commitRound runs it (one fdatasync, of the journal). */
  const journaled = (...texts: string[]): void => {
    stage(texts);
    lane.flush();
    journal.write();
    journal.syncNow();
    lane.flushDurable();
  };
  /** A direct round's records written, its sync not started (as the shard loop does before it puts one in flight). */
  const writeDirect = (...texts: string[]): void => {
    stage(texts);
    journaling.on = false;
    try {
      lane.flush();
    } finally {
      journaling.on = true;
    }
  };
  /** A direct round as the shard loop runs it when no request waits: true when acknowledged. */
  const direct = (...texts: string[]): boolean => {
    writeDirect(...texts);
    try {
      lane.syncFlushNow();
      lane.flushDurable();
      return true;
    } catch (e) {
      expect(e).toBeInstanceOf(WalWriteError);
      lane.refuseLastFlush();
      return false;
    }
  };
  /** A machine crash: each segment keeps what a sync made durable; one no directory fsync named vanishes. */
  const powerLoss = (): void => {
    journal.close();
    for (const s of listLaneFiles(dir).segments) {
      const p = join(dir, formatSegmentName(s.number));
      if (!entries.has(p)) rmSync(p);
      else truncateSync(p, synced.get(p) ?? 0);
    }
  };
  const journalEntries = (): number =>
    (existsSync(l.journalDir) ? readdirSync(l.journalDir) : [])
      .filter((n) => /^\d+\.jnl$/.test(n))
      .reduce((a, n) => a + decodeJournal(readFileSync(join(l.journalDir, n))).entries.length, 0);
  return { fault, synced, entries, syncs, journal, lane, dir, journaled, direct, writeDirect, stage, powerLoss, restart: l.restart, journalEntries, journalDir: l.journalDir };
}

/** Each segment of the lane: its number and size in bytes. */
const segments = (dir: string): number[][] => listLaneFiles(dir).segments.map((s) => [s.number, statSync(s.path).size]);

/** Records of `n` bytes each (24-byte record headers). */
const rec = (tag: string, n: number): string => (tag + '-').padEnd(n, 'x');

describe('direct rounds: a one-lane round made durable by its own segments', () => {
  it('journals nothing, fdatasyncs the live segment and fsyncs the directory of the segment it created', () => {
    const r = rig();
    expect(r.direct(rec('d1', 100), rec('d2', 100))).toBe(true);
    expect(r.journalEntries()).toBe(0);
    // The lane's directories were made (each parent fsynced), then the segment synced and its name.
    expect(r.syncs).toEqual([`dir ${basename(wal)}`, 'dir acme', formatSegmentName(1), `dir ${basename(r.dir)}`]);
    // A second direct round appends to the same segment: no directory fsync.
    r.syncs.length = 0;
    expect(r.direct(rec('d3', 100))).toBe(true);
    expect(r.syncs).toEqual([formatSegmentName(1)]);
    r.powerLoss();
    const after = r.restart();
    expect(after.records).toEqual([rec('d1', 100), rec('d2', 100), rec('d3', 100)]);
    expect(after.replay.entries).toBe(0);
    expect(after.repair.damaged).toEqual([]);
  });

  it('after journaled rounds in the same segment: the direct sync makes their bytes durable too, replay finds them present', () => {
    const r = rig();
    r.journaled(rec('j1', 60));
    r.journaled(rec('j2', 60));
    expect(r.synced.size).toBe(0); // only the journal was synced
    expect(r.direct(rec('d1', 4000))).toBe(true);
    r.journaled(rec('j3', 60));
    r.powerLoss();
    const after = r.restart();
    expect(after.records).toEqual([rec('j1', 60), rec('j2', 60), rec('d1', 4000), rec('j3', 60)]);
    // j1, j2 were in the segment the direct round synced; only j3 came back from the journal.
    expect(after.replay.present).toBe(2);
    expect(after.replay.rewritten).toBe(1);
    expect(after.repair.damaged).toEqual([]);
  });

  it('a direct round that rotates fdatasyncs every segment it wrote, and the directory once', () => {
    // Two 100-byte records a segment.
    const r = rig(SEGMENT_HEADER_SIZE + 2 * (24 + 100));
    r.journaled(rec('j1', 100)); // segment 1, journaled (created unsynced)
    r.syncs.length = 0;
    expect(r.direct(rec('d1', 100), rec('d2', 100), rec('d3', 100), rec('d4', 100))).toBe(true); // 1 full, 2 full, 3
    expect(r.syncs).toEqual([formatSegmentName(1), formatSegmentName(2), formatSegmentName(3), `dir ${basename(r.dir)}`]);
    r.powerLoss();
    const after = r.restart();
    expect(after.records).toEqual([rec('j1', 100), rec('d1', 100), rec('d2', 100), rec('d3', 100), rec('d4', 100)]);
    expect(after.repair.damaged).toEqual([]);
  });

  it("a segment a journaled round created: a direct round appending to it fsyncs the directory, whose name was not durable", () => {
    const r = rig(SEGMENT_HEADER_SIZE + 2 * (24 + 100));
    r.journaled(rec('j1', 100), rec('j2', 100), rec('j3', 100)); // segment 1 full, segment 2 holds j3: both unsynced
    r.syncs.length = 0;
    expect(r.direct(rec('d1', 100))).toBe(true); // appends to segment 2
    expect(r.syncs).toEqual([formatSegmentName(2), `dir ${basename(r.dir)}`]);
    r.syncs.length = 0;
    // Segment 3, created by this round; segment 2, which it rotated away from, is clean since d1.
    expect(r.direct(rec('d2', 100))).toBe(true);
    expect(r.syncs).toEqual([formatSegmentName(3), `dir ${basename(r.dir)}`]);
    r.powerLoss();
    // Segment 1 was never synced: its name survives (the direct rounds' directory fsync), its bytes do not.
    expect(segments(r.dir)).toEqual([
      [1, 0],
      [2, SEGMENT_HEADER_SIZE + 2 * 124],
      [3, SEGMENT_HEADER_SIZE + 124],
    ]);
    const after = r.restart();
    expect(after.replay.recreated).toBe(1);
    expect(after.records).toEqual([rec('j1', 100), rec('j2', 100), rec('j3', 100), rec('d1', 100), rec('d2', 100)]);
    expect(after.repair.damaged).toEqual([]);
  });

  it("a direct round whose fdatasync fails is refused and cut back; the earlier journaled records come back from the journal", () => {
    const r = rig();
    r.journaled(rec('j1', 60));
    r.fault.laneSyncNow = true;
    let thrown: unknown;
    try {
      r.lane.syncFlushNow(); // nothing flushed since the last confirmed round: nothing to sync
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeUndefined();
    // The refusal's cut-back sync fails too (the disk is failing): refuseLastFlush throws, the segment is given up.
    r.lane.stage(RecordType.LOGS, 1, 1, Buffer.from(rec('d1', 500)));
    r.lane.flush();
    expect(() => r.lane.syncFlushNow()).toThrow(/fdatasync/);
    expect(() => r.lane.refuseLastFlush()).toThrow(/fdatasync/);
    r.fault.laneSyncNow = false;
    // The next round starts a new segment: nothing is appended behind the refused bytes.
    expect(r.direct(rec('d2', 500))).toBe(true);
    expect(listLaneFiles(r.dir).segments.map((s) => s.number)).toEqual([1, 2]);
    r.powerLoss();
    const after = r.restart();
    // j1 only in the journal (segment 1 was never synced); d1 was refused (at most once); d2 acknowledged.
    expect(after.records.filter((x) => x !== rec('d1', 500))).toEqual([rec('j1', 60), rec('d2', 500)]);
    expect(after.records.filter((x) => x === rec('d1', 500)).length).toBeLessThanOrEqual(1);
    expect(after.repair.damaged).toEqual([]);
  });

  it('a refused direct round whose cut-back succeeds leaves the segment at the last acknowledged record', () => {
    const r = rig();
    expect(r.direct(rec('d1', 200))).toBe(true);
    const size = SEGMENT_HEADER_SIZE + 24 + 200;
    expect(segments(r.dir)).toEqual([[1, size]]);
    r.fault.laneSyncNow = true;
    r.lane.stage(RecordType.LOGS, 1, 1, Buffer.from(rec('d2', 200)));
    r.lane.flush();
    expect(() => r.lane.syncFlushNow()).toThrow(WalWriteError);
    r.fault.laneSyncNow = false;
    r.lane.refuseLastFlush();
    expect(segments(r.dir)).toEqual([[1, size]]);
    expect(laneRecords(r.dir)).toEqual([rec('d1', 200)]);
  });

  it('in flight: the sync takes what was flushed when it began; the next round, written meanwhile, needs its own', async () => {
    const r = rig();
    r.writeDirect(rec('d1', 3000));
    const sizeD1 = SEGMENT_HEADER_SIZE + 24 + 3000;
    const sync = r.lane.syncFlush();
    // Round 2 (journaled) is written while round 1's fdatasync runs on the pool.
    r.stage([rec('j2', 100)]);
    r.lane.flush();
    r.journal.write();
    await sync;
    r.lane.flushDurable(); // round 1 answered
    expect(r.synced.get(join(r.dir, formatSegmentName(1)))).toBeGreaterThanOrEqual(sizeD1);
    r.journal.syncNow();
    r.lane.flushDurable(); // round 2 answered
    r.powerLoss();
    const after = r.restart();
    expect(after.records).toEqual([rec('d1', 3000), rec('j2', 100)]);
    expect(after.repair.damaged).toEqual([]);
  });

  it('in flight and failed: the round behind it is refused with it, both cut back; the segment is given up', async () => {
    const r = rig();
    expect(r.direct(rec('d0', 500))).toBe(true);
    r.writeDirect(rec('d1', 3000));
    r.fault.laneSync = true;
    const sync = r.lane.syncFlush();
    r.writeDirect(rec('d2', 3000)); // written while round 1 syncs
    await expect(sync).rejects.toThrow(WalWriteError);
    r.fault.laneSync = false;
    // As #endJournaled refuses both rounds: one cut from where the older began. Its own sync
    // fails too: the cache keeps the failure on the handle, since after a failed fdatasync no
    // later one can vouch for the file (the shard pins the journal on it).
    expect(() => r.lane.refuseLastFlush()).toThrow(/fdatasync failed \(EIO\)/);
    expect(segments(r.dir)).toEqual([[1, SEGMENT_HEADER_SIZE + 24 + 500]]);
    expect(laneRecords(r.dir)).toEqual([rec('d0', 500)]);
    // The next round starts a new segment.
    expect(r.direct(rec('d3', 100))).toBe(true);
    expect(segments(r.dir).map((x) => x[0])).toEqual([1, 2]);
    r.powerLoss();
    expect(r.restart().records).toEqual([rec('d0', 500), rec('d3', 100)]);
  });

  it('in flight, rotating: every segment it wrote is synced in parallel, then the directory', async () => {
    const r = rig(SEGMENT_HEADER_SIZE + 2 * (24 + 100));
    r.writeDirect(rec('d1', 100), rec('d2', 100), rec('d3', 100)); // segment 1 full, segment 2
    r.syncs.length = 0;
    await r.lane.syncFlush();
    r.lane.flushDurable();
    expect(r.syncs.slice(0, 2).sort()).toEqual([formatSegmentName(1), formatSegmentName(2)]);
    expect(r.syncs[2]).toBe(`dir ${basename(r.dir)}`);
    r.powerLoss();
    expect(r.restart().records).toEqual([rec('d1', 100), rec('d2', 100), rec('d3', 100)]);
  });
});
