// Deferred lane writes (docs/wal-format.md "Deferred lane writes"): a
// journaled round of a lane whose segment descriptor the LRU closed writes
// the commit journal only; the checkpoint reads the runs back from the journal
// and writes them to the segments before it syncs them. Each case wires a real
// ShardJournal, LaneWriters and a lazy FdCache as the shard loop wires them
// (the runs' journal places filled in after each journal write), on the real
// file system, and compares the segments with what an inline writer wrote, or
// with what a restart (journal replay, tail repair) finds.

import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { walVerify } from '../../src/wal/commands.js';
import { DeferredRuns } from '../../src/wal/deferred-runs.js';
import { FdCache, type FdHandle } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { formatJournalName, JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { laneTag, listJournalFiles, replayJournalDir, ShardJournal } from '../../src/wal/journal.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { LOGS_TABLE, laneDir } from '../../src/wal/layout.js';
import { nativeRunsWriter, type RunsWriter } from '../../src/wal/native-runs.js';
import { repairLane } from '../../src/wal/repair.js';
import { WalWriteError } from '../../src/wal/wal-write-error.js';
import { laneRecords } from '../helpers/wal-records.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-deferred-'));
});
afterEach(() => rmSync(wal, { recursive: true, force: true }));

const NOW = () => 1_700_000_000_000;

/**
 * A shard of named lanes (tenants' logs) on one journal and one lazy FdCache
 * of `capacity` descriptors. `round` runs #commitRound's steps: every lane
 * flushes (deferred when `defer` says so), the journal is written, the runs
 * placed, then one fdatasync; `checkpoint` runs #startCheckpoint and
 * #checkpointLanes.
 */
function rig(
  names: string[],
  opts: { segmentBytes?: number; capacity?: number; readBack?: (inner: ShardJournal['readBack']) => ShardJournal['readBack']; ops?: FileOps; native?: boolean } = {},
) {
  const journal = new ShardJournal({ dir: join(wal, JOURNAL_ROOT, journalDirName(0, 1)) });
  const native = opts.native === true ? nativeRunsWriter((n) => join(journal.dir, formatJournalName(n)), false).writer! : undefined;
  /** Segments the checkpoint handed to the native writer. */
  let nativeCalls = 0;
  const writeRuns: RunsWriter | undefined = native && ((segment, runs, count) => (nativeCalls++, native(segment, runs, count)));
  const cache = new FdCache(opts.capacity ?? 8, opts.ops, { lazyEviction: true });
  const placing: { w: LaneWriter; run: number; entry: number }[] = [];
  const read = (opts.readBack ?? ((f) => f))((f, o, l, into, at) => journal.readBack(f, o, l, into, at));
  const lanes = new Map<string, LaneWriter>();
  for (const name of names) {
    const dir = laneDir(wal, name, LOGS_TABLE);
    const tag = laneTag(wal, dir);
    const w: LaneWriter = new LaneWriter({
        dir,
        segmentBytes: opts.segmentBytes ?? 1 << 20,
        fdCache: cache,
        journaled: true,
        unconfirmedFlushes: 2,
        now: NOW,
        readBack: read,
        ...(writeRuns !== undefined ? { writeRuns } : {}),
        onWritten: (seg, off, iov, n, bytes, recs, run) => {
          const entry = journal.stage(tag, seg, off, iov, 0, n, bytes, recs);
          if (run !== undefined) placing.push({ w, run, entry });
        },
      });
    lanes.set(name, w);
  }
  const lane = (name: string) => lanes.get(name)!;
  /** One round; `defer` picks the lanes that defer (default: the writer's own preference). */
  const round = (texts: Record<string, string[]>, defer?: (name: string) => boolean): boolean => {
    for (const [name, list] of Object.entries(texts)) {
      for (const t of list) lane(name).stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.from(t));
      lane(name).flush(defer !== undefined ? defer(name) : lane(name).prefersDeferral);
    }
    journal.write();
    for (const { w, run, entry } of placing.splice(0)) w.placeRun(run, journal.lastFile, journal.bodyOffset(entry));
    journal.syncNow();
    for (const name of Object.keys(texts)) lane(name).flushDurable();
    return true;
  };
  /** #startCheckpoint: the journal rotates and every lane hands over what the checkpoint must make durable. */
  const take = () => ({ upTo: journal.rotate(), cps: [...lanes.values()].map((w) => ({ w, cp: w.takeCheckpoint() })) });
  /** #checkpointLanes, then the journal files up to the rotation retired. */
  const finish = async (c: ReturnType<typeof take>): Promise<void> => {
    for (const { w, cp } of c.cps) await w.syncCheckpoint(cp);
    journal.retireUpTo(c.upTo);
  };
  const checkpoint = (): Promise<void> => finish(take());
  const seg = (name: string, n = 1) => join(laneDir(wal, name, LOGS_TABLE), formatSegmentName(n));
  const records = (name: string) => laneRecords(laneDir(wal, name, LOGS_TABLE));
  return { journal, cache, lane, round, take, finish, checkpoint, seg, records, nativeCalls: () => nativeCalls };
}

