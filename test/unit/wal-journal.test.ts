// The shard commit journal (src/wal/journal*.ts) against the real file
// system: LaneWriters wired to a ShardJournal as the writer shard wires them,
// the bytes decoded back, and the start-up replay on what a machine crash can
// leave (lane bytes lost after the journal's sync, a torn or corrupt journal
// tail, entries for segments sealed, retired or gone).

import { crc32c } from '@node-rs/crc32';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { walVerify } from '../../src/wal/commands.js';
import { FdCache } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { checkpointTriggerBytes, laneTag, listJournalFiles, replayForeignJournals, replayJournalDir, ShardJournal } from '../../src/wal/journal.js';
import {
  bodyDigest,
  decodeJournal,
  encodeEntryHeader,
  ENTRY_HEADER_SIZE,
  formatJournalName,
  JOURNAL_HEADER_SIZE,
  JOURNAL_ROOT,
  journalDirName,
  parseJournalName,
} from '../../src/wal/journal-format.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { LOGS_TABLE, TRACES_TABLE, laneDir, listLaneDirs } from '../../src/wal/layout.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-journal-'));
});
afterEach(() => {
  rmSync(wal, { recursive: true, force: true });
});

const jdir = () => join(wal, JOURNAL_ROOT, journalDirName(0, 1));

/** Two lanes (tenant acme's logs, the default tenant's traces) feeding one journal, as a shard wires them. */
function shard(opts: { segmentBytes?: number; cache?: FdCache; fileBytes?: number; ops?: FileOps } = {}) {
  const journal = new ShardJournal({ dir: jdir(), ...(opts.fileBytes !== undefined ? { fileBytes: opts.fileBytes } : {}), ...(opts.ops !== undefined ? { ops: opts.ops } : {}) });
  const cache = opts.cache ?? new FdCache(8);
  const mk = (dir: string) =>
    new LaneWriter({
      dir,
      segmentBytes: opts.segmentBytes ?? 1 << 20,
      fdCache: cache,
      journaled: true,
      onWritten: (segment, offset, iov, n, bytes, records) => journal.stage(laneTag(wal, dir), segment, offset, iov, 0, n, bytes, records),
    });
  const a = mk(laneDir(wal, 'acme', LOGS_TABLE));
  const b = mk(laneDir(wal, 'default', TRACES_TABLE));
  /** One round: stage, flush both lanes, append to the journal, one fdatasync. */
  const round = (texts: { a?: string[]; b?: string[] }) => {
    for (const t of texts.a ?? []) a.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.from(t));
    for (const t of texts.b ?? []) b.stage(RecordType.TRACES, 2, 1_700_000_000_000, Buffer.from(t));
    a.flush();
    b.flush();
    journal.write();
    journal.syncNow();
  };
  return { journal, a, b, round, cache };
}

function payloads(dir: string, segment = 1): string[] {
  const out: string[] = [];
  for (const r of new SegmentReader(join(dir, formatSegmentName(segment)))) out.push(Buffer.from(r.payload).toString());
  return out;
}

async function verify(): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await walVerify(wal, (l) => lines.push(l));
  return { code, out: lines.join('\n') };
}

function journalBytes(): Buffer {
  const files = listJournalFiles(jdir());
  expect(files.length).toBe(1);
  return readFileSync(join(jdir(), formatJournalName(files[0]!)));
}

