// The `batch` mode's commit journal under kill -9, with the machine crash it
// exists for. Many clients send unique markers to several tenants, indexes
// and signals; the real `siglake ingest --wal-fsync batch` is killed with
// SIGKILL at a random moment, almost always between a round's journal sync
// and the next checkpoint (every 10 s; in half the lives every 200 ms, through
// a test hook, so kills land during and after checkpoints too). Every other
// life keeps two rounds in flight (--wal-rounds-in-flight 2, each journal
// sync made 1 ms slower by a test hook so that rounds overlap), so kills land
// while one round syncs and the next is written. A SIGKILL
// leaves the page cache, so
// the lane segments would hold everything written; this suite then takes
// away what a power loss could take. Segments are created, rotated and
// sealed without a sync (only a checkpoint syncs them), so: a segment a live
// journal entry says was created since the last completed checkpoint (its
// entry at offset 0 holds the header) vanishes, or is cut to 0 bytes, or to
// just its header, at random; in every other segment a live entry names,
// every byte from the first offset any entry names onwards goes. Those bytes
// were written after the last completed checkpoint and only the journal made
// them durable. (A kill in the middle of a checkpoint's retirement leaves
// files whose bytes that checkpoint had already synced: taking them too is
// more than a power loss would, and replay must still put them back. It can
// because a checkpoint retires the oldest files first, so the journal left
// holds every round from its first entry on; retiring newest first left a
// gap, and this suite lost the rounds only the missing files held.)
//
// Direct rounds (a one-lane round past --wal-direct-round-kib, which every
// second life sets to 1, the others to 0 or 1024) write no journal entry and fdatasync their segments
// instead; a test hook appends each segment such a sync covered, and its
// size, to a ledger before the round is answered. The power loss keeps those
// bytes: a segment is cut at the larger of its first journaled offset and
// its synced size. (A segment no live entry names is left whole, as before:
// a checkpoint may have synced it past the ledger's size.)
//
// While each life runs, and after its kill, no lane's `.sealed` marker names
// a segment that a journal entry still holds: the checkpoint writes markers
// only after it deleted the journal files up to it, so the compactor never
// takes a segment replay could still write into.
//
// After the restart: the journal was there and is replayed (the records
// written back equal the records the journal held for the cut segments, as
// siglake_wal_journal_replayed_records_total and the main thread's log line
// for journals of another worker count say), `siglake wal verify` is clean,
// and every acknowledged marker is in `siglake wal dump`, in its lane, once.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { decodeJournal, JOURNAL_ROOT } from '../../src/wal/journal-format.js';
import { tempDir, type RunningIngester } from '../helpers/ingester.js';
import { LoadRun, Ledger, expectLedgerIntact, laneMatrix, sleep, until } from './lib/load.js';
import { Prng } from './lib/prng.js';
import { startWalIngester } from './lib/wal-ingester.js';
import { CHAOS, baseSeed, recordFigures, scaled } from './lib/scale.js';
import { verifyWal } from './lib/wal-files.js';

const ROUNDS = scaled(4, 40, 'SIGLAKE_CRASH_ROUNDS');
const CLIENTS = scaled(12, 24);
const TENANTS = ['default', 'acme', 'globex', 'initech', 'umbrella', 'hooli', 'stark', 'wayne'];
const INDEXES = ['audit', 'payments'];
const ALL_INDEXES = Object.fromEntries(TENANTS.map((t) => [t, INDEXES]));

