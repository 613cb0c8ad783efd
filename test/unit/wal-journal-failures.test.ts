// The commit journal when the disk fails under it (found in review): a round
// the journal could not make durable must not leave its lane bytes in front
// of later acknowledged records, and a segment given up after a failed
// fdatasync must be restored from the journal at the next start, even when a
// higher or a sealed segment follows it. Each case runs the shard loop's
// steps on a real ShardJournal, LaneWriter and lazy FdCache on the real file
// system, injects the fault through FileOps, then simulates a power loss by
// cutting every segment the test knows was not synced back to its header, and
// replays and repairs as a restart does.

import { mkdtempSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { eio, journaledLane, laneRecords } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-journal-fail-'));
});
afterEach(() => rmSync(wal, { recursive: true, force: true }));

/** A lane and its shard's journal wired as the shard loop wires them; faults through the flags. */
function rig(segmentBytes = 1 << 20) {
  const fault = { journalWrite: false, journalSync: false, laneSync: false };
  /** Lane fdatasyncs on the writer's thread (refusals, cut-backs). */
  const laneSyncsNow = { n: 0 };
  const jops: FileOps = {
    ...NODE_FILE_OPS,
    writev: (fd, b, p) => {
      if (fault.journalWrite) throw eio();
      return NODE_FILE_OPS.writev(fd, b, p);
    },
    fdatasyncSync: (fd) => {
      if (fault.journalSync) throw eio();
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
  };
  const lops: FileOps = {
    ...NODE_FILE_OPS,
    fdatasync: (fd) => (fault.laneSync ? Promise.reject(eio()) : NODE_FILE_OPS.fdatasync(fd)),
    fdatasyncSync: (fd) => {
      laneSyncsNow.n++;
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
  };
  const { journal, dir, lane, powerLoss, restart } = journaledLane(wal, { journalOps: jops, laneOps: lops, segmentBytes });
  /** One round as #commitRound runs it: true when acknowledged. */
  const round = (...texts: string[]): boolean => {
    for (const text of texts) lane.stage(RecordType.LOGS, 1, 1, Buffer.from(text));
    lane.flush();
    try {
      journal.write();
      journal.syncNow();
      return true;
    } catch {
      lane.refuseLastFlush();
      return false;
    }
  };
  /** A checkpoint whose fdatasync of the lane fails: the journal rotates, the segment is given up. */
  const failedCheckpoint = async () => {
    journal.rotate();
    fault.laneSync = true;
    await expect(lane.syncCheckpoint(lane.takeCheckpoint())).rejects.toThrow(/fdatasync/);
    fault.laneSync = false;
  };
  /** A checkpoint that succeeds, as the shard loop runs it. */
  const checkpoint = async () => {
    const upTo = journal.rotate();
    await lane.syncCheckpoint(lane.takeCheckpoint());
    journal.retireUpTo(upTo);
  };
  return { fault, laneSyncsNow, journal, lane, dir, round, powerLoss, failedCheckpoint, checkpoint, restart };
}

describe('commit journal under disk faults', () => {
  it('a round the journal could not write leaves no bytes in front of the next acknowledged one', () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    r.fault.journalWrite = true;
    expect(r.round('r2-refused')).toBe(false);
    r.fault.journalWrite = false;
    expect(r.round('r3-acked')).toBe(true);
    // Before any crash the refused record is gone already: no duplicate if the client retries.
    expect(laneRecords(r.dir)).toEqual(['r1-acked', 'r3-acked']);
    // r1's segment was made durable when r2 was refused; r3 went to a new one, lost unsynced.
    expect(listLaneFiles(r.dir).segments.map((s) => s.number)).toEqual([1, 2]);
    r.powerLoss(2);
    const after = r.restart();
    expect(after.records).toEqual(['r1-acked', 'r3-acked']);
    expect(after.repair.damaged).toEqual([]);
  });

  it('a round whose journal fdatasync failed: every acknowledged record survives, the refused one at most once', () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    r.fault.journalSync = true;
    expect(r.round('r2-refused')).toBe(false);
    r.fault.journalSync = false;
    expect(r.round('r3-acked')).toBe(true);
    r.powerLoss(2);
    const after = r.restart();
    // r2's entry may still be in the given-up journal file (its write succeeded): replay may bring it
    // back, in its own place, never over another record.
    expect(after.records.filter((x) => x !== 'r2-refused')).toEqual(['r1-acked', 'r3-acked']);
    expect(after.records.filter((x) => x === 'r2-refused').length).toBeLessThanOrEqual(1);
    expect(after.repair.damaged).toEqual([]);
  });

  it('a segment given up after a failed checkpoint fdatasync is restored from the journal though a higher one follows', async () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    await r.failedCheckpoint();
    expect(r.round('r2-acked')).toBe(true); // in segment 2
    r.powerLoss(1, 2);
    const after = r.restart();
    expect(after.records).toEqual(['r1-acked', 'r2-acked']);
    expect(after.replay.skipped).toBe(0);
  });

  it('... and though a sealed one follows', async () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    await r.failedCheckpoint();
    expect(r.round('r2-acked')).toBe(true);
    await r.lane.seal(); // segment 2 durable and marked sealed
    r.powerLoss(1);
    const after = r.restart();
    expect(after.records).toEqual(['r1-acked', 'r2-acked']);
  });

  it('a sealed segment whose checkpoint fdatasync fails fails the checkpoint (the shard pins the journal); replay restores it', async () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    await r.lane.seal(); // no sync: segment 1 waits for the checkpoint
    await r.failedCheckpoint(); // its fdatasync fails: the journal must stay
    expect(r.round('r2-acked')).toBe(true); // segment 2
    r.powerLoss(1);
    rmSync(join(r.dir, formatSegmentName(2))); // never synced: gone
    const after = r.restart();
    expect(after.records).toEqual(['r1-acked', 'r2-acked']);
    expect(after.replay.recreated).toBe(1);
  });

  it('a refused round that rotated: the segment it left is synced on the spot and ends whole though no later sync comes', () => {
    // Two 10-byte records per segment.
    const r = rig(SEGMENT_HEADER_SIZE + 2 * (24 + 10));
    expect(r.round('r1-acked-')).toBe(true); // segment 1, unsynced (the journal holds it)
    r.fault.journalSync = true;
    r.laneSyncsNow.n = 0;
    expect(r.round('r2-refuse', 'r3-refuse')).toBe(false); // r2 fills segment 1, r3 goes to segment 2
    r.fault.journalSync = false;
    // Segment 1 (left by the rotation, holding r2 after r1) and what is left of segment 2.
    expect(r.laneSyncsNow.n).toBe(2);
    expect(r.round('r4-acked-')).toBe(true); // segment 3
    // The power loss takes the unsynced segment 3 whole; 1 and 2 were synced.
    r.powerLoss();
    rmSync(join(r.dir, formatSegmentName(3)));
    const after = r.restart();
    expect(after.replay.recreated).toBe(1);
    // r2 stays where the rotation put it, behind r1: at-least-once, as for a failed write. r3's
    // entry may still be in the given-up journal file: it comes back in its own place, at most once.
    expect(after.records.filter((x) => x !== 'r3-refuse')).toEqual(['r1-acked-', 'r2-refuse', 'r4-acked-']);
    expect(after.records.filter((x) => x === 'r3-refuse').length).toBeLessThanOrEqual(1);
    expect(after.repair.damaged).toEqual([]);
  });

  it('entries of segments the compactor retired are skipped, not recreated', async () => {
    const r = rig();
    expect(r.round('r1-acked')).toBe(true);
    await r.checkpoint(); // segment 1 durable with its directory entry; its header's entry deleted
    expect(r.round('r2-acked')).toBe(true);
    r.journal.close();
    // The compactor landed segment 1 and, it being the lane's highest, cut it to zero bytes.
    truncateSync(join(r.dir, formatSegmentName(1)), 0);
    const after = r.restart();
    expect(after.replay.skipped).toBe(1);
    expect(after.records).toEqual([]);
  });
});