describe('journal format', () => {
  it('names files %08d.jnl and shard directories shard-<k>-of-<W>', () => {
    expect(formatJournalName(7)).toBe('00000007.jnl');
    expect(parseJournalName('00000007.jnl')).toBe(7);
    expect(parseJournalName('7.jnl')).toBe(0);
    expect(parseJournalName('00000007.jnl.tmp')).toBe(0);
    expect(journalDirName(2, 4)).toBe('shard-2-of-4');
  });

  it('one round of two lanes is two entries, tagged by lane, whose bodies are the segment bytes at their offsets', () => {
    const s = shard();
    s.round({ a: ['a1', 'a2'], b: ['b1'] });
    s.round({ a: ['a3'] });
    const j = decodeJournal(journalBytes());
    expect(j.stop.kind).toBe('end');
    // The round that creates a segment journals its header too: offset 0.
    expect(j.entries.map((e) => [e.tag, e.segment, e.offset, e.records])).toEqual([
      ['acme/logs', 1, 0, 2],
      ['traces', 1, 0, 1],
      ['acme/logs', 1, SEGMENT_HEADER_SIZE + 2 * (24 + 2), 1],
    ]);
    for (const e of j.entries) {
      const seg = readFileSync(join(wal, e.tag, formatSegmentName(e.segment)));
      expect(Buffer.from(e.body).equals(seg.subarray(e.offset, e.offset + e.body.length))).toBe(true);
    }
  });

  it('an entry CRC is the CRC-32C of header bytes [0, 4) and [8, 32) and the tag, short tag or long', () => {
    for (const len of [1, 9, 128, 129, 1024]) {
      const tag = Buffer.alloc(len, 0x61 + (len % 26));
      const h = Buffer.alloc(ENTRY_HEADER_SIZE);
      encodeEntryHeader(h, 0, tag, 0x1_0000_0003, 4096, 700, 5);
      const summed = Buffer.concat([h.subarray(0, 4), h.subarray(8, ENTRY_HEADER_SIZE), tag]);
      expect(h.readUInt32LE(4)).toBe(crc32c(summed));
    }
  });

  it('a version-4 entry CRC goes on, from the file number, over the body digest: the segment header, then each record\'s CRC field', () => {
    const s = shard();
    s.round({ a: ['a1', 'a22'] });
    s.round({ a: ['a333', ''] });
    const b = journalBytes();
    const j = decodeJournal(b, 1);
    expect(j.entries.map((e) => e.offset)).toEqual([0, SEGMENT_HEADER_SIZE + 2 * 24 + 5]);
    for (const e of j.entries) {
      const body = Buffer.from(e.body);
      const parts: Buffer[] = e.offset === 0 ? [body.subarray(0, SEGMENT_HEADER_SIZE)] : [];
      for (let off = e.offset === 0 ? SEGMENT_HEADER_SIZE : 0; off < body.length; off += 24 + body.readUInt32LE(off + 4)) parts.push(body.subarray(off + 8, off + 12));
      const digest = Buffer.alloc(4);
      digest.writeUInt32LE(crc32c(Buffer.concat(parts)));
      const tagEnd = e.at + ENTRY_HEADER_SIZE + e.tag.length;
      const summed = Buffer.concat([b.subarray(e.at, e.at + 4), b.subarray(e.at + 8, tagEnd), digest]);
      expect(b.readUInt32LE(e.at + 4)).toBe(crc32c(summed, 1));
      // The digest does not depend on how the body's bytes are split into buffers (a writer's iovec).
      for (const cut of [1, 7, 12, 25, 33, 60]) {
        const pieces: Uint8Array[] = [];
        for (let at = 0; at < body.length; at += cut) pieces.push(body.subarray(at, Math.min(body.length, at + cut)));
        pieces.splice(1, 0, new Uint8Array(0));
        expect(bodyDigest(pieces, 0, pieces.length, e.offset === 0)).toBe(digest.readUInt32LE(0));
      }
    }
  });

  it('a journal with a bad header has no entries', () => {
    const s = shard();
    s.round({ a: ['x'] });
    const b = journalBytes();
    b[0] = 0x00;
    const j = decodeJournal(b);
    expect(j.entries).toEqual([]);
    expect(j.stop).toMatchObject({ kind: 'corrupt', offset: 0 });
  });
});

