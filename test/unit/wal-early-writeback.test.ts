// An early writeback (shard-loop.ts: a busy lane's live segment fdatasynced
// between checkpoints, on the pool) must never let a checkpoint believe a
// segment durable that is not: the checkpoint waits for every fdatasync in
// flight on the segments it covers, including one the lane rotated away from
// or gave up meanwhile, and learns of its failure; a failed fdatasync stays
// on the handle (a later one on the same file would say 0); and a refused
// round's cut-back is synced for real even when a writeback had made the
// handle clean. Real files; fdatasync held or failed through FileOps.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { eio, journaledLane } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-writeback-'));
});
afterEach(() => {
  rmSync(wal, { recursive: true, force: true });
});

/** Lane FileOps whose async fdatasyncs wait until released (or fail), counting the blocking ones. */
function heldOps() {
  const held: { release: () => void; fail: (e: Error) => void }[] = [];
  let syncNow = 0;
  const ops: FileOps = {
    ...NODE_FILE_OPS,
    fdatasync: (fd) =>
      new Promise<void>((resolve, reject) => {
        held.push({
          release: () => NODE_FILE_OPS.fdatasync(fd).then(resolve, reject),
          fail: (e) => reject(e),
        });
      }),
    fdatasyncSync: (fd) => {
      syncNow++;
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
  };
  return { ops, held, syncNows: () => syncNow };
}

/** Settles within a few event-loop turns, or not. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return done;
}

const record = (text: string) => Buffer.from(text.padEnd(200, '.'));

function lane(ops: FileOps) {
  const l = journaledLane(wal, { journalOps: NODE_FILE_OPS, laneOps: ops, segmentBytes: SEGMENT_HEADER_SIZE + 3 * (24 + 200) });
  const round = (...texts: string[]) => {
    for (const t of texts) l.lane.stage(RecordType.LOGS, 1, 1, record(t));
    l.lane.flush();
    l.journal.write();
    l.journal.syncNow();
    l.lane.flushDurable();
  };
  return { ...l, round };
}

describe('early writeback and the checkpoint', () => {
  it('a segment rotated away from while its writeback runs is still the checkpoint\'s, which waits for that sync', async () => {
    const h = heldOps();
    const l = lane(h.ops);
    l.round('a1', 'a2', 'a3'); // segment 1 full
    const writeback = l.lane.sync(); // segment 1, in flight: the handle is clean meanwhile
    l.round('b1'); // rotates to segment 2: nothing more is written to 1
    expect(l.lane.segment).toBe(2);
    const cp = l.lane.takeCheckpoint();
    expect(cp.handles.map((x) => [x.path, x.dirty, x.inflight !== null])).toEqual([
      [join(l.dir, formatSegmentName(1)), false, true],
      [join(l.dir, formatSegmentName(2)), true, false],
    ]);
    const checkpoint = l.lane.syncCheckpoint(cp);
    expect(await settled(checkpoint)).toBe(false); // waits for segment 1's writeback
    h.held[0]!.release();
    await writeback;
    // Then segment 2's own fdatasync.
    let released = 1;
    while (!(await settled(checkpoint))) while (released < h.held.length) h.held[released++]!.release();
    await checkpoint;
    expect(h.held.length).toBe(2);
  });

  it('a writeback that fails makes the checkpoint fail too, even when it failed before the checkpoint began', async () => {
    const h = heldOps();
    const l = lane(h.ops);
    l.round('a1', 'a2');
    const writeback = l.lane.sync();
    h.held[0]!.fail(eio());
    await expect(writeback).rejects.toThrow(/EIO/);
    // No write since: a new fdatasync of the file would say 0. The failure stays.
    await expect(l.lane.syncCheckpoint(l.lane.takeCheckpoint())).rejects.toThrow(/EIO/);
  });

  it('of two fdatasyncs in flight on one segment, the failure of the first reaches whoever waits after the second', async () => {
    const h = heldOps();
    const l = journaledLane(wal, { journalOps: NODE_FILE_OPS, laneOps: h.ops, segmentBytes: 1 << 20 });
    l.lane.stage(RecordType.LOGS, 1, 1, record('one'));
    l.lane.flush();
    const first = l.lane.sync();
    l.lane.stage(RecordType.LOGS, 1, 1, record('two'));
    l.lane.flush();
    const second = l.lane.sync();
    const cp = l.lane.syncCheckpoint(l.lane.takeCheckpoint()); // nothing new: waits for both
    h.held[0]!.fail(eio());
    h.held[1]!.release();
    await expect(first).rejects.toThrow(/EIO/);
    await expect(second).rejects.toThrow(/EIO/);
    await expect(cp).rejects.toThrow(/EIO/);
  });

  it('a refused round\'s cut-back is fdatasynced even when a writeback in flight had made the segment clean', async () => {
    const h = heldOps();
    const l = journaledLane(wal, { journalOps: NODE_FILE_OPS, laneOps: h.ops, segmentBytes: 1 << 20 });
    l.lane.stage(RecordType.LOGS, 1, 1, record('acknowledged'));
    l.lane.flush();
    l.journal.write();
    l.journal.syncNow();
    l.lane.flushDurable();
    l.lane.stage(RecordType.LOGS, 1, 1, record('refused'));
    l.lane.flush();
    const writeback = l.lane.sync(); // starts before the journal's write fails
    const before = h.syncNows();
    l.lane.refuseLastFlush();
    expect(h.syncNows()).toBe(before + 1);
    // The given-up segment stays the checkpoint's until its writeback returned.
    const cp = l.lane.takeCheckpoint();
    expect(cp.handles.map((x) => x.path)).toContain(join(l.dir, formatSegmentName(1)));
    const checkpoint = l.lane.syncCheckpoint(cp);
    expect(await settled(checkpoint)).toBe(false);
    h.held[0]!.release();
    await writeback;
    let released = 1;
    while (!(await settled(checkpoint))) while (released < h.held.length) h.held[released++]!.release();
    await checkpoint;
  });
});