const seed = baseSeed('crash-journal');
const live = new Set<RunningIngester>();
const figures = {
  rounds: 0,
  journalFiles: 0,
  journalEntries: 0,
  segmentsCut: 0,
  bytesCut: 0,
  segmentsGone: 0,
  segmentsEmptied: 0,
  segmentsHeaderOnly: 0,
  markersChecked: 0,
  recordsReplayed: 0,
  ackedRequests: 0,
  /** Lives run with --wal-rounds-in-flight 2. */
  livesTwoRoundsInFlight: 0,
  /** Lives whose journal files gave way to the next past 64 KiB (SIGLAKE_TEST_JOURNAL_FILE_BYTES), and the most files one left at its kill. */
  livesSmallJournalFiles: 0,
  mostJournalFilesAtKill: 0,
  /** Rounds made durable by their own segments' fdatasync (siglake_wal_direct_rounds_total, scraped before each kill). */
  directRounds: 0,
  /** Segments cut at a direct round's synced size rather than their first journaled offset. */
  directKept: 0,
  /** Lives run with --wal-max-open-files 4 (fewer cached descriptors than lanes). */
  livesFourDescriptors: 0,
  /** Bytes rounds left in the journal only, for the checkpoint to write (siglake_wal_deferred_bytes_total, scraped before each kill). */
  deferredBytes: 0,
  /** Segments the kill left without any of their journaled bytes (all of them deferred): replay wrote them all. */
  segmentsDeferredOnly: 0,
};

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('crash-journal', { seed, roundsPlanned: ROUNDS, clients: CLIENTS, ...figures });
});

interface PowerLoss {
  journalFiles: number;
  entries: number;
  segmentsCut: number;
  bytesCut: number;
  /** Records in the journal entries past each cut: what replay must write back. */
  records: number;
  /** Segments a direct round had synced past their first journaled offset (cut there instead). */
  directKept: number;
  /** Segments every journaled byte of which was deferred (not written when the process died). */
  deferredOnly: number;
  /** What became of the segments created since the last completed checkpoint. */
  fates: Record<Fate, number>;
}

/** The sealed marker of a lane directory (0 when none). */
function sealedOf(laneDir: string): number {
  try {
    const m = /^(\d+)\n$/.exec(fs.readFileSync(path.join(laneDir, '.sealed'), 'utf8'));
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/** Every whole entry of every journal file under the WAL; files deleted while read are skipped. */
function journalEntries(walDir: string): { tag: string; segment: number }[] {
  const out: { tag: string; segment: number }[] = [];
  const root = path.join(walDir, JOURNAL_ROOT);
  let shards: string[];
  try {
    shards = fs.readdirSync(root);
  } catch {
    return out;
  }
  for (const shard of shards) {
    let files: string[];
    try {
      files = fs.readdirSync(path.join(root, shard));
    } catch {
      continue;
    }
    for (const file of files) {
      if (!file.endsWith('.jnl')) continue;
      let bytes: Buffer;
      try {
        bytes = fs.readFileSync(path.join(root, shard, file));
      } catch {
        continue; // retired by a checkpoint meanwhile
      }
      for (const e of decodeJournal(bytes).entries) out.push({ tag: e.tag, segment: e.segment });
    }
  }
  return out;
}

/**
 * Markers first, then the journal: a marker is written only after the journal
 * files holding its segment's entries are deleted, so none can show up after.
 * Returns how many markers were checked.
 */
function expectNoMarkerAheadOfTheJournal(walDir: string, when: string): number {
  const markers = new Map<string, number>();
  const walk = (dir: string, depth: number): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory() || e.name === JOURNAL_ROOT) continue;
      const sub = path.join(dir, e.name);
      const n = sealedOf(sub);
      if (n > 0) markers.set(path.relative(walDir, sub), n);
      if (depth < 3) walk(sub, depth + 1);
    }
  };
  walk(walDir, 0);
  for (const e of journalEntries(walDir)) {
    const sealed = markers.get(e.tag) ?? 0;
    expect(e.segment, `${when}: ${e.tag} is marked sealed up to ${sealed} while the journal still holds an entry of segment ${e.segment}`).toBeGreaterThan(sealed);
  }
  return markers.size;
}