/**
 * Holds every thread of libuv's pool (this process's: vitest runs each file
 * in a fork) in a FIFO's open(), which blocks until a writer opens it, so a
 * native task queued after this cannot start before release(). queued()
 * waits until the checkpoint has handed its segment to the native writer.
 */
function holdPool(): { queued(calls: () => number): Promise<void>; release(): void } {
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const fifos = Array.from({ length: threads }, (_, k) => join(wal, `hold-${k}.fifo`));
  for (const f of fifos) execFileSync('mkfifo', [f]);
  const opened = fifos.map((f) => fsp.open(f, 'r'));
  return {
    async queued(calls) {
      for (let k = 0; k < 100 && calls() === 0; k++) await new Promise((res) => setImmediate(res));
      expect(calls()).toBe(1);
    },
    release() {
      // A writer's open on each FIFO lets its reader's open, and the pool thread, go.
      for (const f of fifos) closeSync(openSync(f, 'w'));
      void Promise.all(opened).then((hs) => Promise.all(hs.map((h) => h.close())));
    },
  };
}

async function verifyClean(): Promise<void> {
  const lines: string[] = [];
  const code = await walVerify(wal, (l) => lines.push(l));
  expect(code, lines.join('\n')).toBe(0);
}

for (const native of [false, true]) describe(`deferred lane writes, the checkpoint's runs written ${native ? 'in native code on the pool' : 'in JavaScript'}`, () => {
  it('a deferred round writes the journal only; the checkpoint writes the segment byte for byte as an inline writer did', async () => {
    const r = rig(['deferred', 'inline'], { native });
    const texts = (k: number) => [`rec-${k}-a`, `rec-${k}-b-${'x'.repeat(k * 7)}`];
    for (let k = 0; k < 20; k++) r.round({ deferred: texts(k), inline: texts(k) }, (name) => name === 'deferred');
    // Created (its name is the segment's), nothing written to it yet: the journal holds all of it.
    expect(statSync(r.seg('deferred')).size).toBe(0);
    expect(r.lane('deferred').hasDeferred).toBe(true);
    expect(r.lane('deferred').deferredBytes).toBe(statSync(r.seg('inline')).size);
    await r.checkpoint();
    expect(r.nativeCalls()).toBe(native ? 1 : 0); // the deferred lane's one segment; the inline lane has no runs
    expect(r.lane('deferred').hasDeferred).toBe(false);
    expect(readFileSync(r.seg('deferred')).equals(readFileSync(r.seg('inline')))).toBe(true);
    expect(r.records('deferred')).toHaveLength(40);
    expect(listJournalFiles(join(wal, JOURNAL_ROOT, journalDirName(0, 1)))).toEqual([]);
    await verifyClean();
  });

  it('runs across rotations go to each segment in turn, and a lane that stops deferring writes what waits first', async () => {
    const r = rig(['acme', 'twin'], { segmentBytes: 4096, native });
    const body = (k: number) => `r${k}-${'y'.repeat(300)}`;
    for (let k = 0; k < 30; k++) r.round({ acme: [body(k)], twin: [body(k)] }, (name) => name === 'acme' && k < 25);
    // The last five acme flushes were inline: the deferred runs before them went in first, in order.
    expect(r.lane('acme').hasDeferred).toBe(false);
    await r.checkpoint();
    for (let n = 1; statSync(r.seg('twin', n), { throwIfNoEntry: false }) !== undefined; n++) {
      expect(readFileSync(r.seg('acme', n)).equals(readFileSync(r.seg('twin', n))), `segment ${n}`).toBe(true);
    }
    expect(r.records('acme')).toEqual(Array.from({ length: 30 }, (_, k) => body(k)));
    await verifyClean();
  });

  it('a crash before the checkpoint: replay writes the deferred runs back, a segment created empty included', async () => {
    const r = rig(['acme', 'globex'], { segmentBytes: 4096, native });
    const sent: Record<string, string[]> = { acme: [], globex: [] };
    for (let k = 0; k < 25; k++) {
      const t = { acme: [`a${k}-${'z'.repeat(200)}`], globex: [`g${k}`] };
      r.round(t, () => true);
      sent.acme!.push(...t.acme);
      sent.globex!.push(...t.globex);
    }
    r.journal.close();
    expect(statSync(r.seg('acme', 1)).size).toBe(0);
    const replay = replayJournalDir(wal, join(wal, JOURNAL_ROOT, journalDirName(0, 1)));
    expect(replay.rewrittenRecords + replay.recreated).toBeGreaterThan(0);
    expect(replay.stops).toEqual([]);
    for (const name of ['acme', 'globex']) {
      const repair = repairLane(laneDir(wal, name, LOGS_TABLE));
      expect(repair.truncatedBytes).toBe(0);
      expect(r.records(name)).toEqual(sent[name]);
    }
    await verifyClean();
  });

  it('a refused deferred round never reaches its segments; the acknowledged runs before it are written and synced; a segment it started keeps its header', async () => {
    const r = rig(['acme'], { segmentBytes: 2048, native });
    for (let k = 0; k < 3; k++) r.round({ acme: [`ok-${k}-${'q'.repeat(400)}`] }, () => true);
    // A round that rotates into segment 2, refused (its journal sync failed, say).
    const w = r.lane('acme');
    for (let k = 0; k < 4; k++) w.stage(RecordType.LOGS, 1, 1, Buffer.from(`refused-${k}-${'r'.repeat(400)}`));
    w.flush(true);
    expect(w.segment).toBe(2);
    r.journal.clearStaged();
    w.refuseLastFlush();
    expect(w.hasDeferred).toBe(false);
    // Segment 1: the acknowledged records and those of the refused round that fit before the rotation are not there.
    expect(r.records('acme').filter((t) => t.startsWith('refused'))).toEqual([]);
    expect(r.records('acme')).toEqual([0, 1, 2].map((k) => `ok-${k}-${'q'.repeat(400)}`));
    expect(statSync(r.seg('acme', 2)).size).toBe(SEGMENT_HEADER_SIZE);
    // The next round goes on in a new segment, and is stored.
    r.round({ acme: ['after'] }, () => true);
    await r.checkpoint();
    expect(r.records('acme').at(-1)).toBe('after');
    await verifyClean();
  });

  // (In native code the read is the journal file's own: the case after this describe cuts the file short.)
  if (!native) it('a checkpoint that cannot read a run back fails with a write error and leaves the runs to the next one', async () => {
    let fail = true;
    const r = rig(['acme'], {
      readBack: (inner) => (f, o, l, into, at) => {
        if (fail) throw Object.assign(new Error('injected'), { code: 'EIO' });
        inner(f, o, l, into, at);
      },
    });
    for (let k = 0; k < 5; k++) r.round({ acme: [`m${k}`] }, () => true);
    const upTo = r.journal.rotate();
    const cp = r.lane('acme').takeCheckpoint();
    await expect(r.lane('acme').syncCheckpoint(cp)).rejects.toBeInstanceOf(WalWriteError);
    expect(r.lane('acme').hasDeferred).toBe(true);
    // The shard keeps the journal (pinned); a later checkpoint over the same files writes the runs.
    fail = false;
    r.round({ acme: ['m5'] }, () => true);
    await r.checkpoint();
    expect(upTo).toBeGreaterThan(0);
    expect(r.records('acme')).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    await verifyClean();
  });

  it('a lane prefers deferral once the LRU closed its descriptor, and while runs wait', () => {
    const r = rig(['acme', 'globex'], { capacity: 1, native });
    r.round({ acme: ['a0'] });
    expect(r.lane('acme').prefersDeferral).toBe(false); // its new segment's descriptor is open
    const written = statSync(r.seg('acme')).size;
    expect(written).toBeGreaterThan(SEGMENT_HEADER_SIZE);
    r.round({ globex: ['g0'] }); // globex's segment takes the one descriptor
    expect(r.lane('acme').prefersDeferral).toBe(true);
    expect(r.lane('globex').prefersDeferral).toBe(false);
    r.round({ acme: ['a1'] });
    expect(r.lane('acme').hasDeferred).toBe(true);
    // a1 is in the journal only; globex, whose descriptor is open, wrote its segment.
    expect(statSync(r.seg('acme')).size).toBe(written);
    expect(r.records('globex')).toEqual(['g0']);
    r.round({ globex: ['g1'] });
    expect(r.records('globex')).toEqual(['g0', 'g1']);
  });

  /** FileOps that log each segment write and fdatasync (`write acme/00000001.seg`, `sync acme/00000001.seg`). */
  function loggingOps(log: string[]): FileOps {
    const names = new Map<number, string>();
    const name = (fd: number) => names.get(fd) ?? 'journal';
    return {
      ...NODE_FILE_OPS,
      open: (p, flags) => {
        const fd = NODE_FILE_OPS.open(p, flags);
        names.set(fd, p.split('/').slice(-3).filter((x) => x !== 'logs').join('/'));
        return fd;
      },
      writev: (fd, b, pos) => {
        log.push(`write ${name(fd)}`);
        return NODE_FILE_OPS.writev(fd, b, pos);
      },
      fdatasyncSync: (fd) => {
        log.push(`sync ${name(fd)}`);
        NODE_FILE_OPS.fdatasyncSync(fd);
      },
      fdatasync: (fd) => {
        log.push(`sync ${name(fd)}`);
        return NODE_FILE_OPS.fdatasync(fd);
      },
    };
  }

  /** Whether every write of `file` in the log is followed by a sync of it. */
  const syncedAfterLastWrite = (log: string[], file: string): boolean => log.lastIndexOf(`sync ${file}`) > log.lastIndexOf(`write ${file}`);

  for (const early of [false, true]) {
    it(`runs deferred after a checkpoint was taken into a segment then sealed are written and synced by the next checkpoint${early ? ', also when a forget wrote them first' : ''}`, async () => {
      const log: string[] = [];
      const r = rig(['acme', 'other'], { capacity: 1, ops: loggingOps(log), native });
      r.round({ acme: ['a0'] });
      r.round({ other: ['o0'] }); // other's segment takes the one descriptor
      const c0 = r.take();
      r.round({ acme: ['a1'] }); // deferred, after C0 was taken: C0 does not write it
      expect(r.lane('acme').hasDeferred).toBe(true);
      const mark = log.length;
      await r.finish(c0); // syncs acme's segment, a1 not in it
      expect(r.lane('acme').hasDeferred).toBe(true);
      await r.lane('acme').seal(); // the segment leaves the live slot
      if (early) r.lane('acme').writeDeferred(); // what #forget does: written, not synced
      await r.checkpoint();
      expect(r.lane('acme').hasDeferred).toBe(false);
      expect(r.records('acme')).toEqual(['a0', 'a1']);
      // The journal that held a1 is retired only after a1's segment was synced with it.
      expect(listJournalFiles(join(wal, JOURNAL_ROOT, journalDirName(0, 1)))).toEqual([]);
      // a1's write and its sync: through the FileOps in JavaScript and after a forget (whose
      // write leaves the checkpoint no runs); in native code on the pool, through its own descriptor.
      if (!native || early) {
        expect(log.slice(mark)).toContain('write acme/00000001.seg');
        expect(syncedAfterLastWrite(log, 'acme/00000001.seg'), log.join('\n')).toBe(true);
      } else {
        expect(log.slice(mark)).not.toContain('write acme/00000001.seg');
      }
      expect(r.nativeCalls()).toBe(native && !early ? 1 : 0);
      await verifyClean();
    });
  }
});

