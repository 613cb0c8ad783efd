// Two rounds in flight under the commit journal (shard-loop.ts): round N+1
// is written while round N's journal fdatasync runs on the pool. When N's
// sync fails, both rounds are refused and every lane is cut back to where N
// began; when N's sync succeeds and N+1's fails, only N+1 is cut back. Each
// case runs the shard loop's steps on a real ShardJournal, LaneWriter and
// lazy FdCache on the real file system, injects the fault through FileOps,
// then simulates a power loss (every segment not synced cut back to its
// header), replays and repairs as a restart does.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FdCache } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { laneTag, ShardJournal } from '../../src/wal/journal.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { laneDir, LOGS_TABLE } from '../../src/wal/layout.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { eio, journaledLane, laneRecords } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-two-rounds-'));
});
afterEach(() => rmSync(wal, { recursive: true, force: true }));

function rig(segmentBytes = 1 << 20) {
  const fault = { journalSync: false };
  const jops: FileOps = {
    ...NODE_FILE_OPS,
    fdatasync: (fd) => (fault.journalSync ? Promise.reject(eio()) : NODE_FILE_OPS.fdatasync(fd)),
    fdatasyncSync: (fd) => {
      if (fault.journalSync) throw eio();
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
  };
  const { journal, dir, lane, powerLoss, restart } = journaledLane(wal, { journalOps: jops, laneOps: NODE_FILE_OPS, segmentBytes, unconfirmedFlushes: 2 });
  /** The write half of a round: flush and journal write. */
  const write = (...texts: string[]) => {
    for (const text of texts) lane.stage(RecordType.LOGS, 1, 1, Buffer.from(text));
    lane.flush();
    journal.write();
  };
  /** One whole round synced on the thread: true when acknowledged. */
  const round = (...texts: string[]): boolean => {
    write(...texts);
    try {
      journal.syncNow();
      lane.flushDurable();
      return true;
    } catch {
      lane.refuseLastFlush();
      return false;
    }
  };
  return { fault, journal, lane, dir, write, round, powerLoss, restart };
}

describe('two rounds in flight under the commit journal', () => {
  it('the first round\'s sync fails while the second is written: both refused, every acknowledged record survives', async () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    r.fault.journalSync = true;
    r.write('a-refused');
    const first = r.journal.sync();
    r.write('b-refused');
    await expect(first).rejects.toThrow(/fdatasync/);
    r.fault.journalSync = false;
    // The shard refuses both rounds: the lane is cut back to where the first began.
    r.lane.refuseLastFlush();
    expect(r.round('r3-acked')).toBe(true);
    expect(laneRecords(r.dir)).toEqual(['r1-acked', 'r3-acked']);
    // r1's segment was made durable by the refusal; r3 went to a new one, lost unsynced.
    expect(listLaneFiles(r.dir).segments.map((s) => s.number)).toEqual([1, 2]);
    r.powerLoss(2);
    const after = r.restart();
    const refused = ['a-refused', 'b-refused'];
    expect(after.records.filter((x) => !refused.includes(x))).toEqual(['r1-acked', 'r3-acked']);
    for (const x of refused) expect(after.records.filter((y) => y === x).length).toBeLessThanOrEqual(1);
    expect(after.repair.damaged).toEqual([]);
  });

  it('the first round synced, the second\'s sync fails: only the second is cut back', async () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    r.write('a-acked');
    const first = r.journal.sync();
    r.write('b-refused');
    await first;
    r.lane.flushDurable(); // round A acknowledged
    r.fault.journalSync = true;
    expect(() => r.journal.syncNow()).toThrow(/fdatasync/);
    r.fault.journalSync = false;
    r.lane.refuseLastFlush();
    expect(r.round('r3-acked')).toBe(true);
    expect(laneRecords(r.dir)).toEqual(['r1-acked', 'a-acked', 'r3-acked']);
    r.powerLoss(2);
    const after = r.restart();
    expect(after.records.filter((x) => x !== 'b-refused')).toEqual(['r1-acked', 'a-acked', 'r3-acked']);
    expect(after.records.filter((x) => x === 'b-refused').length).toBeLessThanOrEqual(1);
    expect(after.repair.damaged).toEqual([]);
  });

  it('a refused pair that rotated segments: the segments left behind are synced whole, acknowledged records survive', async () => {
    // Room for about two records per segment: each round rotates.
    const r = rig(SEGMENT_HEADER_SIZE + 2 * 40);
    expect(r.round('r1-acked-xxxxxx')).toBe(true);
    r.fault.journalSync = true;
    r.write('a-refused-xxxxx', 'a-refused-yyyyy');
    const first = r.journal.sync();
    r.write('b-refused-xxxxx', 'b-refused-yyyyy');
    await expect(first).rejects.toThrow(/fdatasync/);
    r.fault.journalSync = false;
    r.lane.refuseLastFlush();
    expect(r.round('r3-acked-xxxxxx')).toBe(true);
    const segments = listLaneFiles(r.dir).segments.map((s) => s.number);
    // Only the last segment (r3's, unsynced) is lost to the power cut; the ones the refusal left were synced.
    r.powerLoss(segments[segments.length - 1]!);
    const after = r.restart();
    expect(after.records.filter((x) => x.includes('acked'))).toEqual(['r1-acked-xxxxxx', 'r3-acked-xxxxxx']);
    for (const x of new Set(after.records)) expect(after.records.filter((y) => y === x)).toHaveLength(1);
    expect(after.repair.damaged).toEqual([]);
  });

  // Found in review: a flush that threw before it wrote (a cut-back still owed
  // failing again) left no mark, and the refusal that followed cut the live
  // segment back to its header, acknowledged records and all.
  for (const unconfirmed of [1, 2] as const) {
    it(`unconfirmedFlushes ${unconfirmed}: a flush that threw before writing still marks its start; the refusal keeps earlier acknowledged records`, () => {
      const f = { writev: false, ftruncate: false, jsync: false };
      const laneOps: FileOps = {
        ...NODE_FILE_OPS,
        writev: (fd, b, p) => {
          if (f.writev) throw eio();
          return NODE_FILE_OPS.writev(fd, b, p);
        },
        ftruncate: (fd, n) => {
          if (f.ftruncate) throw eio();
          NODE_FILE_OPS.ftruncate(fd, n);
        },
      };
      const journalOps: FileOps = {
        ...NODE_FILE_OPS,
        fdatasyncSync: (fd) => {
          if (f.jsync) throw eio();
          NODE_FILE_OPS.fdatasyncSync(fd);
        },
      };
      const { journal, dir, lane } = journaledLane(wal, { journalOps, laneOps, segmentBytes: 1 << 20, unconfirmedFlushes: unconfirmed });
      const write = (text: string) => {
        lane.stage(RecordType.LOGS, 1, 1, Buffer.from(text));
        try {
          lane.flush();
        } catch {
          // the lane's own failure: its requests are refused by the shard
        }
        journal.write();
      };
      for (const text of ['acked-1', 'acked-2']) {
        write(text);
        journal.syncNow();
        lane.flushDurable();
      }
      // The lane's write fails and so does its cut-back (owed); the round's journal sync succeeds.
      f.writev = true;
      f.ftruncate = true;
      write('refused-3');
      journal.syncNow();
      lane.flushDurable();
      f.writev = false;
      // The owed cut-back fails again: the flush throws before writing. This round's journal sync fails.
      write('refused-4');
      f.ftruncate = false;
      f.jsync = true;
      expect(() => journal.syncNow()).toThrow(/fdatasync/);
      f.jsync = false;
      lane.refuseLastFlush();
      expect(laneRecords(dir)).toEqual(['acked-1', 'acked-2']);
    });
  }

  it('with one unconfirmed flush (the default) each flush replaces the last one\'s mark', () => {
    const dir = laneDir(wal, 'acme', LOGS_TABLE);
    const lane = new LaneWriter({ dir, segmentBytes: 1 << 20, fdCache: new FdCache(8, NODE_FILE_OPS, { lazyEviction: true }), journaled: true });
    lane.stage(RecordType.LOGS, 1, 1, Buffer.from('one'));
    lane.flush();
    lane.stage(RecordType.LOGS, 1, 1, Buffer.from('two'));
    lane.flush();
    lane.refuseLastFlush();
    expect(laneRecords(dir)).toEqual(['one']);
    expect(() => new LaneWriter({ dir, segmentBytes: 1 << 20, unconfirmedFlushes: 3 as 2 })).toThrow(/unconfirmedFlushes 3/);
  });
});

