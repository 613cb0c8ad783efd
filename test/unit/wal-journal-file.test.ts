// The commit journal read a piece at a time (src/wal/journal-file.ts), as
// replay, `wal verify` and `wal dump` read it since stop 54: through windows
// far smaller than its entries, it must read exactly what decodeJournal reads
// from the whole file (the same entries, byte for byte, and the same stop),
// sum a long entry's body digest a window at a time, and never read more than
// a window at once before an entry's CRC vouches for its length.

import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FdCache } from '../../src/wal/fd-cache.js';
import { RecordType } from '../../src/wal/format.js';
import { laneTag, listJournalFiles, ShardJournal } from '../../src/wal/journal.js';
import { JournalFile } from '../../src/wal/journal-file.js';
import {
  BodyDigester,
  bodyDigest,
  decodeJournal,
  formatJournalName,
  JOURNAL_ROOT,
  journalDirName,
  JournalReader,
  type DecodedJournal,
  type JournalSource,
} from '../../src/wal/journal-format.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { LOGS_TABLE, laneDir, TRACES_TABLE } from '../../src/wal/layout.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-journal-file-'));
});
afterEach(() => {
  rmSync(wal, { recursive: true, force: true });
});

const jdir = () => join(wal, JOURNAL_ROOT, journalDirName(0, 1));

/**
 * A journal file the real writer made: rounds of two lanes with payloads from
 * 1 byte to 40 KiB (entries far longer than the small windows below), the
 * first round creating both segments (offset-0 entries). Returns its path.
 */
function writtenJournal(): string {
  const journal = new ShardJournal({ dir: jdir() });
  const cache = new FdCache(8);
  const mk = (dir: string) =>
    new LaneWriter({
      dir,
      segmentBytes: 1 << 20,
      fdCache: cache,
      journaled: true,
      onWritten: (segment, offset, iov, n, bytes, records) => journal.stage(laneTag(wal, dir), segment, offset, iov, 0, n, bytes, records),
    });
  const a = mk(laneDir(wal, 'acme', LOGS_TABLE));
  const b = mk(laneDir(wal, 'default', TRACES_TABLE));
  const sizes = [1, 700, 40_000, 3, 9_000, 65, 20_000];
  sizes.forEach((size, i) => {
    a.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.alloc(size, 0x41 + i));
    if (i % 2 === 0) a.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.alloc(size + 5, 0x61 + i));
    b.stage(RecordType.TRACES, 2, 1_700_000_000_000, Buffer.alloc(sizes[sizes.length - 1 - i]!, 0x30 + i));
    a.flush();
    b.flush();
    journal.write();
    journal.syncNow();
  });
  journal.close();
  const files = listJournalFiles(jdir());
  expect(files).toEqual([1]);
  return join(jdir(), formatJournalName(1));
}

/** A source that records the longest read it was asked for. */
class Watched implements JournalSource {
  longest = 0;
  constructor(private readonly inner: JournalFile) {}
  get size(): number {
    return this.inner.size;
  }
  get window(): number {
    return this.inner.window;
  }
  bytes(pos: number, len: number): Uint8Array {
    this.longest = Math.max(this.longest, len);
    return this.inner.bytes(pos, len);
  }
  zeros(from: number, to: number): boolean {
    return this.inner.zeros(from, to);
  }
}

/** The file read through `window`-byte pieces, as decodeJournal's result. */
function readInPieces(path: string, window: number, expected = 1): DecodedJournal & { longest: number } {
  const file = new JournalFile(path, window);
  try {
    const src = new Watched(file);
    const r = new JournalReader(src, expected);
    const entries = [];
    for (let e = r.next(); e !== null; e = r.next()) entries.push(e);
    return { number: r.number, version: r.version, entries, stop: r.stop!, longest: src.longest };
  } finally {
    file.close();
  }
}

/** Entries as plain values, bodies as bytes: comparable across the two readers. */
const plain = (j: DecodedJournal) => ({
  number: j.number,
  version: j.version,
  stop: j.stop,
  entries: j.entries.map((e) => ({ at: e.at, tag: e.tag, segment: e.segment, offset: e.offset, records: e.records, body: Buffer.from(e.body).toString('hex') })),
});

