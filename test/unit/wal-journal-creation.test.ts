// Segments created, rotated and sealed under the commit journal (`batch`
// mode) take no sync on the writer's path: the checkpoint makes them durable.
// Real files throughout; the FileOps the writer is given are node:fs wrapped
// to count the calls (observed, not replaced). A machine crash is simulated
// by taking away what was never synced: whole segment files, their headers,
// their records; the start-up replay then puts every journaled byte back.

import { crc32c } from '@node-rs/crc32';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { walVerify } from '../../src/wal/commands.js';
import { FdCache } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { decodeJournal, encodeEntryHeader, formatJournalName, JOURNAL_ROOT, JOURNAL_VERSION, journalDirName } from '../../src/wal/journal-format.js';
import { laneTag, listJournalFiles, replayJournalDir, ShardJournal } from '../../src/wal/journal.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { laneDir, listLaneDirs, LOGS_TABLE, TRACES_TABLE } from '../../src/wal/layout.js';
import { repairLane } from '../../src/wal/repair.js';
import { SEALED_MARKER } from '../../src/wal/sealed-marker.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-journal-create-'));
});
afterEach(() => rmSync(wal, { recursive: true, force: true }));

const jdir = () => join(wal, JOURNAL_ROOT, journalDirName(0, 1));

type Counted = 'fdatasync' | 'fsyncDir' | 'rename' | 'open';

/** node:fs, counting the calls that cost a sync (and the creations' opens and renames). */
function counting(): FileOps & { n: Record<Counted, number>; reset(): void } {
  const n: Record<Counted, number> = { fdatasync: 0, fsyncDir: 0, rename: 0, open: 0 };
  return {
    ...NODE_FILE_OPS,
    n,
    reset: () => {
      for (const k of Object.keys(n) as Counted[]) n[k] = 0;
    },
    open: (p, f) => {
      n.open++;
      return NODE_FILE_OPS.open(p, f);
    },
    fdatasyncSync: (fd) => {
      n.fdatasync++;
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
    fdatasync: (fd) => {
      n.fdatasync++;
      return NODE_FILE_OPS.fdatasync(fd);
    },
    rename: (a, b) => {
      n.rename++;
      NODE_FILE_OPS.rename(a, b);
    },
    fsyncDir: (p) => {
      n.fsyncDir++;
      NODE_FILE_OPS.fsyncDir(p);
    },
    fsyncDirAsync: (p) => {
      n.fsyncDir++;
      return NODE_FILE_OPS.fsyncDirAsync!(p);
    },
  };
}

/** Lanes wired to one journal as the shard loop wires them; `journaled` as in `batch` mode. */
function shard(opts: { segmentBytes: number; journaled?: boolean; ops?: FileOps; lanes?: string[] }) {
  const journal = new ShardJournal({ dir: jdir() });
  const cache = new FdCache(2, opts.ops ?? NODE_FILE_OPS, { lazyEviction: true });
  const lanes = (opts.lanes ?? ['acme']).map((tenant) => {
    const dir = laneDir(wal, tenant, LOGS_TABLE);
    const tag = laneTag(wal, dir);
    const w = new LaneWriter({
      dir,
      segmentBytes: opts.segmentBytes,
      fdCache: cache,
      journaled: opts.journaled ?? true,
      now: () => 1_767_225_600_000,
      onWritten: (seg, off, iov, n, bytes, recs) => journal.stage(tag, seg, off, iov, 0, n, bytes, recs),
    });
    return w;
  });
  let seq = 0;
  /** One acknowledged round: one record of `bytes` payload bytes on each lane given. */
  const round = (bytes: number, which = lanes) => {
    for (const w of which) w.stage(RecordType.LOGS, 1, 1_767_225_600_000 + seq, Buffer.alloc(bytes, 0x61 + (seq++ % 26)));
    for (const w of which) w.flush();
    journal.write();
    journal.syncNow();
  };
  /** A whole checkpoint, as ShardLoop runs it; returns the markers it may write now. */
  const checkpoint = async (): Promise<Map<string, number>> => {
    const upTo = journal.rotate();
    const cps = lanes.map((w) => ({ w, cp: w.takeCheckpoint() }));
    for (const { w, cp } of cps) await w.syncCheckpoint(cp);
    journal.retireUpTo(upTo);
    return new Map(cps.filter((c) => c.cp.sealed > 0).map((c) => [c.w.dir, c.cp.sealed]));
  };
  return { journal, lanes, round, checkpoint, cache };
}

/** Every segment file of every lane under the WAL, with its bytes. */
function snapshot(): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const lane of listLaneDirs(wal)) {
    for (const s of listLaneFiles(lane.dir).segments) out.set(s.path, readFileSync(s.path));
  }
  return out;
}