describe("deferred lane writes, the checkpoint's runs in native code: failures and what runs meanwhile", () => {
  const journalFile = (r: ReturnType<typeof rig>) => join(r.journal.dir, formatJournalName(listJournalFiles(r.journal.dir)[0]!));

  it('a journal file cut short fails the checkpoint with a write error and leaves the runs; once whole again, the next one writes them', async () => {
    const r = rig(['acme'], { native: true });
    for (let k = 0; k < 5; k++) r.round({ acme: [`m${k}`] }, () => true);
    const file = journalFile(r);
    const whole = readFileSync(file);
    truncateSync(file, 64);
    const upTo = r.journal.rotate();
    const cp = r.lane('acme').takeCheckpoint();
    const err = await r.lane('acme').syncCheckpoint(cp).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WalWriteError);
    expect(r.nativeCalls()).toBe(1);
    expect((err as WalWriteError).op).toBe('write');
    expect(String((err as Error).message)).toMatch(/EIO/);
    expect(r.lane('acme').hasDeferred).toBe(true);
    expect(statSync(r.seg('acme')).size).toBe(0);
    // The shard keeps the journal (pinned); a later checkpoint over the same files writes the runs.
    writeFileSync(file, whole, { flag: 'r+' });
    r.round({ acme: ['m5'] }, () => true);
    await r.checkpoint();
    expect(upTo).toBeGreaterThan(0);
    expect(r.records('acme')).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    await verifyClean();
  });

  it('a segment whose fdatasync the kernel refuses fails the checkpoint with an fdatasync error and writes nothing there; the kept journal replays every acknowledged record', async () => {
    const r = rig(['acme'], { native: true });
    for (let k = 0; k < 5; k++) r.round({ acme: [`m${k}`] }, () => true);
    // The segment's path now names /dev/null: the pool's pwrite succeeds, its fdatasync is EINVAL (a real refusal by the kernel).
    const seg = r.seg('acme');
    renameSync(seg, `${seg}.aside`);
    symlinkSync('/dev/null', seg);
    r.journal.rotate();
    const cp = r.lane('acme').takeCheckpoint();
    const err = await r.lane('acme').syncCheckpoint(cp).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WalWriteError);
    expect(r.nativeCalls()).toBe(1);
    expect((err as WalWriteError).op).toBe('fdatasync');
    expect(String((err as Error).message)).toMatch(/EINVAL/);
    // Not synced, so not done: the runs still wait, and the shard keeps (pins) the journal.
    expect(r.lane('acme').hasDeferred).toBe(true);
    // A crash, then the next start with the disk whole again: the journal writes the records back.
    r.journal.close();
    unlinkSync(seg);
    renameSync(`${seg}.aside`, seg);
    expect(statSync(seg).size).toBe(0);
    const replay = replayJournalDir(wal, join(wal, JOURNAL_ROOT, journalDirName(0, 1)));
    expect(replay.stops).toEqual([]);
    expect(repairLane(laneDir(wal, 'acme', LOGS_TABLE)).truncatedBytes).toBe(0);
    expect(r.records('acme')).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    await verifyClean();
  });

  for (const held of [false, true]) it(`runs written again on the thread while the pool writes them (a forget), and a round deferred meanwhile, all land once, in order${held ? '; the pool held until the thread is done' : ''}`, async () => {
    const r = rig(['acme'], { native: true });
    for (let k = 0; k < 6; k++) r.round({ acme: [`m${k}-${'p'.repeat(k * 50)}`] }, () => true);
    const c = r.take();
    const pool = held ? holdPool() : null;
    const pending = r.finish(c);
    if (pool !== null) {
      await pool.queued(r.nativeCalls);
      // The task is queued and does not run: nothing reached the segment.
      await new Promise((res) => setTimeout(res, 30));
      expect(statSync(r.seg('acme')).size).toBe(0);
    }
    // While the pool writes m0..m5: a round deferred after the checkpoint was taken, then what #forget does.
    r.round({ acme: ['m6'] }, () => true);
    r.lane('acme').writeDeferred();
    // Held: only now may the pool's write of m0..m5 start, after the thread wrote them and m6.
    pool?.release();
    await pending;
    expect(r.nativeCalls()).toBe(1);
    expect(r.lane('acme').hasDeferred).toBe(false);
    await r.checkpoint();
    expect(r.records('acme')).toEqual([...Array.from({ length: 6 }, (_, k) => `m${k}-${'p'.repeat(k * 50)}`), 'm6']);
    expect(listJournalFiles(r.journal.dir)).toEqual([]);
    await verifyClean();
  });

  for (const held of [false, true]) it(`a flush refused while the pool writes the checkpoint's runs never reaches the segment; the acknowledged runs do${held ? '; the pool held until the refusal' : ''}`, async () => {
    const r = rig(['acme'], { native: true });
    for (let k = 0; k < 4; k++) r.round({ acme: [`ok${k}`] }, () => true);
    const pool = held ? holdPool() : null;
    const pending = r.finish(r.take());
    if (pool !== null) await pool.queued(r.nativeCalls);
    // Meanwhile a deferred flush whose round is refused (its journal write failed, say).
    const w = r.lane('acme');
    w.stage(RecordType.LOGS, 1, 1, Buffer.from('refused'));
    w.flush(true);
    r.journal.clearStaged();
    w.refuseLastFlush();
    pool?.release();
    await pending;
    expect(r.nativeCalls()).toBe(1);
    r.round({ acme: ['after'] }, () => true);
    await r.checkpoint();
    expect(r.records('acme')).toEqual(['ok0', 'ok1', 'ok2', 'ok3', 'after']);
    await verifyClean();
  });

  it('runs a refused flush drops while the pool writes stay waiting when newer runs take their places', () => {
    const runs = new DeferredRuns();
    const h = {} as FdHandle;
    for (let k = 0; k < 5; k++) runs.push(h, k * 10, 10, null);
    runs.writeBegun(); // a write of runs 0..4 leaves the thread
    runs.dropFrom(3); // runs 3 and 4 refused meanwhile
    runs.push(h, 30, 10, null); // a newer run takes index 3
    runs.writeEnded(5);
    expect(runs.next).toBe(3);
    expect(runs.waiting).toBe(true);
    expect(runs.waitingBytes).toBe(10);
  });
});