const WINDOWS = [33, 64, 1000, 4096, 1 << 20];

describe('a journal file read a piece at a time', () => {
  it('reads the same entries, byte for byte, and the same stop as decodeJournal of the whole file, through windows far smaller than its entries', () => {
    const path = writtenJournal();
    const whole = decodeJournal(readFileSync(path), 1);
    expect(whole.stop.kind).toBe('end');
    expect(whole.entries.length).toBe(14);
    expect(Math.max(...whole.entries.map((e) => e.body.length))).toBeGreaterThan(40_000);
    for (const w of WINDOWS) expect(plain(readInPieces(path, w)), `window ${w}`).toEqual(plain(whole));
  });

  it('made long and sparse: the entries end at the terminator, and nothing past it is read', () => {
    const path = writtenJournal();
    const whole = decodeJournal(readFileSync(path), 1);
    const longestEntry = Math.max(...whole.entries.map((e) => e.body.length));
    truncateSync(path, 3 * 2 ** 30); // 3 GiB, sparse: past what Node reads at once
    for (const w of WINDOWS) {
      const j = readInPieces(path, w);
      expect(plain(j), `window ${w}`).toEqual(plain(whole));
      expect(j.longest).toBeLessThanOrEqual(Math.max(w, longestEntry));
    }
  });

  it('stops where decodeJournal stops on a torn tail, a damaged CRC, a damaged record and a version-2-style zero tail', () => {
    const path = writtenJournal();
    const b = readFileSync(path);
    const whole = decodeJournal(b, 1);
    const third = whole.entries[3]!;
    const bodyAt = third.body.byteOffset - b.byteOffset;
    const cases: [string, Buffer][] = [
      ['cut inside an entry body', b.subarray(0, bodyAt + 10)],
      ['cut inside an entry header', b.subarray(0, third.at + 7)],
      ['entry CRC flipped', Buffer.from(b).fill(0x5a, third.at + 4, third.at + 5)],
      ['record payload flipped', Buffer.from(b).fill(0x00, bodyAt + 40, bodyAt + 41)],
      ['zeros after a cut at an entry boundary', Buffer.concat([b.subarray(0, third.at), Buffer.alloc(100_000)])],
    ];
    for (const [what, bytes] of cases) {
      writeFileSync(path, bytes);
      const expected = decodeJournal(bytes, 1);
      expect(expected.entries.length, what).toBeLessThan(whole.entries.length);
      for (const w of WINDOWS) expect(plain(readInPieces(path, w)), `${what}, window ${w}`).toEqual(plain(expected));
    }
  });

  it('a damaged body length declaring 64 MiB over a sparse tail is summed a window at a time and refused, never read into one buffer', () => {
    const path = writtenJournal();
    const b = readFileSync(path);
    const whole = decodeJournal(b, 1);
    const third = whole.entries[3]!;
    b.writeUInt32LE(64 * 2 ** 20, third.at); // its body length: 64 MiB
    writeFileSync(path, b);
    truncateSync(path, third.at + 64 * 2 ** 20 + 4096); // the declared body fits the (sparse) file
    const w = 1 << 20;
    const j = readInPieces(path, w);
    expect(j.stop).toMatchObject({ kind: 'corrupt', offset: third.at, why: 'entry CRC mismatch' });
    expect(j.entries.length).toBe(3);
    expect(j.longest).toBeLessThanOrEqual(w);
  });

  it("BodyDigester, fed a body in pieces split anywhere, sums what the writer's bodyDigest sums", () => {
    const path = writtenJournal();
    const j = decodeJournal(readFileSync(path), 1);
    for (const e of j.entries) {
      const want = bodyDigest([e.body], 0, 1, e.offset === 0);
      for (const piece of [1, 5, 12, 31, 33, 1000]) {
        const d = new BodyDigester(e.offset === 0);
        for (let at = 0; at < e.body.length; at += piece) d.update(e.body.subarray(at, Math.min(e.body.length, at + piece)));
        expect(d.value, `entry at ${e.at}, pieces of ${piece}`).toBe(want);
      }
    }
  });
});
