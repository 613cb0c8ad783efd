// The commit journal with segments rotated unsynced, second review: what the
// compactor may take beside a running `batch` ingester, a refused round whose
// rotated segment fails to sync, replay beside a compactor that deletes, and
// which journal directories may excuse damage in `wal verify`. Real files in a
// temp dir, faults injected through FileOps, the shard loop's steps run by hand
// as in wal-journal-failures.test.ts.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SealRule } from '../../src/compactor/seal-rule.js';
import { walVerify } from '../../src/wal/commands.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { formatJournalName, JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { hasShardJournal, listJournalFiles, replayJournalDir } from '../../src/wal/journal.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { laneDir, LOGS_TABLE } from '../../src/wal/layout.js';
import { repairLane } from '../../src/wal/repair.js';
import { readSealedMarker, writeSealedMarker } from '../../src/wal/sealed-marker.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { eio, journaledLane, laneRecords } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-journal-review-'));
});
afterEach(() => rmSync(wal, { recursive: true, force: true }));

/**
 * One lane on a shard journal in `journalName` (the shard's by default), as
 * the shard loop wires them. `failSync`: segment paths whose fdatasync fails.
 */
function rig(segmentBytes: number, journalName = journalDirName(0, 1)) {
  const fault = { journalSync: false, failSync: new Set<string>() };
  const paths = new Map<number, string>();
  const jops: FileOps = {
    ...NODE_FILE_OPS,
    fdatasyncSync: (fd) => {
      if (fault.journalSync) throw eio();
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
  };
  const lops: FileOps = {
    ...NODE_FILE_OPS,
    open: (p, f) => {
      const fd = NODE_FILE_OPS.open(p, f);
      paths.set(fd, p);
      return fd;
    },
    close: (fd) => {
      paths.delete(fd);
      NODE_FILE_OPS.close(fd);
    },
    fdatasyncSync: (fd) => {
      if (fault.failSync.has(paths.get(fd) ?? '')) throw eio();
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
    fdatasync: (fd) => (fault.failSync.has(paths.get(fd) ?? '') ? Promise.reject(eio()) : NODE_FILE_OPS.fdatasync(fd)),
  };
  const { journalDir, journal, dir, lane } = journaledLane(wal, { journalName, journalOps: jops, laneOps: lops, segmentBytes });
  const seg = (n: number) => join(dir, formatSegmentName(n));
  /** One acknowledged round (throws if the journal refuses it). */
  const round = (...texts: string[]): void => {
    for (const text of texts) lane.stage(RecordType.LOGS, 1, 1, Buffer.from(text));
    lane.flush();
    journal.write();
    journal.syncNow();
  };
  /** A checkpoint as ShardLoop runs it: sync, delete the journal, then the marker. */
  const checkpoint = async (): Promise<number> => {
    const upTo = journal.rotate();
    const cp = lane.takeCheckpoint();
    await lane.syncCheckpoint(cp);
    journal.retireUpTo(upTo);
    if (cp.finished > 0) writeSealedMarker(dir, cp.finished);
    return cp.finished;
  };
  /** What a running compactor would take now, by segment number. */
  const offered = (rule = new SealRule('running')): number[] => {
    const files = listLaneFiles(dir);
    const marker = readSealedMarker(dir);
    const journaled = hasShardJournal(wal);
    return files.segments.filter((f) => rule.isSealed(dir, f.number, files.maxNumber, marker, journaled)).map((f) => f.number);
  };
  return { fault, journal, journalDir, lane, dir, seg, round, checkpoint, offered };
}

// Two 9-byte records per segment.
const TWO = SEGMENT_HEADER_SIZE + 2 * (24 + 9);

describe('the compactor beside a running batch ingester (seal rule under a journal)', () => {
  it('a rotated segment, dirty and journaled, is not offered before the checkpoint, and is after it', async () => {
    const r = rig(TWO);
    r.round('r1-acked-', 'r2-acked-');
    r.round('r3-acked-'); // segment 1 rotated away from (unsynced, the journal holds it); 2 live
    expect(listLaneFiles(r.dir).segments.map((f) => f.number)).toEqual([1, 2]);
    expect(hasShardJournal(wal)).toBe(true);
    // A power cut now may leave segment 1 torn or empty until replay: a running compactor
    // (standalone, or in process after a failed checkpoint) must not take it.
    expect(r.offered()).toEqual([]);
    expect(r.offered(new SealRule('in-process'))).toEqual([]);
    expect(await r.checkpoint()).toBe(1);
    expect(readSealedMarker(r.dir)).toBe(1);
    expect(r.offered()).toEqual([1]);
    // The live one waits for its own rotation or seal, then the next checkpoint.
    await r.lane.seal();
    expect(r.offered()).toEqual([1]);
    expect(await r.checkpoint()).toBe(2);
    expect(r.offered()).toEqual([1, 2]);
    // --ingester-stopped replays the journal first and takes everything.
    expect(r.offered(new SealRule('stopped'))).toEqual([1, 2]);
  });

  it('a checkpoint whose fdatasync of the rotated segment failed reports it finished but the shard writes no marker', async () => {
    const r = rig(TWO);
    r.round('r1-acked-', 'r2-acked-');
    r.round('r3-acked-');
    r.fault.failSync.add(r.seg(1));
    r.journal.rotate();
    const cp = r.lane.takeCheckpoint();
    await expect(r.lane.syncCheckpoint(cp)).rejects.toThrow(/fdatasync/);
    // (The shard pins the journal: no file deleted, no marker written for the rest of the life.)
    expect(existsSync(join(r.dir, '.sealed'))).toBe(false);
    expect(r.offered()).toEqual([]);
  });

  it('without a shard journal directory (interval, never) a segment below the highest is offered as before', () => {
    const dir = laneDir(wal, 'acme', LOGS_TABLE);
    const w = new LaneWriter({ dir, segmentBytes: TWO });
    for (const t of ['r1-acked-', 'r2-acked-', 'r3-acked-']) w.stage(RecordType.LOGS, 1, 1, Buffer.from(t));
    w.flush();
    // A directory under .journal that is not a shard's is never replayed: it does not count.
    mkdirSync(join(wal, JOURNAL_ROOT, 'copy'), { recursive: true });
    expect(hasShardJournal(wal)).toBe(false);
    const files = listLaneFiles(dir);
    const rule = new SealRule('running');
    expect(files.segments.map((f) => rule.isSealed(dir, f.number, files.maxNumber, 0, false))).toEqual([true, false]);
  });
});

describe('a refused round whose rotated segment fails to sync', () => {
  it('the live segment is still cut back and given up: the next acknowledged round starts a new one', () => {
    const r = rig(TWO);
    r.round('r1-acked-'); // segment 1
    r.fault.journalSync = true;
    r.fault.failSync.add(r.seg(1));
    r.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('r2-refuse'));
    r.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('r3-refuse'));
    r.lane.flush(); // r2 fills segment 1, r3 goes to a new segment 2
    r.journal.write();
    expect(() => r.journal.syncNow()).toThrow(/EIO/);
    // The shard pins the journal on this throw; the lane must not keep r3 in front of later rounds.
    expect(() => r.lane.refuseLastFlush()).toThrow(/fdatasync/);
    r.fault.journalSync = false;
    r.fault.failSync.clear();
    expect(statSync(r.seg(2)).size).toBe(SEGMENT_HEADER_SIZE);
    r.round('r4-acked-');
    expect(r.lane.segment).toBe(3);
    expect(laneRecords(r.dir)).toEqual(['r1-acked-', 'r2-refuse', 'r4-acked-']);
  });
});

