// The commit journal's spares (docs/wal-format.md "Spares: reused journal
// files") against the real file system: a retired file kept and reused as a
// later file, the life's first spare prefilled with zeros, and what makes a
// reused file safe to replay: every entry's CRC seeded with its file's number
// and covering its body, and a terminator after every round, so that nothing
// the file held under an earlier number is ever read as one of its entries,
// even where a crash lost the pages that covered it.

import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { crc32c } from '@node-rs/crc32';
import { FdCache } from '../../src/wal/fd-cache.js';
import {
  decodeJournal,
  ENTRY_HEADER_SIZE,
  formatJournalName,
  JOURNAL_FLAG_REUSED,
  JOURNAL_HEADER_SIZE,
  JOURNAL_ROOT,
  JOURNAL_VERSION,
  JOURNAL_VERSION_3,
  journalDirName,
} from '../../src/wal/journal-format.js';
import { formatSpareName, laneTag, listJournalFiles, replayJournalDir, ShardJournal, SPARE_TMP_NAME } from '../../src/wal/journal.js';
import { formatSegmentName, RecordType } from '../../src/wal/format.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { laneDir, LOGS_TABLE } from '../../src/wal/layout.js';
import { repairLane } from '../../src/wal/repair.js';
import { journaledLane, laneRecords } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-spares-'));
});
afterEach(() => {
  rmSync(wal, { recursive: true, force: true });
});

const MiB = 1024 * 1024;

/** One lane on a journal with spares, and rounds of equal-sized records (entries of one size: an earlier file's entries line up with a later one's). */
function setup(opts: { recycle?: boolean; prefillBytes?: number; journalOps?: FileOps } = {}) {
  const l = journaledLane(wal, {
    journalOps: opts.journalOps ?? NODE_FILE_OPS,
    laneOps: NODE_FILE_OPS,
    segmentBytes: 64 * MiB,
    recycle: opts.recycle ?? true,
    prefillBytes: opts.prefillBytes ?? 0,
  });
  let seq = 0;
  /** One round of `n` records of `bytes` each, written and synced as a shard does; returns their texts. */
  const round = (n = 1, bytes = 4096): string[] => {
    const texts: string[] = [];
    for (let i = 0; i < n; i++) {
      const t = `r${String(seq++).padStart(8, '0')}-`.padEnd(bytes, 'x');
      l.lane.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.from(t));
      texts.push(t);
    }
    l.lane.flush();
    l.journal.write();
    l.journal.syncNow();
    l.lane.flushDurable();
    return texts;
  };
  /** A checkpoint as the shard runs it: rotate, make the lane durable, retire. */
  const checkpoint = async () => {
    const upTo = l.journal.rotate();
    await l.lane.syncCheckpoint(l.lane.takeCheckpoint());
    l.journal.retireUpTo(upTo);
  };
  const files = () => readdirSync(l.journalDir).sort();
  const fileOf = (n: number) => join(l.journalDir, formatJournalName(n));
  return { ...l, round, checkpoint, files, fileOf };
}