async function verify(): Promise<number> {
  return walVerify(wal, () => undefined);
}

describe('segment creation under the commit journal', () => {
  it('creating, rotating and sealing take no fdatasync, no directory fsync and no rename; the checkpoint takes them, once per segment and once per lane directory', async () => {
    const ops = counting();
    const s = shard({ segmentBytes: SEGMENT_HEADER_SIZE + 2 * (24 + 100), ops });
    const [w] = s.lanes as [LaneWriter];
    s.round(100); // makes the lane directory (durable, once per lane per life) and segment 1
    await s.checkpoint();
    ops.reset();
    for (let i = 0; i < 5; i++) s.round(100); // segment 1 fills: 2, 3 created by rotation
    await w.seal(); // 3 sealed
    s.round(100); // 4 created
    expect(listLaneFiles(w.dir).segments.map((f) => f.number)).toEqual([1, 2, 3, 4]);
    expect(readdirSync(w.dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    expect(ops.n).toEqual({ fdatasync: 0, fsyncDir: 0, rename: 0, open: 3 });
    expect(existsSync(join(w.dir, SEALED_MARKER)), 'the seal wrote no marker').toBe(false);

    const markers = await s.checkpoint();
    // 1 (written since the last checkpoint), 2 (rotated), 3 (sealed), 4 (live): one fdatasync each;
    // the directory that gained 2, 3 and 4: one fsync.
    expect(ops.n.fdatasync).toBe(4);
    expect(ops.n.fsyncDir).toBe(1);
    expect(markers).toEqual(new Map([[w.dir, 3]]));
    expect(listJournalFiles(jdir())).toEqual([]);
    ops.reset();
    expect(await s.checkpoint()).toEqual(new Map());
    expect(ops.n.fdatasync + ops.n.fsyncDir, 'nothing written since: nothing to sync').toBe(0);
  });

  it('without the journal, creating a segment costs an fdatasync, a rename and a directory fsync (interval and never modes, unchanged)', () => {
    const ops = counting();
    const w = new LaneWriter({ dir: laneDir(wal, 'acme', LOGS_TABLE), segmentBytes: SEGMENT_HEADER_SIZE + 24 + 100, fileOps: ops });
    w.stage(RecordType.LOGS, 1, 1, Buffer.alloc(100));
    w.flush();
    ops.reset();
    w.stage(RecordType.LOGS, 1, 1, Buffer.alloc(100));
    w.flush(); // rotation: segment 1 synced, segment 2 created
    expect(ops.n).toEqual({ fdatasync: 2, fsyncDir: 1, rename: 1, open: 1 });
  });

  it('the journal entry that fills a new segment holds its header at offset 0: the same bytes as the file', () => {
    const s = shard({ segmentBytes: 1 << 20 });
    s.round(10);
    s.round(10);
    const [w] = s.lanes as [LaneWriter];
    const j = decodeJournal(readFileSync(join(jdir(), formatJournalName(1))));
    expect(j.version).toBe(JOURNAL_VERSION);
    expect(j.entries.map((e) => e.offset)).toEqual([0, SEGMENT_HEADER_SIZE + 34]);
    const seg = readFileSync(join(w.dir, formatSegmentName(1)));
    expect(Buffer.from(j.entries[0]!.body).equals(seg.subarray(0, SEGMENT_HEADER_SIZE + 34))).toBe(true);
  });
});

describe('a machine crash before the checkpoint', () => {
  it('segments lost whole, emptied, cut to their header or cut back, a middle one among them, come back byte for byte', async () => {
    const s = shard({ segmentBytes: SEGMENT_HEADER_SIZE + 3 * (24 + 40), lanes: ['acme', 'globex', 'initech'] });
    const [acme, globex, initech] = s.lanes as [LaneWriter, LaneWriter, LaneWriter];
    s.round(40);
    s.round(40);
    await s.checkpoint();
    const durable = snapshot(); // what the checkpoint made durable: a crash keeps it
    // acme and globex fill segment 1 and go on to 2, 3, 4, 5 (each created by rotation);
    // initech seals 1 and starts 2.
    for (let i = 0; i < 11; i++) s.round(40, [acme, globex]);
    s.round(40, [initech]);
    await initech.seal();
    s.round(40, [initech]);
    const before = snapshot();
    expect(listLaneFiles(acme.dir).segments.map((f) => f.number)).toEqual([1, 2, 3, 4, 5]);
    s.journal.close();

    // The power loss: each file keeps what the checkpoint synced; of the rest it loses all, some or none.
    const fate = {
      [join(acme.dir, formatSegmentName(1))]: 'cut back',
      [join(acme.dir, formatSegmentName(2))]: 'gone',
      [join(acme.dir, formatSegmentName(3))]: 'empty', // a middle one
      [join(acme.dir, formatSegmentName(4))]: 'header only',
      [join(acme.dir, formatSegmentName(5))]: 'gone',
      [join(globex.dir, formatSegmentName(1))]: 'cut back',
      [join(globex.dir, formatSegmentName(2))]: 'header only',
      [join(globex.dir, formatSegmentName(3))]: 'gone', // a middle one
      [join(globex.dir, formatSegmentName(4))]: 'torn', // a middle one, cut inside its last record
      [join(globex.dir, formatSegmentName(5))]: 'empty',
      [join(initech.dir, formatSegmentName(1))]: 'cut back',
      [join(initech.dir, formatSegmentName(2))]: 'gone',
    };
    expect(Object.keys(fate).sort()).toEqual([...before.keys()].sort());
    for (const [path, what] of Object.entries(fate)) {
      if (what === 'gone') rmSync(path);
      else if (what === 'empty') truncateSync(path, 0);
      else if (what === 'header only') truncateSync(path, SEGMENT_HEADER_SIZE);
      else if (what === 'cut back') truncateSync(path, durable.get(path)!.length);
      else if (what === 'torn') truncateSync(path, before.get(path)!.length - 10);
    }
    // Before the restart, verify tells a tear the journal covers from damage.
    const lines: string[] = [];
    expect(await walVerify(wal, (l) => lines.push(l))).toBe(0);
    expect(lines.join('\n')).toMatch(/torn in 00000004\.seg at offset \d+: .*; the commit journal holds these bytes: start-up replay writes them back/);

    const r = replayJournalDir(wal, jdir());
    for (const w of s.lanes) expect(repairLane(w.dir).truncatedBytes).toBe(0);
    expect(r.stops).toEqual([]);
    // Made again: acme 2, 3, 5, globex 3, 5, initech 2; the header-only ones (acme 4, globex 2) are rewritten from offset 0.
    expect(r.recreated).toBe(6);
    expect(r.present).toBe(2); // the first two records of globex 4
    expect(r.skipped).toBe(0);
    const after = snapshot();
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [path, bytes] of before) expect(after.get(path)!.equals(bytes), path).toBe(true);
    expect(await verify()).toBe(0);
    expect(listJournalFiles(jdir())).toEqual([]);
  });

  it('replay after a process crash (nothing lost) finds every byte present and changes nothing', async () => {
    const s = shard({ segmentBytes: SEGMENT_HEADER_SIZE + 24 + 40 });
    for (let i = 0; i < 4; i++) s.round(40);
    const before = snapshot();
    s.journal.close();
    const r = replayJournalDir(wal, jdir());
    expect(r).toMatchObject({ entries: 4, present: 4, rewritten: 0, recreated: 0 });
    const after = snapshot();
    for (const [path, bytes] of before) expect(after.get(path)!.equals(bytes)).toBe(true);
  });
});

describe('journal version 1 (written before segments were created unsynced)', () => {
  /**
   * Rewrites the journal file as version 1 wrote it: its header's version
   * (with its CRC), each entry's CRC unseeded, and no terminator after the entries.
   */
  function asVersion1(file: string): void {
    const b = readFileSync(file);
    const j = decodeJournal(b);
    for (const e of j.entries) {
      const tag = Buffer.from(e.tag, 'utf8');
      encodeEntryHeader(b, e.at, tag, e.segment, e.offset, e.body.length, e.records);
    }
    b.writeUInt16LE(1, 4);
    b.writeUInt32LE(crc32c(b.subarray(0, 28)), 28);
    writeFileSync(file, b.subarray(0, j.stop.offset));
  }

  it('still skips an entry whose segment is gone or shorter than a header: there the compactor retired it', () => {
    // Segments made as before the journal's version 2: header synced at creation, entries from offset 32.
    const journal = new ShardJournal({ dir: jdir() });
    const dirs = [laneDir(wal, 'acme', LOGS_TABLE), laneDir(wal, 'default', TRACES_TABLE)];
    const writers = dirs.map(
      (dir) => new LaneWriter({ dir, segmentBytes: 1 << 20, onWritten: (seg, off, iov, n, bytes, recs) => journal.stage(laneTag(wal, dir), seg, off, iov, 0, n, bytes, recs) }),
    );
    for (const w of writers) {
      w.stage(RecordType.LOGS, 1, 1, Buffer.from('landed'));
      w.flush();
    }
    journal.write();
    journal.syncNow();
    journal.close();
    const file = join(jdir(), formatJournalName(1));
    asVersion1(file);
    const j = decodeJournal(readFileSync(file));
    expect(j.version).toBe(1);
    expect(j.entries.map((e) => e.offset)).toEqual([SEGMENT_HEADER_SIZE, SEGMENT_HEADER_SIZE]);
    rmSync(join(dirs[0]!, formatSegmentName(1))); // retired (a higher segment existed)
    truncateSync(join(dirs[1]!, formatSegmentName(1)), 0); // the lane's highest, emptied
    const r = replayJournalDir(wal, jdir());
    expect(r).toMatchObject({ entries: 2, skipped: 2, rewritten: 0, recreated: 0 });
    expect(existsSync(join(dirs[0]!, formatSegmentName(1)))).toBe(false);
    expect(statSync(join(dirs[1]!, formatSegmentName(1))).size).toBe(0);
  });
});

describe('the compactor beside an unsynced segment', () => {
  it('a rotated segment the compactor landed and deleted before the checkpoint needs no sync: the checkpoint succeeds', async () => {
    const s = shard({ segmentBytes: SEGMENT_HEADER_SIZE + 24 + 10 });
    const [w] = s.lanes as [LaneWriter];
    s.round(10);
    s.round(10); // segment 1 rotated away from, unsynced; 2 live
    rmSync(join(w.dir, formatSegmentName(1))); // below the highest: landed and retired
    await s.checkpoint();
    expect(listJournalFiles(jdir())).toEqual([]);
    expect(listLaneFiles(w.dir).segments.map((f) => f.number)).toEqual([2]);
  });
});

describe('sealing under the journal', () => {
  it('a seal writes no marker: the checkpoint reports it, to be written once the journal up to it is deleted', async () => {
    const s = shard({ segmentBytes: 1 << 20 });
    const [w] = s.lanes as [LaneWriter];
    s.round(10);
    await w.seal();
    s.round(10); // segment 2
    await w.seal();
    expect(existsSync(join(w.dir, SEALED_MARKER))).toBe(false);
    expect(w.checkpointPending).toBe(true);
    const upTo = s.journal.rotate();
    const cp = w.takeCheckpoint();
    expect(cp.sealed).toBe(2);
    expect(cp.handles.map((h) => h.path)).toEqual([1, 2].map((n) => join(w.dir, formatSegmentName(n))));
    await w.syncCheckpoint(cp);
    // Until the journal files are deleted, entries of segments 1 and 2 are live.
    const live = listJournalFiles(jdir()).flatMap((n) => decodeJournal(readFileSync(join(jdir(), formatJournalName(n)))).entries);
    expect(live.map((e) => e.segment)).toEqual([1, 2]);
    s.journal.retireUpTo(upTo);
    expect(listJournalFiles(jdir())).toEqual([]);
    expect(w.checkpointPending).toBe(false);
  });
});