describe('journal replay', () => {
  it('writes back lane bytes a machine crash lost after the journal sync, once, and verify is clean', async () => {
    const s = shard();
    s.round({ a: ['a1', 'a2'], b: ['b1'] });
    s.round({ a: ['a3'], b: ['b2', 'b3'] });
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    const traces = laneDir(wal, 'default', TRACES_TABLE);
    // The page cache never reached the disk: only the synced headers are there.
    truncateSync(join(acme, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    truncateSync(join(traces, formatSegmentName(1)), SEGMENT_HEADER_SIZE + 5); // and a torn start of b1
    const r = replayJournalDir(wal, jdir());
    expect(r).toMatchObject({ files: 1, entries: 4, present: 0, rewritten: 4, rewrittenRecords: 6, skipped: 0, stops: [] });
    expect(payloads(acme)).toEqual(['a1', 'a2', 'a3']);
    expect(payloads(traces)).toEqual(['b1', 'b2', 'b3']);
    expect(listJournalFiles(jdir())).toEqual([]);
    expect((await verify()).code).toBe(0);
  });

  it('leaves records already present alone (a process crash: the page cache kept them)', () => {
    const s = shard();
    s.round({ a: ['a1'], b: ['b1'] });
    s.round({ a: ['a2'] });
    const acmeSeg = join(laneDir(wal, 'acme', LOGS_TABLE), formatSegmentName(1));
    const before = readFileSync(acmeSeg);
    const r = replayJournalDir(wal, jdir());
    expect(r).toMatchObject({ entries: 3, present: 3, rewritten: 0, rewrittenRecords: 0 });
    expect(readFileSync(acmeSeg).equals(before)).toBe(true);
    // Replaying again (a crash during recovery) finds nothing: the files were deleted after the sync.
    expect(replayJournalDir(wal, jdir())).toMatchObject({ files: 0, entries: 0 });
  });

  it('cuts a torn journal tail at the last whole entry: earlier entries replay, the torn one does not', () => {
    const s = shard();
    s.round({ a: ['a1'] });
    s.round({ a: ['a2'] });
    const file = join(jdir(), formatJournalName(listJournalFiles(jdir())[0]!));
    const whole = readFileSync(file);
    const j = decodeJournal(whole);
    const second = j.entries[1]!.at;
    writeFileSync(file, whole.subarray(0, second + ENTRY_HEADER_SIZE + 3)); // the second append torn
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    truncateSync(join(acme, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    const r = replayJournalDir(wal, jdir());
    expect(r.stops).toEqual([expect.objectContaining({ kind: 'torn', offset: second })]);
    expect(r).toMatchObject({ entries: 1, rewritten: 1 });
    expect(payloads(acme)).toEqual(['a1']);
  });

  it('stops at an entry whose CRC does not match (and at a body record whose CRC does not)', () => {
    const s = shard();
    s.round({ a: ['a1'] });
    s.round({ a: ['a2'] });
    s.round({ a: ['a3'] });
    const bytes = journalBytes();
    const j = decodeJournal(bytes);
    const flippedHeader = Buffer.from(bytes);
    flippedHeader[j.entries[1]!.at + 16] ^= 0x01; // the segment number of entry 2
    expect(decodeJournal(flippedHeader).stop).toMatchObject({ kind: 'corrupt', offset: j.entries[1]!.at, why: 'entry CRC mismatch' });
    expect(decodeJournal(flippedHeader).entries).toHaveLength(1);
    const flippedBody = Buffer.from(bytes);
    const e3 = j.entries[2]!;
    flippedBody[e3.at + ENTRY_HEADER_SIZE + e3.tag.length + 24] ^= 0x01; // a payload byte of entry 3
    expect(decodeJournal(flippedBody).stop).toMatchObject({ kind: 'corrupt', offset: e3.at, why: 'record CRC mismatch in entry body' });
    expect(decodeJournal(flippedBody).entries).toHaveLength(2);
    expect(JOURNAL_HEADER_SIZE).toBe(j.entries[0]!.at);
  });

  it('skips entries past the header of segments the compactor retired; recreates a segment whose header entry is live; restores any segment that still has a header', async () => {
    const s = shard({ segmentBytes: SEGMENT_HEADER_SIZE + 2 * (24 + 2) });
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    const traces = laneDir(wal, 'default', TRACES_TABLE);
    s.round({ a: ['1a'], b: ['t1'] });
    // A checkpoint: segments synced with their directories, the journal up to it deleted.
    const upTo = s.journal.rotate();
    for (const w of [s.a, s.b]) await w.syncCheckpoint(w.takeCheckpoint());
    s.journal.retireUpTo(upTo);
    s.round({ a: ['1b'], b: ['t2'] }); // past the headers of acme 1 and traces 1
    s.round({ a: ['2a'] }); // acme 1 is full: acme 2 is created, its header journaled
    await s.b.seal();
    // acme 1 was durable at the checkpoint: gone now, only the compactor retired it.
    rmSync(join(acme, formatSegmentName(1)));
    // traces 1 lost what came after the checkpoint.
    truncateSync(join(traces, formatSegmentName(1)), SEGMENT_HEADER_SIZE + 26);
    // acme 2 never was durable: a machine crash left it empty.
    truncateSync(join(acme, formatSegmentName(2)), 0);
    const r = replayJournalDir(wal, jdir());
    expect(r).toMatchObject({ entries: 3, skipped: 1, present: 0, rewritten: 2, recreated: 1 });
    expect(payloads(traces)).toEqual(['t1', 't2']);
    expect(payloads(acme, 2)).toEqual(['2a']);
    expect(existsSync(join(acme, formatSegmentName(1)))).toBe(false);
  });

  it('replays only the lanes a filter accepts', () => {
    const s = shard();
    s.round({ a: ['a1'], b: ['b1'] });
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    const traces = laneDir(wal, 'default', TRACES_TABLE);
    truncateSync(join(acme, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    truncateSync(join(traces, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    const r = replayJournalDir(wal, jdir(), { lanes: (tag) => tag === 'traces' });
    expect(r).toMatchObject({ entries: 2, rewritten: 1 });
    expect(payloads(traces)).toEqual(['b1']);
    expect(payloads(acme)).toEqual([]);
  });

  it('journals of another worker count are replayed and removed; the current ones are left to their workers', () => {
    const foreign = new ShardJournal({ dir: join(wal, JOURNAL_ROOT, journalDirName(1, 2)) });
    const dir = laneDir(wal, 'acme', LOGS_TABLE);
    const w = new LaneWriter({ dir, segmentBytes: 1 << 20, onWritten: (seg, off, iov, n, bytes, recs) => foreign.stage(laneTag(wal, dir), seg, off, iov, 0, n, bytes, recs) });
    w.stage(RecordType.LOGS, 1, 1, Buffer.from('kept'));
    w.flush();
    foreign.write();
    foreign.syncNow();
    foreign.close();
    const own = new ShardJournal({ dir: jdir() });
    own.stage(laneTag(wal, dir), 1, 10_000, [], 0, 0, 0, 0);
    own.write();
    own.close();
    truncateSync(join(dir, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    const done = replayForeignJournals(wal, 1);
    expect([...done.keys()]).toEqual(['shard-1-of-2']);
    expect(done.get('shard-1-of-2')).toMatchObject({ rewritten: 1 });
    expect(existsSync(join(wal, JOURNAL_ROOT, 'shard-1-of-2'))).toBe(false);
    expect(existsSync(jdir())).toBe(true);
    expect(payloads(dir)).toEqual(['kept']);
  });

  it('with no worker count (compact --ingester-stopped) every journal directory is replayed and removed', () => {
    const s = shard();
    s.round({ a: ['a1'], b: ['b1'] });
    s.journal.close();
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    truncateSync(join(acme, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    const done = replayForeignJournals(wal, 0);
    expect([...done.keys()]).toEqual(['shard-0-of-1']);
    expect(done.get('shard-0-of-1')).toMatchObject({ rewritten: 1, present: 1 });
    expect(existsSync(jdir())).toBe(false);
    expect(payloads(acme)).toEqual(['a1']);
  });

  it('the journal directory is never a lane, and verify reads it as the journal, not as an unexpected entry', async () => {
    const s = shard();
    s.round({ a: ['a1'], b: ['b1'] });
    expect(listLaneDirs(wal).map((l) => l.tenant)).toEqual(['default', 'acme']);
    const v = await verify();
    expect(v.code).toBe(0);
    expect(v.out).not.toContain('unexpected');
    expect(v.out).not.toMatch(/lane \S+ \S+ \S*\.journal/);
    expect(v.out).toContain('verify: 2 lanes, 2 segments, 2 records, 0 torn tails, 0 problems: OK');
  });
});

describe('ShardJournal files', () => {
  it('rotate() starts a new file on the next write; retireUpTo deletes the old ones only', () => {
    const s = shard();
    s.round({ a: ['a1'] });
    const upTo = s.journal.rotate();
    expect(upTo).toBe(1);
    s.round({ a: ['a2'] });
    expect(listJournalFiles(jdir())).toEqual([1, 2]);
    expect(s.journal.retireUpTo(upTo)).toBe(1);
    expect(listJournalFiles(jdir())).toEqual([2]);
    expect(decodeJournal(journalBytes()).entries.map((e) => e.offset)).toEqual([SEGMENT_HEADER_SIZE + 26]);
  });

  it('a full file goes on in a new one at the next round, checkpoint or not; replay reads every file, and the checkpoint trigger counts them all', async () => {
    const s = shard({ fileBytes: 4096 });
    const sent = Array.from({ length: 30 }, (_, k) => `r${k}-${'x'.repeat(300)}`);
    for (const t of sent) s.round({ a: [t] });
    const files = listJournalFiles(jdir());
    expect(files.length).toBeGreaterThanOrEqual(3);
    for (const n of files) expect(statSync(join(jdir(), formatJournalName(n))).size).toBeLessThanOrEqual(4096 + 512);
    expect(s.journal.bytesSinceRotate).toBeGreaterThan(30 * 300);
    // A machine crash lost the lane's writes: replay writes them back from every file, in order.
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    truncateSync(join(acme, formatSegmentName(1)), SEGMENT_HEADER_SIZE);
    s.journal.close();
    const r = replayJournalDir(wal, jdir());
    expect(r).toMatchObject({ files: files.length, entries: 30, rewritten: 30, stops: [] });
    expect(payloads(acme)).toEqual(sent);
    expect((await verify()).code).toBe(0);
  });

  it('a checkpoint retires every file a full one gave way to', () => {
    const s = shard({ fileBytes: 2048 });
    for (let k = 0; k < 12; k++) s.round({ a: [`r${k}-${'y'.repeat(300)}`] });
    expect(listJournalFiles(jdir()).length).toBeGreaterThan(1);
    const upTo = s.journal.rotate();
    expect(s.journal.retireUpTo(upTo)).toBeGreaterThan(1);
    expect(listJournalFiles(jdir())).toEqual([]);
  });

  it('a retirement cut short leaves the newest files, with no gap: replay from them restores every byte past their first entry', async () => {
    // The process dies in the middle of a checkpoint's retirement: here, the
    // third unlink fails and the loop stops where a SIGKILL would have.
    let unlinks = 0;
    const ops: FileOps = {
      ...NODE_FILE_OPS,
      unlink: (p: string) => {
        if (++unlinks === 3) throw Object.assign(new Error('killed'), { code: 'EIO' });
        NODE_FILE_OPS.unlink(p);
      },
    };
    const s = shard({ fileBytes: 2048, ops });
    const sent: string[] = [];
    const send = (k: number) => {
      const t = `r${k}-${'z'.repeat(300)}`;
      sent.push(t);
      s.round({ a: [t] });
    };
    for (let k = 0; k < 30; k++) send(k);
    const upTo = s.journal.rotate();
    expect(upTo).toBeGreaterThan(4);
    send(30); // after the rotation: a newer file the checkpoint does not retire
    expect(() => s.journal.retireUpTo(upTo)).toThrow('killed');
    const left = listJournalFiles(jdir());
    // The two oldest went; the rest, up to the newest, are all there.
    expect(left).toEqual(Array.from({ length: upTo + 1 - 2 }, (_, i) => i + 3));
    // A machine crash then takes every lane byte from the first entry left
    // on (the bytes below it are the checkpoint's): replay puts them back.
    const first = Math.min(...left.flatMap((n) => decodeJournal(readFileSync(join(jdir(), formatJournalName(n)))).entries.map((e) => e.offset)));
    expect(first).toBeGreaterThan(SEGMENT_HEADER_SIZE);
    const acme = laneDir(wal, 'acme', LOGS_TABLE);
    truncateSync(join(acme, formatSegmentName(1)), first);
    s.journal.close();
    const r = replayJournalDir(wal, jdir());
    expect(r.stops).toEqual([]);
    expect(payloads(acme)).toEqual(sent);
    expect((await verify()).code).toBe(0);
  });

  it('a new journal never reuses the number of a file left on disk', () => {
    const s = shard();
    s.round({ a: ['a1'] });
    s.journal.close();
    const again = new ShardJournal({ dir: jdir() });
    again.stage(Buffer.from('acme/logs'), 1, 32, [], 0, 0, 0, 0);
    again.write();
    expect(listJournalFiles(jdir())).toEqual([1, 2]);
  });
});

describe('FdCache lazyEviction', () => {
  /** node:fs, counting fdatasyncs. */
  function counting(): FileOps & { syncs: number } {
    const ops = {
      ...NODE_FILE_OPS,
      syncs: 0,
      fdatasyncSync(fd: number) {
        ops.syncs++;
        NODE_FILE_OPS.fdatasyncSync(fd);
      },
      fdatasync(fd: number) {
        ops.syncs++;
        return NODE_FILE_OPS.fdatasync(fd);
      },
    };
    return ops;
  }

  it('evicts a dirty descriptor without a sync, and syncs its file when asked (reopening it)', async () => {
    const ops = counting();
    const cache = new FdCache(1, ops, { lazyEviction: true });
    const s = shard({ cache });
    ops.syncs = 0;
    s.a.stage(RecordType.LOGS, 1, 1, Buffer.from('a1'));
    s.a.flush();
    s.b.stage(RecordType.TRACES, 1, 1, Buffer.from('b1')); // opens traces: evicts acme's dirty descriptor
    s.b.flush();
    expect(ops.syncs).toBe(0); // creating the two segments (journaled) and the eviction: none
    expect(cache.openCount).toBe(1);
    await s.a.sync();
    expect(ops.syncs).toBe(1);
    await s.a.sync(); // clean now
    expect(ops.syncs).toBe(1);
    expect(cache.openCount).toBe(1);
  });
});

describe('siglake wal verify and the journal', () => {
  it('lists each journal file; a torn tail is fine, a corrupt entry fails verify', async () => {
    const s = shard();
    s.round({ a: ['a1'], b: ['b1'] });
    s.round({ a: ['a2'] });
    let v = await verify();
    expect(v.code).toBe(0);
    expect(v.out).toContain(`journal .journal/shard-0-of-1/00000001.jnl: 3 entries, 3 records, ends cleanly`);
    const file = join(jdir(), formatJournalName(1));
    const whole = readFileSync(file);
    const last = decodeJournal(whole).entries[2]!.at;
    writeFileSync(file, whole.subarray(0, last + 7));
    v = await verify();
    expect(v.code).toBe(0);
    expect(v.out).toContain(`2 entries, 2 records, ends torn at offset ${last}`);
    const bad = Buffer.from(whole);
    bad[decodeJournal(whole).entries[1]!.at + 24] ^= 0xff; // the offset field of entry 2
    writeFileSync(file, bad);
    v = await verify();
    expect(v.code).toBe(1);
    expect(v.out).toContain('DAMAGED: journal .journal/shard-0-of-1/00000001.jnl: 1 entries, 1 records, corrupt at offset');
  });
});

describe('when a checkpoint starts', () => {
  it('after 256 MiB of journal for up to 4,096 lanes written since the last one, then 64 KiB a lane, at most 1 GiB', () => {
    const MiB = 1024 * 1024;
    expect([0, 1, 4096].map(checkpointTriggerBytes)).toEqual([256 * MiB, 256 * MiB, 256 * MiB]);
    expect(checkpointTriggerBytes(4097)).toBe(256 * MiB + 64 * 1024);
    expect(checkpointTriggerBytes(10_000)).toBe(625 * MiB);
    expect([16_384, 100_000].map(checkpointTriggerBytes)).toEqual([1024 * MiB, 1024 * MiB]);
  });
});