describe('a retired journal file kept as a spare and reused', () => {
  it('becomes the next file under its new number: its entries are the new ones only, it keeps its length, and replay reads only them', async () => {
    const s = setup();
    for (let i = 0; i < 300; i++) s.round(1); // about 1.2 MiB in file 1: long enough to keep
    const oldLength = statSync(s.fileOf(1)).size;
    await s.checkpoint();
    expect(s.files()).toEqual([formatSpareName(1)]);
    expect(s.journal.spareCount).toBe(1);

    const durable = statSync(join(s.dir, '00000001.seg')).size;
    const fresh = s.round(3);
    expect(s.files()).toEqual([formatJournalName(2)]);
    expect(s.journal.reused).toBe(true);
    // The spare's blocks stay: the round overwrote them.
    expect(statSync(s.fileOf(2)).size).toBe(oldLength);
    const j = decodeJournal(readFileSync(s.fileOf(2)), 2);
    expect(j.version).toBe(JOURNAL_VERSION);
    expect(readFileSync(s.fileOf(2)).readUInt32LE(24) & JOURNAL_FLAG_REUSED).toBe(JOURNAL_FLAG_REUSED);
    expect(j.entries).toHaveLength(1);
    expect(j.entries[0]!.records).toBe(3);
    // The terminator after the round ends the entries; the earlier use's bytes follow it.
    expect(j.stop).toEqual({ kind: 'end', offset: j.entries[0]!.at + ENTRY_HEADER_SIZE + j.entries[0]!.tag.length + j.entries[0]!.body.length });

    // A machine crash lost the lane's bytes written since the checkpoint: replay writes back exactly the three.
    const all = laneRecords(s.dir);
    truncateSync(join(s.dir, '00000001.seg'), durable);
    const r = s.restart();
    expect(r.replay).toMatchObject({ files: 1, entries: 1, rewritten: 1, rewrittenRecords: 3, stops: [] });
    expect(r.records).toEqual(all);
    expect(all.slice(-3)).toEqual(fresh);
    // Replay deleted the journal file and took the spares with it.
    expect(existsSync(s.journalDir) ? readdirSync(s.journalDir) : []).toEqual([]);
  });

  it('never reads an earlier use\'s entries, even where a crash lost the terminator and they line up with the new ones', async () => {
    const s = setup();
    s.round(1); // file 1: the round that creates the segment (its entry carries the segment header)
    s.journal.rotate();
    for (let i = 0; i < 300; i++) s.round(1); // file 2: entries of one size from offset 32
    const before = readFileSync(s.fileOf(2));
    await s.checkpoint();
    expect(s.files()).toEqual([formatSpareName(2)]);
    s.round(1);
    s.round(1);
    const file = s.fileOf(3);
    const now = readFileSync(file);
    const j = decodeJournal(now, 3);
    expect(j.entries).toHaveLength(2);
    // Entries of one size: the earlier use's third entry starts exactly where the terminator is.
    const end = j.stop.offset;
    expect(decodeJournal(before, 2).entries.map((e) => e.at)).toContain(end);
    // A crash lost the page with the terminator: what covers it again is the earlier use's bytes.
    const torn = Buffer.from(now);
    before.copy(torn, end, end, end + 4096);
    writeFileSync(file, torn);
    const after = decodeJournal(torn, 3);
    expect(after.entries).toHaveLength(2);
    // The earlier entry's CRC was seeded with file number 2: under 3 it does not check.
    expect(after.stop).toMatchObject({ kind: 'torn', offset: end, why: 'entry CRC mismatch' });
    // Replay writes back the two new entries and nothing of the 300 old ones.
    s.journal.close();
    const r = replayJournalDir(wal, s.journalDir);
    expect(r).toMatchObject({ entries: 2, stops: [expect.objectContaining({ kind: 'torn', offset: end })] });
  });

  it('never takes an earlier use\'s records of another lane for a new entry\'s body whose pages a power loss lost', async () => {
    // Two lanes of one shard whose tags have one length, so that their entries line up.
    const journalDir = join(wal, JOURNAL_ROOT, journalDirName(0, 1));
    const journal = new ShardJournal({ dir: journalDir, recycle: true });
    const fds = new FdCache(8, NODE_FILE_OPS, { lazyEviction: true });
    const lane = (tenant: string) => {
      const dir = laneDir(wal, tenant, LOGS_TABLE);
      const tag = laneTag(wal, dir);
      const writer = new LaneWriter({
        dir,
        segmentBytes: 64 * MiB,
        fdCache: fds,
        journaled: true,
        onWritten: (seg, off, iov, n, bytes, recs) => void journal.stage(tag, seg, off, iov, 0, n, bytes, recs),
      });
      return { dir, writer };
    };
    const acme = lane('acme');
    const beta = lane('beta');
    let seq = 0;
    // Records of 24 + 1,317 bytes; an entry's body starts at 32 + 32 + 9 = 73, so its fourth record starts at byte 4096, a page boundary.
    const round = (l: typeof acme, who: string) => {
      for (let i = 0; i < 8; i++) l.writer.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.from(`${who}${String(seq++).padStart(8, '0')}-`.padEnd(1317, 'x')));
      l.writer.flush();
      journal.write();
      journal.syncNow();
      l.writer.flushDurable();
    };
    round(acme, 'A');
    round(beta, 'B'); // file 1: both segments created
    journal.rotate();
    for (let i = 0; i < 400; i++) round(beta, 'B'); // file 2: beta's rounds only
    const earlier = readFileSync(join(journalDir, formatJournalName(2)));
    const upTo = journal.rotate();
    await acme.writer.syncCheckpoint(acme.writer.takeCheckpoint());
    await beta.writer.syncCheckpoint(beta.writer.takeCheckpoint());
    journal.retireUpTo(upTo);
    expect(readdirSync(journalDir)).toEqual([formatSpareName(2)]);
    const durable = statSync(join(acme.dir, formatSegmentName(1))).size;
    const before = laneRecords(acme.dir);

    // acme's round goes into the spare, now file 3. Power is lost before its fdatasync returns: the
    // page with its entry header reached the disk, the pages after it did not (the spare's earlier
    // bytes are there: beta's records, at the same record boundaries), nor did acme's segment write.
    round(acme, 'A');
    const file = join(journalDir, formatJournalName(3));
    const lost = Buffer.from(readFileSync(file));
    const e = decodeJournal(lost, 3).entries[0]!;
    expect(e.body.byteOffset - lost.byteOffset + 3 * 1341).toBe(4096);
    earlier.copy(lost, 4096, 4096, 16384);
    // The bytes now after 4096 are whole records of beta's whose own CRCs check.
    expect(lost.subarray(4096 + 24, 4096 + 33).toString()).toMatch(/^B\d{8}$/);
    writeFileSync(file, lost);
    journal.close();
    truncateSync(join(acme.dir, formatSegmentName(1)), durable);

    const j = decodeJournal(lost, 3);
    expect(j.entries).toEqual([]);
    expect(j.stop).toMatchObject({ kind: 'torn', offset: JOURNAL_HEADER_SIZE, why: 'entry CRC mismatch' });
    const r = replayJournalDir(wal, journalDir);
    expect(r).toMatchObject({ entries: 0, stops: [expect.objectContaining({ kind: 'torn' })] });
    repairLane(acme.dir);
    // acme has what was acknowledged, and nothing of beta's.
    expect(laneRecords(acme.dir)).toEqual(before);
  });

  it('a spare renamed to its number whose new header never reached the disk is read as torn and empty', async () => {
    const s = setup();
    for (let i = 0; i < 300; i++) s.round(1);
    await s.checkpoint();
    // The crash came right after the rename: the file has its earlier header (number 1) under the name of 2.
    renameSync(join(s.journalDir, formatSpareName(1)), s.fileOf(2));
    const j = decodeJournal(readFileSync(s.fileOf(2)), 2);
    expect(j.entries).toEqual([]);
    expect(j.stop).toMatchObject({ kind: 'torn', offset: 0, why: 'journal number 1 does not match file name (2)' });
    const r = replayJournalDir(wal, s.journalDir);
    expect(r).toMatchObject({ files: 1, entries: 0 });
    expect(listJournalFiles(s.journalDir)).toEqual([]);
  });

  it('keeps at most two spares, the largest, and deletes a retired file shorter than 1 MiB', async () => {
    const s = setup();
    s.round(1); // file 1: a few KiB
    await s.checkpoint();
    expect(s.files()).toEqual([]); // too short to keep
    for (let i = 0; i < 300; i++) s.round(1); // file 2, ~1.2 MiB
    await s.checkpoint();
    for (let i = 0; i < 600; i++) s.round(1); // file 3 (the spare of 2, grown to ~2.4 MiB)
    await s.checkpoint();
    expect(s.journal.spareCount).toBe(1);
    const files = s.files();
    expect(files).toEqual([formatSpareName(3)]);
    expect(statSync(join(s.journalDir, formatSpareName(3))).size).toBeGreaterThan(2 * MiB);
  });

  it('moves on into a ready spare only when no sync of the open file is in flight', async () => {
    const s = setup();
    for (let i = 0; i < 300; i++) s.round(1);
    const upTo = s.journal.rotate();
    await s.lane.syncCheckpoint(s.lane.takeCheckpoint());
    s.round(1); // file 2: a new, appended file (no spare yet)
    // A round's sync in flight (two rounds in flight), and meanwhile file 1 becomes a spare.
    s.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('in flight'));
    s.lane.flush();
    s.journal.write();
    const inFlight = s.journal.sync();
    s.journal.retireUpTo(upTo);
    expect(s.journal.spareCount).toBe(1);
    // The round written behind it stays in file 2.
    s.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('behind it'));
    s.lane.flush();
    s.journal.write();
    expect(s.journal.spareCount).toBe(1);
    await inFlight;
    s.journal.syncNow();
    // Nothing in flight now: the next round goes on in the spare, as file 3.
    s.round(1);
    expect(s.journal.spareCount).toBe(0);
    expect(listJournalFiles(s.journalDir)).toEqual([2, 3]);
    expect(decodeJournal(readFileSync(s.fileOf(2)), 2).entries.map((e) => e.records)).toEqual([1, 1, 1]);
  });

  it('counts the bytes since the checkpoint\'s rotation across the files rounds moved on to', async () => {
    const s = setup();
    for (let i = 0; i < 300; i++) s.round(1);
    await s.checkpoint();
    const before = s.journal.bytesSinceRotate;
    expect(before).toBe(0);
    s.round(1); // file 2 (appended, then the spare at the next round)
    s.round(1);
    expect(listJournalFiles(s.journalDir).length).toBe(1);
    expect(s.journal.bytesSinceRotate).toBeGreaterThan(2 * 4096);
    s.journal.rotate();
    expect(s.journal.bytesSinceRotate).toBe(0);
  });

  it('cuts a spare back when a write into it fails: the refused round is not in it, and the next round goes on from there', async () => {
    let fail = false;
    const ops: FileOps = {
      ...NODE_FILE_OPS,
      // The bytes reach the file, then the call fails (a failing disk, say): whole entries of the refused round sit in the spare.
      writev: (fd, buffers, position) => {
        const n = NODE_FILE_OPS.writev(fd, buffers, position);
        if (fail) throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
        return n;
      },
    };
    const s = setup({ journalOps: ops });
    for (let i = 0; i < 300; i++) s.round(1);
    await s.checkpoint();
    s.round(2);
    fail = true;
    s.lane.stage(RecordType.LOGS, 1, 1, Buffer.from('refused'));
    s.lane.flush();
    expect(() => s.journal.write()).toThrow(/EIO/);
    fail = false;
    s.lane.refuseLastFlush();
    const after = s.round(1);
    expect(listJournalFiles(s.journalDir)).toEqual([2]);
    expect(decodeJournal(readFileSync(s.fileOf(2)), 2).entries.map((e) => e.records)).toEqual([2, 1]);
    // A process restart (the page cache kept everything): replay writes nothing refused back.
    s.journal.close();
    const r = s.restart();
    expect(r.records).not.toContain('refused');
    expect(r.records.slice(-1)).toEqual(after);
  });
});