describe('ShardJournal.sync', () => {
  it('a file given up while its sync is in flight keeps its descriptor until the sync returns', async () => {
    let release!: () => void;
    const closed: number[] = [];
    let failWrites = false;
    const ops: FileOps = {
      ...NODE_FILE_OPS,
      fdatasync: (fd) => new Promise<void>((resolve) => (release = () => NODE_FILE_OPS.fdatasync(fd).then(resolve))),
      writev: (fd, b, p) => {
        if (failWrites) throw eio();
        return NODE_FILE_OPS.writev(fd, b, p);
      },
      ftruncate: (fd, n) => {
        if (failWrites) throw eio();
        NODE_FILE_OPS.ftruncate(fd, n);
      },
      close: (fd) => {
        closed.push(fd);
        NODE_FILE_OPS.close(fd);
      },
    };
    const journal = new ShardJournal({ dir: join(wal, JOURNAL_ROOT, journalDirName(0, 1)), ops });
    const tag = laneTag(wal, laneDir(wal, 'acme', LOGS_TABLE));
    const entry = Buffer.from('x'.repeat(40));
    journal.stage(tag, 1, SEGMENT_HEADER_SIZE, [entry], 0, 1, entry.length, 1);
    journal.write();
    const inFlight = journal.sync();
    // The next round's write fails and so does its cut-back: the file is given up…
    failWrites = true;
    journal.stage(tag, 1, SEGMENT_HEADER_SIZE + entry.length, [entry], 0, 1, entry.length, 1);
    expect(() => journal.write()).toThrow(/write/);
    failWrites = false;
    // …but its descriptor stays open under the sync that has not run yet.
    expect(closed).toEqual([]);
    release();
    await inFlight;
    expect(closed).toHaveLength(1);
  });
});
