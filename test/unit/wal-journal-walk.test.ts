// A version-4 entry longer than the window is checked by a walk over its
// record headers (src/wal/journal-format.ts, stop 55), their bytes read by
// JournalFile.head outside the window: through windows far smaller than its
// entries, a journal file must read exactly what decodeJournal reads from the
// whole file, and an entry whose length is damaged over zeros must stop
// where decodeJournal stops, with the same why.

import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FdCache } from '../../src/wal/fd-cache.js';
import { RecordType } from '../../src/wal/format.js';
import { laneTag, ShardJournal } from '../../src/wal/journal.js';
import { JournalFile } from '../../src/wal/journal-file.js';
import { decodeJournal, formatJournalName, JOURNAL_ROOT, journalDirName, JournalReader, type DecodedJournal } from '../../src/wal/journal-format.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { LOGS_TABLE, laneDir } from '../../src/wal/layout.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-journal-walk-'));
});
afterEach(() => {
  rmSync(wal, { recursive: true, force: true });
});

/** A journal file the real writer made: rounds of one lane, each of several records from 1 byte to 200 KiB. */
function writtenJournal(rounds = [[1, 200_000, 3], [70_000, 70_000, 70_000, 9], [5, 6, 7, 8, 100_000]], segmentBytes = 1 << 22): string {
  const dir = join(wal, JOURNAL_ROOT, journalDirName(0, 1));
  const journal = new ShardJournal({ dir });
  const lane = laneDir(wal, 'acme', LOGS_TABLE);
  const w = new LaneWriter({
    dir: lane,
    segmentBytes,
    fdCache: new FdCache(8),
    journaled: true,
    onWritten: (segment, offset, iov, n, bytes, records) => journal.stage(laneTag(wal, lane), segment, offset, iov, 0, n, bytes, records),
  });
  for (const sizes of rounds) {
    sizes.forEach((size, i) => w.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.alloc(size, 0x41 + i)));
    w.flush();
    journal.write();
    journal.syncNow();
  }
  journal.close();
  return join(dir, formatJournalName(1));
}

/** Read through JournalFile itself (its head() too) with a `window`-byte window. */
function readThrough(path: string, window: number): DecodedJournal {
  const file = new JournalFile(path, window);
  try {
    const r = new JournalReader(file, 1);
    const entries = [];
    for (let e = r.next(); e !== null; e = r.next()) entries.push(e);
    return { number: r.number, version: r.version, entries, stop: r.stop! };
  } finally {
    file.close();
  }
}

const plain = (j: DecodedJournal) => ({
  stop: j.stop,
  entries: j.entries.map((e) => ({ at: e.at, tag: e.tag, segment: e.segment, offset: e.offset, records: e.records, body: Buffer.from(e.body).toString('hex') })),
});

describe('a version-4 journal file read through windows smaller than its entries', () => {
  it('reads what decodeJournal reads, whole, damaged in a record header or with a length damaged over zeros', () => {
    const path = writtenJournal();
    const b = readFileSync(path);
    const whole = decodeJournal(b, 1);
    expect(whole.stop.kind).toBe('end');
    expect(whole.entries.map((e) => e.records)).toEqual([3, 4, 5]);
    const second = whole.entries[1]!;
    const bodyAt = second.body.byteOffset - b.byteOffset;
    const longer = Buffer.from(b);
    longer.writeUInt32LE(50_000_000, second.at);
    const cases: [string, Buffer, number?][] = [
      ['as written', b],
      ['a record length in the body flipped', Buffer.from(b).fill(0x7f, bodyAt + 70_024 + 4, bodyAt + 70_024 + 5)],
      ['a record CRC in the body flipped', Buffer.from(b).fill(0x00, bodyAt + 8, bodyAt + 9)],
      ['the entry length damaged to 50 MB over a sparse tail', longer, second.at + 50_000_000 + 4096],
    ];
    for (const [what, bytes, size] of cases) {
      writeFileSync(path, bytes);
      if (size !== undefined) truncateSync(path, size);
      const expected = decodeJournal(readFileSync(path), 1);
      if (what !== 'as written') expect(expected.entries.length, what).toBe(1);
      for (const w of [33, 100, 4096, 65_536, 1 << 20]) expect(plain(readThrough(path, w)), `${what}, window ${w}`).toEqual(plain(expected));
    }
  });

  it('reads what decodeJournal reads for entries of empty records, entries that start a segment (its header in the body) and a run over several segments', () => {
    // Segments of 150,000 bytes: the 200,000-byte record goes alone into one, the rest roll over.
    const path = writtenJournal([[0, 0, 0], [0, 200_000, 0], [70_000, 0, 70_000, 0], [0], [5, 0, 7, 8, 100_000, 0]], 150_000);
    const whole = decodeJournal(readFileSync(path), 1);
    expect(whole.stop.kind).toBe('end');
    const starts = whole.entries.filter((e) => e.offset === 0);
    expect(starts.length).toBeGreaterThan(2);
    expect(whole.entries.some((e) => e.body.length === 24)).toBe(true);
    // Windows from one record header (24 bytes) up: every entry longer than one is walked.
    for (const w of [24, 25, 33, 44, 56, 57, 100, 4096, 65_536, 1 << 20]) expect(plain(readThrough(path, w)), `window ${w}`).toEqual(plain(whole));
  });
});