describe('replay beside a compactor that deletes', () => {
  it('a segment deleted between its replay and the final fsync was landed: replay finishes and deletes the journal', () => {
    const r = rig(1 << 20);
    r.round('r1-acked-');
    r.journal.close();
    const deleting: FileOps = {
      ...NODE_FILE_OPS,
      open: (p, f) => {
        if (p === r.seg(1)) rmSync(p); // landed and retired by `siglake compact` just now
        return NODE_FILE_OPS.open(p, f);
      },
    };
    const replay = replayJournalDir(wal, r.journalDir, { ops: deleting });
    expect(replay.present).toBe(1);
    expect(listJournalFiles(r.journalDir)).toEqual([]);
    expect(existsSync(r.seg(1))).toBe(false);
  });
});

describe('wal verify and journal directories', () => {
  /** Segment 1 of 2 torn in its second record, which the journal in `journalName` holds. */
  async function tornBelowTheHighest(journalName: string): Promise<number> {
    const r = rig(TWO, journalName);
    r.round('r1-acked-', 'r2-acked-');
    r.round('r3-acked-');
    r.journal.close();
    truncateSync(r.seg(1), SEGMENT_HEADER_SIZE + 33 + 10);
    expect(readFileSync(r.seg(1)).length).toBe(SEGMENT_HEADER_SIZE + 43);
    return walVerify(wal, () => undefined);
  }

  it('bytes a shard journal holds excuse a torn segment below the highest (replay writes them back)', async () => {
    expect(await tornBelowTheHighest(journalDirName(0, 1))).toBe(0);
  });

  it('a journal file in any other directory under .journal excuses nothing: replay never reads it', async () => {
    expect(await tornBelowTheHighest('copy-of-shard-0')).toBe(1);
  });
});