/** Each lane directory's highest segment number (lanes with at least one segment). */
function highestSegments(walDir: string): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (dir: string, depth: number): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) {
        if (e.name !== JOURNAL_ROOT && depth < 3) walk(path.join(dir, e.name), depth + 1);
        continue;
      }
      const m = /^(\d+)\.seg$/.exec(e.name);
      if (m !== null) out.set(dir, Math.max(out.get(dir) ?? 0, Number(m[1])));
    }
  };
  walk(walDir, 0);
  return out;
}

type Fate = 'gone' | 'empty' | 'header only';

/**
 * What the life's direct rounds made durable (the SIGLAKE_TEST_DIRECT_LEDGER
 * test hook): each segment path and the size its last such fdatasync covered.
 */
function directDurable(ledger: string): Map<string, number> {
  const out = new Map<string, number>();
  let text: string;
  try {
    text = fs.readFileSync(ledger, 'utf8');
  } catch {
    return out; // no direct round this life
  }
  for (const line of text.split('\n')) {
    const m = /^(.+) (\d+)$/.exec(line);
    if (m === null) continue; // the last line, or one the kill cut short (its round was not answered)
    const seg = path.resolve(m[1]!);
    out.set(seg, Math.max(out.get(seg) ?? 0, Number(m[2])));
  }
  return out;
}

/** The journal files (`.jnl`) of every shard, as losePageCache counts them. */
function journalFileCount(walDir: string): number {
  const root = path.join(walDir, JOURNAL_ROOT);
  if (!fs.existsSync(root)) return 0;
  return fs.readdirSync(root).reduce((n, shard) => n + fs.readdirSync(path.join(root, shard)).filter((f) => f.endsWith('.jnl')).length, 0);
}

/**
 * Takes from each lane segment what only the journal made durable: a segment
 * keeps the bytes below its first journaled offset (a checkpoint synced them)
 * and those a direct round's fdatasync covered (`direct`).
 */
function losePageCache(walDir: string, prng: Prng, direct: Map<string, number>): PowerLoss {
  const out: PowerLoss = { journalFiles: 0, entries: 0, segmentsCut: 0, bytesCut: 0, records: 0, directKept: 0, deferredOnly: 0, fates: { gone: 0, empty: 0, 'header only': 0 } };
  const first = new Map<string, { offset: number; entries: { offset: number; records: number }[] }>();
  const root = path.join(walDir, JOURNAL_ROOT);
  for (const shard of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    for (const file of fs.readdirSync(path.join(root, shard))) {
      if (!file.endsWith('.jnl')) continue;
      out.journalFiles++;
      const j = decodeJournal(fs.readFileSync(path.join(root, shard, file)));
      for (const e of j.entries) {
        out.entries++;
        const key = path.join(walDir, e.tag, `${String(e.segment).padStart(8, '0')}.seg`);
        const f = first.get(key) ?? { offset: Number.MAX_SAFE_INTEGER, entries: [] };
        f.offset = Math.min(f.offset, e.offset);
        f.entries.push({ offset: e.offset, records: e.records });
        first.set(key, f);
      }
    }
  }
  for (const [seg, f] of first) {
    const size = fs.existsSync(seg) ? fs.statSync(seg).size : 0;
    // A lane write comes before its journal entry, or, deferred (the lane's
    // descriptor was closed), after it at the checkpoint: the segment holds at
    // least what the last checkpoint synced, the bytes below its first entry.
    expect(size, `${seg}: bytes below the first journal entry are the checkpoint's`).toBeGreaterThanOrEqual(f.offset);
    const synced = direct.get(seg) ?? 0;
    expect(size, `${seg}: a direct round's fdatasync covered these bytes`).toBeGreaterThanOrEqual(synced);
    const cut = Math.max(f.offset, synced);
    if (size === f.offset) out.deferredOnly++;
    if (synced > f.offset) out.directKept++;
    out.segmentsCut++;
    out.bytesCut += size - cut;
    // Replay writes back the entries past the cut; those below it it finds present.
    for (const e of f.entries) if (e.offset >= cut) out.records += e.records;
    if (cut > 0) {
      // It existed at the last completed checkpoint, which synced it up to here, or a direct round did.
      fs.truncateSync(seg, cut);
      continue;
    }
    // Created since (its header is journaled): nothing of it was synced.
    const fate = size === 0 && !fs.existsSync(seg) ? 'gone' : prng.pick<Fate>(['gone', 'empty', 'header only']);
    out.fates[fate]++;
    if (!fs.existsSync(seg)) continue; // deferred since its creation: never written
    if (fate === 'gone') fs.rmSync(seg);
    else fs.truncateSync(seg, fate === 'empty' ? 0 : SEGMENT_HEADER_SIZE);
  }
  return out;
}

