// Shared pieces of the WAL fault tests: an injected EIO, a lane's records as
// text (read back through the project's own segment reader), and a lane on a
// shard journal wired as the shard loop wires them.

import { truncateSync } from 'node:fs';
import { join } from 'node:path';
import { FdCache } from '../../src/wal/fd-cache.js';
import type { FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { laneTag, replayJournalDir, ShardJournal } from '../../src/wal/journal.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { laneDir, LOGS_TABLE } from '../../src/wal/layout.js';
import { repairLane } from '../../src/wal/repair.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';

/** The error a failing disk gives (what FileOps fault injection throws). */
export const eio = (): Error => Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });

/** Every record of the lane in `dir`, in segment order, as text. */
export function laneRecords(dir: string): string[] {
  const out: string[] = [];
  for (const s of listLaneFiles(dir).segments) {
    for (const r of new SegmentReader(join(dir, formatSegmentName(s.number)))) out.push(Buffer.from(r.payload).toString());
  }
  return out;
}

/**
 * One lane of tenant `acme` on a shard journal, wired as the shard loop
 * wires them (the lane's writes staged in the journal), on the given FileOps.
 */
export function journaledLane(
  wal: string,
  opts: {
    journalName?: string;
    journalOps: FileOps;
    laneOps: FileOps;
    segmentBytes: number;
    unconfirmedFlushes?: 1 | 2;
    /** The journal's spares (ShardJournalOptions): off unless given. */
    recycle?: boolean;
    prefillBytes?: number;
    /** Runs written go to the journal only while `on` (a direct round turns it off, as the shard loop does). */
    journaling?: { on: boolean };
  },
): {
  journalDir: string;
  journal: ShardJournal;
  dir: string;
  lane: LaneWriter;
  /** A machine crash: the journal closed, each of `segments` cut back to its header (never synced). */
  powerLoss: (...segments: number[]) => void;
  /** The next start: journal replay, then the tail repair; the lane's records after both. */
  restart: () => { replay: ReturnType<typeof replayJournalDir>; repair: ReturnType<typeof repairLane>; records: string[] };
} {
  const journalDir = join(wal, JOURNAL_ROOT, opts.journalName ?? journalDirName(0, 1));
  const journal = new ShardJournal({ dir: journalDir, ops: opts.journalOps, recycle: opts.recycle ?? false, prefillBytes: opts.prefillBytes ?? 0 });
  const dir = laneDir(wal, 'acme', LOGS_TABLE);
  const tag = laneTag(wal, dir);
  const lane = new LaneWriter({
    dir,
    segmentBytes: opts.segmentBytes,
    fdCache: new FdCache(8, opts.laneOps, { lazyEviction: true }),
    journaled: true,
    ...(opts.unconfirmedFlushes !== undefined ? { unconfirmedFlushes: opts.unconfirmedFlushes } : {}),
    onWritten: (seg, off, iov, n, bytes, recs) => {
      if (opts.journaling?.on !== false) journal.stage(tag, seg, off, iov, 0, n, bytes, recs);
    },
  });
  const powerLoss = (...segments: number[]) => {
    journal.close();
    for (const n of segments) truncateSync(join(dir, formatSegmentName(n)), SEGMENT_HEADER_SIZE);
  };
  const restart = () => {
    const replay = replayJournalDir(wal, journalDir);
    const repair = repairLane(dir);
    return { replay, repair, records: laneRecords(dir) };
  };
  return { journalDir, journal, dir, lane, powerLoss, restart };
}