describe('the life\'s first spare, prefilled with zeros', () => {
  it('is made on the pool once the first file holds 1 MiB, and the next round moves on into it', async () => {
    const s = setup({ recycle: false, prefillBytes: 2 * MiB });
    for (let i = 0; i < 200; i++) s.round(1);
    expect(s.journal.sparePreparing).toBe(false); // not for a journal that took a few requests
    for (let i = 0; i < 100; i++) s.round(1);
    expect(s.journal.sparePreparing).toBe(true);
    await s.journal.spareSettled();
    expect(s.journal.sparePreparing).toBe(false);
    expect(s.files()).toEqual([formatJournalName(1), formatSpareName(0)]);
    const spare = readFileSync(join(s.journalDir, formatSpareName(0)));
    expect(spare.length).toBe(2 * MiB);
    expect(spare.every((b) => b === 0)).toBe(true);
    const texts = s.round(2);
    expect(listJournalFiles(s.journalDir)).toEqual([1, 2]);
    expect(statSync(s.fileOf(2)).size).toBe(2 * MiB);
    const j = decodeJournal(readFileSync(s.fileOf(2)), 2);
    expect(j.entries.map((e) => e.records)).toEqual([2]);
    expect(j.stop.kind).toBe('end');
    expect(laneRecords(s.dir).slice(-2)).toEqual(texts);
    // Only the first spare is prefilled: with recycling off, a checkpoint deletes what it retires.
    await s.checkpoint();
    expect(s.files()).toEqual([]);
  });

  it('a prefill that fails leaves nothing behind, and the journal goes on appending', async () => {
    const ops: FileOps = {
      ...NODE_FILE_OPS,
      writeAsync: () => Promise.reject(Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })),
    };
    const s = setup({ recycle: false, prefillBytes: 2 * MiB, journalOps: ops });
    s.round(300);
    expect(s.journal.sparePreparing).toBe(true);
    await s.journal.spareSettled();
    expect(s.journal.spareCount).toBe(0);
    expect(s.files()).toEqual([formatJournalName(1)]);
    s.round(1);
    expect(listJournalFiles(s.journalDir)).toEqual([1]);
    expect(decodeJournal(readFileSync(s.fileOf(1)), 1).entries).toHaveLength(2);
  });

  it('closing the journal removes the spares, and a prefill still running leaves no file', async () => {
    const s = setup({ prefillBytes: 8 * MiB });
    s.round(300);
    expect(s.journal.sparePreparing).toBe(true);
    s.journal.close();
    await s.journal.spareSettled();
    expect(s.files()).toEqual([formatJournalName(1)]);
    expect(existsSync(join(s.journalDir, SPARE_TMP_NAME))).toBe(false);
  });

  it('replay deletes spares and a half-made one', () => {
    const s = setup();
    s.round(1);
    s.journal.close();
    writeFileSync(join(s.journalDir, formatSpareName(7)), Buffer.alloc(4096, 1));
    writeFileSync(join(s.journalDir, SPARE_TMP_NAME), Buffer.alloc(4096));
    const r = replayJournalDir(wal, s.journalDir, { removeDir: true });
    expect(r).toMatchObject({ files: 1, entries: 1 });
    expect(existsSync(s.journalDir)).toBe(false);
  });
});