describe('kill -9 between the journal sync and the checkpoint, then a power loss of the lane writes', () => {
  it(
    `every acknowledged marker survives ${ROUNDS} rounds, replayed from the journal; verify clean`,
    async () => {
      const prng = new Prng(seed);
      const dataDir = tempDir('siglake-crash-journal-');
      const walDir = `${dataDir}/wal`;
      const ledger = new Ledger();
      let expectedReplay = -1;
      let checkpointMs = '10000';
      let directKib = 0;
      let smallJournalFiles = false;
      let manyFilesLife = false;
      let lives = 0;
      const directLedgerFile = path.join(dataDir, 'direct-ledger');

      const start = async (): Promise<RunningIngester> => {
        const first = expectedReplay < 0;
        const segmentBytes = prng.pick([48 * 1024, 1024 * 1024, 64 * 1024 * 1024]);
        const openFiles = prng.pick([4, 64]);
        if (openFiles === 4) figures.livesFourDescriptors++;
        const maxAge = prng.pick([0, 1, 60]);
        const args = [
          '--trust-tenant-header',
          '--wal-fsync',
          'batch',
          '--wal-segment-bytes',
          String(segmentBytes),
          '--wal-segment-max-age-secs',
          // The first life seals every second and checkpoints every 200 ms: markers to check.
          String(first ? 1 : maxAge),
          // Fewer descriptors than lanes: evictions close dirty segments unsynced.
          '--wal-max-open-files',
          String(openFiles),
          '--log-level',
          'info',
        ];
        // Every other life checkpoints every 200 ms (a test hook), so kills also land
        // while a checkpoint syncs lanes, and after one deleted journal files.
        checkpointMs = prng.pick(['200', '10000']);
        if (first) checkpointMs = '200';
        // The second life keeps its journal (no checkpoint in it) in 64 KiB files and is killed
        // only once it spans three or more: replay must read a journal of many files.
        manyFilesLife = lives === 1;
        if (manyFilesLife) checkpointMs = '10000';
        // Every other life keeps two rounds in flight, its journal syncs made 1 ms slower (a
        // test hook) so that requests queue while one syncs and rounds do overlap.
        const env: Record<string, string> = { SIGLAKE_TEST_CHECKPOINT_MS: checkpointMs };
        if (prng.pick([false, true])) {
          args.push('--wal-rounds-in-flight', '2');
          env['SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS'] = '1';
          figures.livesTwoRoundsInFlight++;
        }
        // Direct rounds: a round of one lane past the threshold fdatasyncs its segments instead of
        // the journal. Every second life sets 1 KiB, which makes many of them here (a marker with a
        // pad, or a few markers); the others the default (1 MiB: almost none) or 0 (none). Their
        // syncs go to a ledger the power loss reads.
        directKib = lives++ % 2 === 1 ? 1 : prng.pick([0, 1024]);
        // Every other life, on average, has its journal files give way to the next past 64 KiB (a
        // test hook; 256 MiB otherwise), so a kill leaves the journal in many files.
        smallJournalFiles = prng.pick([false, true]) || manyFilesLife;
        if (smallJournalFiles) {
          env['SIGLAKE_TEST_JOURNAL_FILE_BYTES'] = '65536';
          figures.livesSmallJournalFiles++;
        }
        args.push('--wal-direct-round-kib', String(directKib));
        fs.rmSync(directLedgerFile, { force: true });
        env['SIGLAKE_TEST_DIRECT_LEDGER'] = directLedgerFile;
        const ing = await startWalIngester({ dataDir, workers: prng.pick([1, 2]), args, indexes: ALL_INDEXES, env });
        live.add(ing);
        if (expectedReplay >= 0) {
          const fromWorkers = (await ing.metric('siglake_wal_journal_replayed_records_total')) ?? 0;
          const fromMain = ing.logs
            .filter((l) => l.msg === 'WAL journal of another worker count replayed')
            .reduce((s, l) => s + Number(l['rewrittenRecords']), 0);
          expect(fromWorkers + fromMain, 'records written back from the journal').toBe(expectedReplay);
          expect(fs.readdirSync(path.join(walDir, JOURNAL_ROOT)).flatMap((d) => fs.readdirSync(path.join(walDir, JOURNAL_ROOT, d))), 'journal files left after replay').toEqual([]);
          const v = verifyWal(walDir);
          expect(v.status, v.output).toBe(0);
          expect(v.tornTails, v.output).toBe(0);
          expect(v.problems, v.output).toBe(0);
          expectLedgerIntact(ledger, walDir, 'crash-journal-', `round ${figures.rounds}: `);
        }
        return ing;
      };

      for (let round = 0; round < ROUNDS; round++) {
        const ing = await start();
        const load = new LoadRun({
          ing,
          prng: prng.fork(),
          ledger,
          tag: `crash-journal-r${round}`,
          lanes: laneMatrix(TENANTS, INDEXES.filter(() => prng.chance(0.5))),
          clients: CLIENTS,
          padChance: 0.1,
          maxPadBytes: 16 * 1024,
        });
        const base = ledger.acked.length;
        await until(() => ledger.acked.length >= base + 50, 60_000, 'the first acknowledgements');
        if (round === 0) {
          // This life seals every second: wait for a marker (the load goes on), checking each one seen.
          await until(
            () => {
              const n = expectNoMarkerAheadOfTheJournal(walDir, 'round 0, running');
              figures.markersChecked += n;
              return n > 0;
            },
            60_000,
            'a sealed marker',
            100,
          );
        }
        if (manyFilesLife) await until(() => journalFileCount(walDir) >= 3, 60_000, 'a journal in three files', 50);
        const killAt = Date.now() + prng.range(0, CHAOS ? 3000 : 1500);
        do {
          figures.markersChecked += expectNoMarkerAheadOfTheJournal(walDir, `round ${round}, running`);
          await sleep(100);
        } while (Date.now() < killAt);
        const directRounds = (await ing.metric('siglake_wal_direct_rounds_total')) ?? 0;
        if (directKib === 0) expect(directRounds, 'direct rounds with --wal-direct-round-kib 0').toBe(0);
        figures.directRounds += directRounds;
        figures.deferredBytes += (await ing.metric('siglake_wal_deferred_bytes_total')) ?? 0;
        // No disk fault here: no checkpoint may have failed (a deferred run it could not write, a lane sync) and pinned the journal.
        expect(ing.logs.filter((l) => l.level >= 50 && /^WAL|journal|segment/.test(l.msg)).map((l) => `${l.msg}: ${String(l['err'])}`), 'checkpoint failures').toEqual([]);
        await ing.kill9();
        live.delete(ing);
        await load.stop();
        figures.markersChecked += expectNoMarkerAheadOfTheJournal(walDir, `round ${round}, killed`);
        const loss = losePageCache(walDir, prng, directDurable(directLedgerFile));
        figures.directKept += loss.directKept;
        figures.segmentsDeferredOnly += loss.deferredOnly;
        if (checkpointMs === '10000') {
          // No checkpoint yet in so short a life: the journal holds every
          // acknowledged round, and lane bytes only it made durable.
          expect(loss.journalFiles, 'journal files after the crash').toBeGreaterThan(0);
          expect(loss.entries, 'journal entries after the crash').toBeGreaterThan(0);
          expect(loss.segmentsCut, 'lane segments with un-checkpointed bytes').toBeGreaterThan(0);
        }
        // What is left ends on whole records: verify accepts it as it is.
        const v = verifyWal(walDir);
        expect(v.status, v.output).toBe(0);
        expectedReplay = loss.records;
        figures.rounds++;
        figures.journalFiles += loss.journalFiles;
        if (smallJournalFiles) figures.mostJournalFilesAtKill = Math.max(figures.mostJournalFilesAtKill, loss.journalFiles);
        figures.journalEntries += loss.entries;
        figures.segmentsCut += loss.segmentsCut;
        figures.bytesCut += loss.bytesCut;
        figures.segmentsGone += loss.fates.gone;
        figures.segmentsEmptied += loss.fates.empty;
        figures.segmentsHeaderOnly += loss.fates['header only'];
        figures.recordsReplayed += loss.records;
      }
      // The journal path was taken: lane bytes only the journal held, written back.
      expect(figures.segmentsCut).toBeGreaterThan(0);
      expect(figures.recordsReplayed).toBeGreaterThan(0);
      // Segments made since the last checkpoint were lost whole or in part, and replay made them again.
      expect(figures.segmentsGone + figures.segmentsEmptied + figures.segmentsHeaderOnly).toBeGreaterThan(0);
      expect(figures.markersChecked, 'sealed markers seen next to a live journal').toBeGreaterThan(0);
      // Direct rounds ran, and some segment's synced bytes lay past its first journaled offset.
      expect(figures.directRounds, 'direct rounds').toBeGreaterThan(0);
      // Four descriptors for more lanes: rounds of lanes whose descriptor was closed go to the journal only.
      if (figures.livesFourDescriptors > 0) expect(figures.deferredBytes, 'bytes deferred to the checkpoint').toBeGreaterThan(0);
      expect(figures.mostJournalFilesAtKill, 'journal files a life with 64 KiB files left at its kill').toBeGreaterThan(2);
      if (CHAOS) expect(figures.directKept, 'segments a direct round synced past the journal').toBeGreaterThan(0);
      // The last life takes some load, then stops cleanly: it seals every lane it wrote, and its last
      // checkpoint makes them durable, deletes the journal and writes every marker.
      const last = await start();
      const highestBefore = highestSegments(walDir); // after the replay, which may make segments again
      const lastLoad = new LoadRun({ ing: last, prng: prng.fork(), ledger, tag: 'crash-journal-last', lanes: laneMatrix(TENANTS, INDEXES), clients: CLIENTS });
      const base = ledger.acked.length;
      await until(() => ledger.acked.length >= base + 50, 60_000, 'the last life\'s acknowledgements');
      await lastLoad.stop();
      expect(await last.stop()).toBe(0);
      live.delete(last);
      let sealedAtStop = 0;
      for (const [dir, highest] of highestSegments(walDir)) {
        if (highest <= (highestBefore.get(dir) ?? 0)) continue; // not written in the last life
        expect(sealedOf(dir), `${dir}: marker after a clean stop`).toBe(highest);
        sealedAtStop++;
      }
      expect(sealedAtStop, 'lanes written and sealed in the last life').toBeGreaterThan(0);
      const c = expectLedgerIntact(ledger, walDir, 'crash-journal-', 'after a clean stop: ');
      figures.ackedRequests = c.ackedRequests;
      expect(c.ackedRequests).toBeGreaterThan(0);
      // A clean stop checkpoints: nothing is left in the journal.
      expect(fs.readdirSync(path.join(walDir, JOURNAL_ROOT)).flatMap((d) => fs.readdirSync(path.join(walDir, JOURNAL_ROOT, d)))).toEqual([]);
      fs.rmSync(dataDir, { recursive: true, force: true });
      console.log(`[crash-journal] ${JSON.stringify(figures)}`);
    },
    CHAOS ? 3_600_000 : 300_000,
  );
});