describe('a torn unacknowledged tail in a segment before the last (machine crash, batch mode)', () => {
  /** r1 acknowledged in segment 1; a round r2 (fills 1), r3 (segment 2) never acknowledged; power lost. */
  function crashMidRound() {
    const r = rig(TWO);
    r.round('r1-acked-');
    const journalFile = join(r.journalDir, formatJournalName(listJournalFiles(r.journalDir).at(-1)!));
    const durable = r.journal.fileSize;
    r.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('r2-never-'));
    r.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('r3-never-'));
    r.lane.flush();
    r.journal.write(); // no fdatasync: the power goes first
    r.journal.close();
    truncateSync(journalFile, durable); // the round's entries never reached the disk
    truncateSync(r.seg(1), SEGMENT_HEADER_SIZE + 33 + 10); // r2 half written
    truncateSync(r.seg(2), SEGMENT_HEADER_SIZE); // r3 lost, the header made it
    return r;
  }

  it('replay, then the repair cuts the torn tail of the earlier segment too: verify is clean, no acknowledged record lost', async () => {
    const r = crashMidRound();
    replayJournalDir(wal, r.journalDir);
    expect(await walVerify(wal, () => undefined)).toBe(1); // what the tail repair alone leaves
    const rec = repairLane(r.dir, { cutTornEarlier: true });
    expect(rec.earlierCuts.map((c) => [c.segment, c.kind, c.offset, c.bytes])).toEqual([[r.seg(1), 'torn', SEGMENT_HEADER_SIZE + 33, 10]]);
    expect(rec.truncatedBytes).toBe(10);
    expect(await walVerify(wal, () => undefined)).toBe(0);
    expect(laneRecords(r.dir)).toEqual(['r1-acked-']);
  });

  it('a segment at or below the marker, or ending corrupt, is never cut', () => {
    const r = crashMidRound();
    replayJournalDir(wal, r.journalDir);
    writeSealedMarker(r.dir, 1);
    expect(repairLane(r.dir, { cutTornEarlier: true }).earlierCuts).toEqual([]);
    rmSync(join(r.dir, '.sealed'));
    // Non-zero garbage where r2 began: corrupt, damage for verify, not a tear.
    truncateSync(r.seg(1), SEGMENT_HEADER_SIZE + 33);
    const bytes = readFileSync(r.seg(1));
    writeFileSync(r.seg(1), Buffer.concat([bytes, Buffer.alloc(30, 0x7f)]));
    expect(repairLane(r.dir, { cutTornEarlier: true }).earlierCuts).toEqual([]);
    expect(statSync(r.seg(1)).size).toBe(SEGMENT_HEADER_SIZE + 33 + 30);
  });
});