describe('entries of a version-4 file, and of version 3', () => {
  it('an entry moved into another file at the same place does not check there (its CRC is seeded with its file\'s number)', () => {
    const s = setup({ recycle: false });
    s.round(1);
    s.journal.rotate();
    s.round(1);
    s.journal.close();
    const one = readFileSync(s.fileOf(1));
    const two = Buffer.from(readFileSync(s.fileOf(2)));
    const e = decodeJournal(one, 1).entries[0]!;
    expect(decodeJournal(two, 2).entries[0]!.at).toBe(e.at);
    one.copy(two, e.at, e.at, e.at + ENTRY_HEADER_SIZE + e.tag.length + e.body.length + ENTRY_HEADER_SIZE);
    const j = decodeJournal(two, 2);
    expect(j.entries).toEqual([]);
    // A new (appended) file is not a spare: there a mismatch is damage, as before.
    expect(j.stop).toMatchObject({ kind: 'corrupt', offset: JOURNAL_HEADER_SIZE, why: 'entry CRC mismatch' });
  });

  it('a version-3 file, whose entry CRCs do not cover the body, is still read', () => {
    const s = setup({ recycle: false });
    const texts = [...s.round(2), ...s.round(1)];
    s.journal.close();
    // The same file as a version-3 writer wrote it: the version, the header's CRC, and each entry's CRC without the body's digest.
    const b = Buffer.from(readFileSync(s.fileOf(1)));
    b.writeUInt16LE(JOURNAL_VERSION_3, 4);
    b.writeUInt32LE(crc32c(b.subarray(0, 28)), 28);
    const seed = 1;
    for (const e of decodeJournal(readFileSync(s.fileOf(1)), 1).entries) {
      const tagEnd = e.at + ENTRY_HEADER_SIZE + Buffer.byteLength(e.tag);
      const c = crc32c(b.subarray(e.at + ENTRY_HEADER_SIZE, tagEnd), crc32c(b.subarray(e.at + 8, e.at + ENTRY_HEADER_SIZE), crc32c(b.subarray(e.at, e.at + 4), seed)));
      b.writeUInt32LE(c, e.at + 4);
    }
    // Unchanged, a version-4 entry does not check as version 3 (its CRC covers the digest too).
    const asIs = Buffer.from(readFileSync(s.fileOf(1)));
    asIs.writeUInt16LE(JOURNAL_VERSION_3, 4);
    asIs.writeUInt32LE(crc32c(asIs.subarray(0, 28)), 28);
    expect(decodeJournal(asIs, 1).stop).toMatchObject({ kind: 'corrupt', why: 'entry CRC mismatch' });
    writeFileSync(s.fileOf(1), b);
    const j = decodeJournal(b, 1);
    expect(j.version).toBe(JOURNAL_VERSION_3);
    expect(j.entries.map((e) => e.records)).toEqual([2, 1]);
    expect(j.stop.kind).toBe('end');
    // A machine crash lost the segment's records: replay of the version-3 file brings them back.
    s.powerLoss(1);
    expect(s.restart().records).toEqual(texts);
  });
});
