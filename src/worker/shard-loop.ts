// The life of one writer shard inside a Piscina worker: repair the shard's WAL
// tails, then serve rounds until told to stop.
//
// One round: read every frame waiting in the request ring (up to a budget),
// validate and decode each body, stage it on its lane's writer (views into the
// ring, not copies), write each touched lane with one writev, release the ring
// space, then in `batch` mode fdatasync every touched segment at once (group
// commit: requests that arrive meanwhile share the next round's sync), and
// only then post the completions. A completion names its outcome by code
// (0 accepted, else a SIGLAKE_ code's wire number, src/errors.ts). A write or
// sync failure refuses that lane's requests of the round (SIGLAKE_WAL_DISK when
// the disk refused, SIGLAKE_WAL_WRITE otherwise) and leaves the segment cut
// back to its last whole record.
//
// Commit journal (`batch` mode, docs/wal-format.md "Commit journal"): a round
// also appends its records, tagged by lane, to the shard's journal and
// fdatasyncs that one file instead of every touched lane's segment. A
// checkpoint, in the background every CHECKPOINT_MS or checkpointTriggerBytes() of
// journal, fdatasyncs the lanes written since the last one and then deletes
// the journal files before it. So every acknowledged byte a checkpoint has not
// made durable in its segment is in the journal. Segments are then created,
// rotated and sealed without a sync: the checkpoint also syncs the rotated and
// sealed ones and the directories that gained a segment, and writes the
// `.sealed` markers only after it deleted the journal files.
//
// Two rounds in flight (journaled, --wal-rounds-in-flight 2): when more requests are waiting once a
// round is written, its journal fdatasync goes to libuv's pool and the next
// round is read, validated and written meanwhile; that round then waits for
// the first one's sync before starting its own, so at most one sync is in
// flight and completions still follow durability. A failed sync refuses
// both rounds (the second's entries follow the first's in the file that
// failed) and cuts every lane they touched back to where the first began
// (LaneWriter's unconfirmed flushes). With nothing waiting, the round syncs
// on this thread as before (a pool hop only adds thread wake-ups).

import { BodyError, walFailureCode, type ErrorCode } from '../errors.js';
import { ByteRing, type Frame } from '../lanes/byte-ring.js';
import { ACCEPTED, completionCode, CompletionRing, Doorbell } from '../shard/completion-ring.js';
import {
  decodeLaneSpec,
  FLAG_BUDGET_EXHAUSTED,
  frameFlags,
  frameKind,
  frameLaneId,
  FRAME_PREFIX_BYTES,
  FrameKind,
  keyOfSpec,
  signalOfFlags,
  type LaneSpec,
} from '../shard/frames.js';
import { LaneKey } from '../shard/lane-key.js';
import { ControlWord, type ShardExit, type ShardTaskArgs } from '../shard/protocol.js';
import { createLogger, LogThrottle, type Logger } from '../log.js';
import { WorkerStats } from '../metrics/worker-stats.js';
import { FdCache } from '../wal/fd-cache.js';
import { useOtlpWalk } from '../otlp/wire-validator.js';
import { dropSyncedPagesOps } from '../wal/page-cache.js';
import { nativeRunsWriter, type RunsWriter } from '../wal/native-runs.js';
import { checkpointTriggerBytes, JOURNAL_READERS, laneTag, logKeptJournal, replayJournalDir, ShardJournal } from '../wal/journal.js';
import { formatJournalName, JOURNAL_ROOT, journalDirName } from '../wal/journal-format.js';
import { join } from 'node:path';
import { appendFileSync, existsSync, rmdirSync, statSync } from 'node:fs';
import { NODE_FILE_OPS } from '../wal/file-ops.js';
import { RecordType } from '../wal/format.js';
import { LaneWriter, type LaneCheckpoint } from '../wal/lane-writer.js';
import { markRecoveredLanes, writeSealedMarkerAsync } from '../wal/sealed-marker.js';
import { recoverWal } from '../wal/recovery.js';
import { WalWriteError } from '../wal/wal-write-error.js';
import { BodyDecoder } from './body-decoder.js';
import { roundTracePath, WorkerTrace, type TracedRound } from '../shard/round-trace.js';

const MAX_ROUND_REQUESTS = 4096;
/**
 * A round stops reading frames once it holds this many bytes (at least one
 * frame, whatever its size). Small enough that a busy lane's large bodies
 * make several rounds, each synced while the next is written (a direct
 * round's fdatasync is in flight then): P2's row made 2,060-2,160 requests/s
 * with 64 MiB rounds (one round of ~54 requests, then its sync, then the
 * next), 3,650 with 1 MiB, 3,770-3,950 with 2 MiB, 3,340 with 4 MiB
 * (docs/performance.md "Direct rounds"). A round of 1 KiB requests reaches
 * it at about 2,000 of them.
 */
const MAX_ROUND_BYTES = 2 * 1024 * 1024;
/**
 * A round defers lane writes only while the journal file is shorter than this:
 * a deferred run's journal offset is 32 bits, and a round adds at most
 * MAX_ROUND_BYTES and one request (--max-request-bytes is at most 512 MiB).
 */
const DEFER_MAX_JOURNAL_OFFSET = 2 ** 32 - 2 ** 30;
const HOUSEKEEPING_MS = 1000;
// A checkpoint starts when the journal has taken checkpointTriggerBytes() since the last one began (src/wal/journal.ts)…
/** Journaled: a lane that wrote this much since its last sync has its live segment fdatasynced early (#writeBack). */
const WRITEBACK_BYTES = 1024 * 1024;
/** Early writebacks in flight per worker at most (each may hold a descriptor the LRU evicted meanwhile). */
const MAX_WRITEBACKS = 2;
/** …or this long after the last one began, if anything was journaled since… */
const CHECKPOINT_MS = 10_000;
/**
 * …and, for that timer, no sooner than this many times the last checkpoint's
 * duration after it ended: checkpoints started by the timer take at most a
 * quarter of the worker's time. A checkpoint costs a write and an fdatasync
 * per lane written since the last one, whatever it holds, so at 10,000 lanes
 * one took 5–7 s on a slow disk and the 10 s timer kept one running most of
 * the time, its syncs in front of every round's (docs/wal-format.md "When a
 * checkpoint starts"). Resting in proportion spaces heavy checkpoints out
 * (each then covers more of every lane's records for the same cost) and
 * leaves light ones, milliseconds at a few lanes, on the timer. The byte
 * trigger does not wait: it bounds the journal.
 */
const CHECKPOINT_REST_FACTOR = 3;
/** The rest is at most this long, so that the timer still bounds how long a lane's finished segment waits for its `.sealed` marker. */
const CHECKPOINT_MAX_REST_MS = 30_000;
/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CHECKPOINT_MS=<ms> checkpoints
 * that often, so a crash suite's short lives see checkpoints start, finish and
 * get killed midway.
 */
function checkpointMs(): number {
  const v = Number(process.env['SIGLAKE_TEST_CHECKPOINT_MS']);
  return process.env['SIGLAKE_TEST_HOOKS'] === '1' && Number.isInteger(v) && v > 0 ? v : CHECKPOINT_MS;
}
/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CHECKPOINT_DELAY_MS=<ms> makes
 * every checkpoint that much longer (a slow disk under many lanes), so that a
 * test sees the timer rest after it.
 */
function checkpointDelayMs(): number {
  const v = Number(process.env['SIGLAKE_TEST_CHECKPOINT_DELAY_MS']);
  return process.env['SIGLAKE_TEST_HOOKS'] === '1' && Number.isInteger(v) && v > 0 ? v : 0;
}
/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS=<ms>
 * makes every journal fdatasync that much slower (a slow disk), so that
 * requests queue while a round syncs and two rounds overlap under test.
 */
function journalSyncDelayMs(): number {
  const v = Number(process.env['SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS']);
  return process.env['SIGLAKE_TEST_HOOKS'] === '1' && Number.isFinite(v) && v > 0 ? v : 0;
}
/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_JOURNAL_FILE_BYTES=<n> makes
 * a journal file give way to the next past n bytes instead of
 * JOURNAL_FILE_BYTES, so that a crash suite's short lives leave many files.
 */
function journalFileBytes(): { fileBytes: number } | Record<string, never> {
  const v = Number(process.env['SIGLAKE_TEST_JOURNAL_FILE_BYTES']);
  return process.env['SIGLAKE_TEST_HOOKS'] === '1' && Number.isInteger(v) && v > 0 ? { fileBytes: v } : {};
}
/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_DIRECT_LEDGER=<file> gets a
 * line `<segment path> <size>` for each segment a direct round made durable,
 * appended before the round is answered, so that a crash suite's simulated
 * power loss knows which bytes no journal entry holds but an fdatasync did.
 */
function directLedger(): ((path: string, size: number | undefined) => void) | undefined {
  const file = process.env['SIGLAKE_TEST_DIRECT_LEDGER'];
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1' || file === undefined || file === '') return undefined;
  return (path, size) => appendFileSync(file, `${path} ${size ?? statSync(path).size}\n`);
}
/** Lane fdatasyncs a checkpoint keeps in flight at once (each may hold a descriptor), with 64 or more descriptors per worker; else 1. */
const CHECKPOINT_PARALLEL = 16;
/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CHECKPOINT_PARALLEL=<n> keeps
 * n lane fdatasyncs of a checkpoint in flight instead (perf/checkpoint-parallel.sh;
 * docs/performance.md, "Not the lever: fewer checkpoint syncs at once").
 */
function checkpointParallel(): number {
  const v = Number(process.env['SIGLAKE_TEST_CHECKPOINT_PARALLEL']);
  return process.env['SIGLAKE_TEST_HOOKS'] === '1' && Number.isInteger(v) && v > 0 && v <= 64 ? v : CHECKPOINT_PARALLEL;
}

/** Why a lane's requests of a round failed: the code and the message the client gets. */
interface LaneFailure {
  code: number;
  message: string;
}

const UNKNOWN_LANE = completionCode('SIGLAKE_UNKNOWN_LANE');
const DECODER_CRASH = completionCode('SIGLAKE_DECODER_CRASH');
const BUDGET_EXHAUSTED = completionCode('SIGLAKE_BUDGET_EXHAUSTED');

class LaneState {
  /** Requests of the current round on this lane failed with this. */
  failure: LaneFailure | undefined = undefined;
  touched = false;
  dirty = false;
  /** Journaled: bytes written since the lane's last early writeback or checkpoint began. */
  unsyncedBytes = 0;
  /** Journaled: an early writeback of its live segment is in flight. */
  writingBack = false;
  /** In ShardLoop's list of lanes written since the last checkpoint began. */
  sinceCheckpoint = false;
  writer!: LaneWriter;
  constructor(
    readonly key: LaneKey,
    /** The lane's tag in the commit journal. */
    readonly tag: Uint8Array,
  ) {}
}

/** One round's requests, in arrival order (parallel arrays, reused), and the lanes it touched. */
class Round implements TracedRound {
  readonly reqIds = new Int32Array(MAX_ROUND_REQUESTS);
  readonly records = new Int32Array(MAX_ROUND_REQUESTS);
  /** OTLP protobuf bytes a stored request wrote (its decoded payload). */
  readonly bytes = new Int32Array(MAX_ROUND_REQUESTS);
  /** Completion code per request: 0 accepted, else a code's wire number. */
  readonly codes = new Int32Array(MAX_ROUND_REQUESTS);
  readonly reqLane: (LaneState | undefined)[] = new Array(MAX_ROUND_REQUESTS);
  readonly messages: (string | undefined)[] = new Array(MAX_ROUND_REQUESTS);
  n = 0;
  readonly touched: LaneState[] = [];
  /** Test-only: the round trace's row and start (src/shard/round-trace.ts). */
  traceRow = -1;
  traceStart = 0;
}

/** A written round whose journal fdatasync runs on the pool: resolves to its failure, or undefined. */
interface InFlight {
  readonly round: Round;
  readonly sync: Promise<LaneFailure | undefined>;
}

export class ShardLoop {
  readonly #a: ShardTaskArgs;
  readonly #ring: ByteRing;
  readonly #compl: CompletionRing;
  readonly #bell: Doorbell;
  readonly #control: Int32Array;
  readonly #stats: WorkerStats;
  readonly #log: Logger;
  /** One line a second per kind of write failure: a full disk fails every request. */
  readonly #throttle = new LogThrottle();
  readonly #fds: FdCache;
  readonly #decoder: BodyDecoder;
  readonly #lanes = new Map<number, LaneState>();
  readonly #nextSegment = new Map<string, number>();
  readonly #frame: Frame = { offset: 0, length: 0, tag: 0 };
  /** The round being read and written, and the other one (free, or in flight). */
  #round = new Round();
  #other = new Round();
  /** Journaled: the round whose journal fdatasync is in flight. */
  #inFlight: InFlight | null = null;
  /** The round being read opened or forgot a lane. */
  #lanesChanged = false;
  /** `batch` mode with --wal-rounds-in-flight 2: a round's journal sync may overlap the next round's writes. */
  readonly #pipelined: boolean;
  readonly #dirty = new Set<LaneState>();
  #served = 0;
  #stopping = false;
  #lastHousekeeping = Date.now();
  #lastIntervalSync = Date.now();
  /** `batch` mode's commit journal; null in the other modes. */
  readonly #journal: ShardJournal | null;
  /** The lanes flushed during a journaled round (their runs go to the journal). */
  #journaling = false;
  /**
   * Lanes written by a journaled round since the last checkpoint began
   * (forgotten lanes stay until synced), each once (LaneState.sinceCheckpoint):
   * a list and a flag rather than a Set, as a round of a 10,000-tenant
   * shard marks a lane for nearly every request.
   */
  #sinceCheckpoint: LaneState[] = [];
  #lastCheckpoint = Date.now();
  readonly #checkpointMs = checkpointMs();
  /** The timer starts no checkpoint before this (Date.now() ms): CHECKPOINT_REST_FACTOR × the last one's duration after its end. */
  #checkpointRestUntil = 0;
  readonly #checkpointDelayMs = checkpointDelayMs();
  #checkpoint: Promise<void> | null = null;
  /** A checkpoint's lane sync failed: keep every journal file of this life. */
  #journalPinned = false;
  /** Early writebacks in flight (their completions need the event loop). */
  #writebacks = 0;
  /** Lane fdatasyncs a checkpoint keeps in flight (bounded by the descriptor budget). */
  readonly #checkpointParallel: number;
  /** `batch` mode: a round of one lane writing at least this much bypasses the journal (0: never). */
  readonly #directBytes: number;
  /** `batch` mode with --wal-defer-lane-writes: lanes whose descriptor is closed defer their rounds' writes to the checkpoint. */
  readonly #deferLanes: boolean;
  /** Deferred lane writes: the checkpoint's native write of a segment's runs (null: in JavaScript, on this thread). */
  readonly #runsWriter: RunsWriter | null = null;
  /** The runs deferred flushes of the round being written made, and their entries' numbers in the journal's round (placed once it is written). */
  readonly #placingLane: LaneWriter[] = [];
  readonly #placingRun: number[] = [];
  readonly #placingEntry: number[] = [];
  /** Test-only: hears each segment a direct round made durable. */
  readonly #directLedger: ((path: string, size: number | undefined) => void) | undefined = directLedger();
  /** Test-only: the round trace (src/shard/round-trace.ts), when one is on. */
  readonly #trace: WorkerTrace | null;

  constructor(args: ShardTaskArgs, threadId: number) {
    this.#a = args;
    this.#ring = new ByteRing(args.ringSab);
    this.#compl = new CompletionRing(args.complSab);
    this.#bell = new Doorbell(args.doorbellSab);
    this.#control = new Int32Array(args.controlSab);
    this.#stats = new WorkerStats(args.statsSab);
    this.#log = createLogger(args.settings.logLevel, 'siglake-worker').child({ shard: args.shard });
    const journaled = args.settings.walFsync === 'batch';
    const budget = Math.max(1, args.settings.maxOpenFiles);
    // --wal-max-open-files covers the journal too: in batch mode one descriptor
    // is the journal's, one is for a sync of a closed segment on the request
    // path (a refused round's), one for the spare being prefilled, one for a
    // journal file given up while its sync is in flight, MAX_WRITEBACKS for
    // segments the LRU evicted while their early writeback runs, and the
    // checkpoint's syncs in flight hold at most #checkpointParallel more (a
    // fresh one or a cached one kept open).
    this.#checkpointParallel = budget >= 64 ? checkpointParallel() : 1;
    this.#deferLanes = journaled && args.settings.walDeferLaneWrites;
    // (Deferred lane writes: the journal's read-only descriptors, JOURNAL_READERS of them, too;
    // and a checkpoint sync that writes a segment's runs in native code holds
    // two, the segment's and a journal file's.)
    if (this.#deferLanes) {
      const journalDir = this.#journalDir();
      const r = nativeRunsWriter((file) => join(journalDir, formatJournalName(file)), args.settings.walDropSyncedPages);
      this.#runsWriter = r.writer;
      if (r.failure !== undefined) this.#log.info({ reason: r.failure }, "deferred lane writes: the checkpoint reads the runs back on the worker's thread (the native addon's writeRuns did not load)");
    }
    const perSync = this.#runsWriter !== null ? 2 : 1;
    const cached = journaled ? Math.max(1, budget - 4 - MAX_WRITEBACKS - this.#checkpointParallel * perSync - (this.#deferLanes ? JOURNAL_READERS : 0)) : budget;
    this.#fds = new FdCache(cached, args.settings.walDropSyncedPages ? dropSyncedPagesOps().ops : undefined, { lazyEviction: journaled });
    this.#journal = journaled
      ? new ShardJournal({
          dir: this.#journalDir(),
          syncDelayMs: journalSyncDelayMs(),
          ...journalFileBytes(),
          recycle: args.settings.walJournalRecycle,
          prefillBytes: args.settings.walJournalPrefillBytes,
        })
      : null;
    this.#pipelined = journaled && args.settings.walRoundsInFlight === 2;
    this.#directBytes = journaled ? args.settings.walDirectRoundBytes : 0;
    this.#decoder = new BodyDecoder(args.settings.maxRequestBytes);
    // The acceptor loaded the addon already when it is to be used; a thread may still fail to.
    const walk = useOtlpWalk(args.settings.otlpWalk);
    if (walk.failure !== undefined && args.settings.otlpWalk === 'native') this.#log.error({ reason: walk.failure }, 'native OTLP walk did not load in this worker: the JavaScript walk validates its bodies');
    Atomics.store(this.#control, ControlWord.THREAD_ID, threadId);
    const tracePath = roundTracePath();
    this.#trace = tracePath !== undefined && args.traceSab !== undefined ? new WorkerTrace(tracePath, args.traceSab, args.shard) : null;
  }

  #journalDir(): string {
    return join(this.#a.settings.walDir, JOURNAL_ROOT, journalDirName(this.#a.shard, this.#a.workers));
  }

  async run(): Promise<ShardExit> {
    this.#recover();
    for (const spec of this.#a.lanes) this.#open(spec);
    Atomics.store(this.#control, ControlWord.READY, this.#a.incarnation);
    this.#bell.ring();
    this.#log.debug({ incarnation: this.#a.incarnation, lanes: this.#lanes.size }, 'shard ready');

    while (!this.#stopping) {
      if (this.#ring.isEmpty() && this.#inFlight !== null) {
        await this.#finishInFlight();
        await this.#housekeeping();
        continue;
      }
      if (this.#ring.isEmpty()) {
        // Nothing of this thread's is pending while it waits (every fdatasync
        // and seal was awaited, a checkpoint and a journal spare's prefill
        // aside: then it waits briefly), so it blocks: the acceptor's notify wakes it.
        this.#trace?.sleeping();
        this.#ring.waitForDataSync(this.#idleWaitMs());
        // Still idle after the wait: give the event loop a turn (messages from
        // Piscina, timers) before blocking again.
        if (this.#ring.isEmpty()) await new Promise<void>((r) => setImmediate(r));
        await this.#housekeeping();
        continue;
      }
      this.#trace?.roundStart(this.#round);
      this.#readRound();
      this.#trace?.mark(this.#round, 1);
      await this.#commitRound();
      // Two rounds in flight: read the next one unless housekeeping is due.
      if (this.#inFlight !== null) {
        if (!this.#stopping && !this.#housekeepingDue()) continue;
        await this.#finishInFlight();
      }
      // A checkpoint's fdatasyncs, early writebacks and a journal spare's prefill steps complete on the event loop: give it a turn.
      if (this.#checkpoint !== null || this.#writebacks > 0 || this.#journal?.sparePreparing === true) await new Promise<void>((r) => setImmediate(r));
      await this.#housekeeping();
    }
    if (this.#inFlight !== null) await this.#finishInFlight();
    // Everything before the SHUTDOWN frame was served; seal and close every lane.
    for (const lane of this.#lanes.values()) {
      try {
        await lane.writer.close();
        // Journaled: sealed without a sync; the last checkpoint makes it durable and writes its marker.
        if (this.#journal !== null && lane.writer.checkpointPending) this.#markSinceCheckpoint(lane);
      } catch (e) {
        this.#log.error({ lane: lane.key.label, err: (e as Error).message }, 'closing a WAL segment failed');
        this.#pinJournal(lane, e, 'closing a segment');
      }
    }
    if (this.#journal !== null) {
      // Every lane is sealed; this last checkpoint makes the sealed segments durable (and lanes
      // forgotten while live), deletes the journal, then writes the markers.
      if (this.#checkpoint !== null) await this.#checkpoint;
      this.#startCheckpoint();
      if (this.#checkpoint !== null) await this.#checkpoint;
      this.#journal.close();
    }
    this.#trace?.write();
    return { shard: this.#a.shard, requests: this.#served };
  }

  /** Repairs the tails of every lane on disk that belongs to this shard. */
  #recover(): void {
    const { walDir } = this.#a.settings;
    const { shard, workers } = this.#a;
    // First the journal's tail (a crash of this worker or of the machine):
    // back into the lane segments, which the repair below then checks.
    // (Logged after the lane repairs: a worker's log lines after its first
    // one reach stdout only when its event loop turns, and the repair lines
    // are the ones an operator looks for first.)
    const journalDir = this.#journalDir();
    const j = replayJournalDir(walDir, journalDir);
    if (this.#journal === null && existsSync(journalDir)) {
      // `interval`/`never` after a `batch` run: remove the (now empty) directory, so that the
      // compactor (src/compactor/seal-rule.ts) no longer waits for markers this mode does not write.
      try {
        rmdirSync(journalDir);
        NODE_FILE_OPS.fsyncDir(join(walDir, JOURNAL_ROOT));
      } catch (e) {
        this.#log.warn({ dir: journalDir, err: (e as Error).message }, 'WAL journal directory of a batch run not removed: the compactor lands only marked segments');
      }
    }
    // (`journalRecreated` below: segments a machine crash lost before a checkpoint made them durable.)
    if (j.rewrittenRecords > 0) this.#stats.addJournalReplayedRecords(j.rewrittenRecords);
    // The same key the acceptor's lane table gives the lane, so the same shard.
    // Batch: also the torn tail of an unacknowledged round in a segment it rotated away from.
    const r = recoverWal(walDir, (l) => LaneKey.at(l).shard(workers) === shard, { cutTornEarlier: this.#journal !== null });
    for (const [dir, next] of r.nextSegment) this.#nextSegment.set(dir, next);
    if (r.truncatedBytes > 0) this.#stats.addTruncatedBytes(r.truncatedBytes);
    // Every segment of an earlier life is durable now (batch: replay synced what the journal held, a
    // checkpoint the rest; markRecoveredLanes syncs what a killed round wrote past both, and whatever
    // `interval` or `never` left in the page cache) and no journal file names it, and this life never
    // appends to one: mark them for the compactor, which under a journal takes nothing above a lane's
    // marker, and in every mode nothing at or above a lane's highest segment of this ingester's life.
    // (After a worker thread was replaced, a quiet lane's last segment, written by the dead worker,
    // stayed the lane's highest, unmarked: outside batch mode it never landed until the lane wrote again.)
    markRecoveredLanes(r.nextSegment);
    for (const { lane, recovery } of r.lanes) {
      if (recovery.cut !== null) {
        this.#log.warn(
          { dir: lane.dir, cut: recovery.cut.kind, segment: recovery.cut.segment, offset: recovery.cut.offset, truncatedBytes: recovery.truncatedBytes },
          'WAL tail repaired: cut back to the last whole record',
        );
      }
      for (const c of recovery.earlierCuts) {
        this.#log.warn(
          { dir: lane.dir, cut: c.kind, segment: c.segment, offset: c.offset, truncatedBytes: c.bytes },
          'WAL torn tail of an unacknowledged round cut from a segment before the last',
        );
      }
      if (recovery.notFiles.length > 0) {
        this.#log.error(
          { dir: lane.dir, entries: recovery.notFiles },
          'WAL lane holds entries named as segments that are not regular files: nothing reads or writes them, their numbers are skipped (run siglake wal verify)',
        );
      }
      for (const d of recovery.damaged) {
        this.#log.error({ dir: lane.dir, damage: String(d) }, 'WAL segment damaged: not repaired, its bytes kept (run siglake wal verify)');
      }
    }
    for (const stop of j.stops) {
      if (stop.kind !== 'torn') continue; // a corrupt one is kept, below
      this.#log.warn({ file: stop.file, stop: stop.kind, offset: stop.offset, why: stop.why }, 'WAL journal tail cut: replayed up to the last whole entry');
    }
    for (const k of j.kept) logKeptJournal(this.#log, k);
    const journal =
      j.files > 0
        ? { journalFiles: j.files, journalEntries: j.entries, journalPresent: j.present, journalRewritten: j.rewritten, journalRewrittenRecords: j.rewrittenRecords, journalSkipped: j.skipped, journalRecreated: j.recreated }
        : {};
    this.#log.info({ lanes: r.lanes.length, truncatedBytes: r.truncatedBytes, ...journal }, 'WAL recovery done');
  }

  #open(spec: LaneSpec): LaneState {
    const key = keyOfSpec(spec);
    const dir = key.walDir(this.#a.settings.walDir);
    const next = this.#nextSegment.get(dir);
    // Recovery's number holds for the first writer of the lane only: one
    // opened again (a provisional lane forgotten after a refused round, then
    // admitted again) repairs the lane itself and finds its own segments.
    this.#nextSegment.delete(dir);
    const state = new LaneState(key, laneTag(this.#a.settings.walDir, dir));
    const journal = this.#journal;
    state.writer = new LaneWriter({
      dir,
      root: this.#a.settings.walDir,
      segmentBytes: this.#a.settings.walSegmentBytes,
      fdCache: this.#fds,
      journaled: journal !== null,
      // Round N+1 is written while round N's journal (or direct) fdatasync runs.
      // (A direct round's sync overlaps the next round whatever --wal-rounds-in-flight says.)
      ...(journal !== null ? { unconfirmedFlushes: 2 as const } : {}),
      // Most lanes see a handful of records per round; the slab doubles when one needs more.
      slabRecords: 4,
      ...(next !== undefined ? { nextSegment: next } : {}),
      ...(journal !== null
        ? {
            onWritten: (segment: number, offset: number, iov: readonly Uint8Array[], n: number, bytes: number, records: number, run?: number) => {
              if (!this.#journaling) return;
              const entry = journal.stage(state.tag, segment, offset, iov, 0, n, bytes, records);
              if (run !== undefined) {
                this.#placingLane.push(state.writer);
                this.#placingRun.push(run);
                this.#placingEntry.push(entry);
              }
            },
          }
        : {}),
      ...(journal !== null && this.#deferLanes
        ? {
            readBack: (file: number, offset: number, length: number, into: Uint8Array, at: number) => journal.readBack(file, offset, length, into, at),
            ...(this.#runsWriter !== null ? { writeRuns: this.#runsWriter } : {}),
          }
        : {}),
    });
    this.#lanes.set(spec.id, state);
    return state;
  }

  /**
   * The acceptor forgot a lane. Its deferred records go to its segments now
   * (read back from the journal, no sync: the checkpoint still syncs them),
   * so that a writer opened on the lane again finds its segments whole.
   */
  #forget(laneId: number): void {
    const lane = this.#lanes.get(laneId);
    this.#lanes.delete(laneId);
    if (lane === undefined || !lane.writer.hasDeferred) return;
    try {
      lane.writer.writeDeferred();
    } catch (e) {
      // They stay deferred: the checkpoint writes them, or keeps the journal.
      this.#log.error({ lane: lane.key.label, err: (e as Error).message }, 'WAL deferred records of a forgotten lane not written');
    }
  }

  #idleWaitMs(): number {
    const s = this.#a.settings;
    if (this.#checkpoint !== null || this.#writebacks > 0 || this.#journal?.sparePreparing === true) return 1;
    return s.walFsync === 'interval' && this.#dirty.size > 0 ? s.walFsyncIntervalMs : HOUSEKEEPING_MS;
  }

  /** Reads and stages one round of frames. */
  #readRound(): void {
    const ring = this.#ring;
    const bytes = ring.bytes;
    const f = this.#frame;
    const now = Date.now();
    let roundBytes = 0;
    const round = this.#round;
    round.n = 0;
    while (round.n < MAX_ROUND_REQUESTS && roundBytes < MAX_ROUND_BYTES && ring.read(f)) {
      roundBytes += f.length;
      const off = f.offset;
      const kind = frameKind(bytes, off);
      const laneId = frameLaneId(bytes, off);
      const payload = bytes.subarray(off + FRAME_PREFIX_BYTES, off + f.length);
      if (kind === FrameKind.DATA) {
        this.#stageRequest(round, f.tag, frameFlags(bytes, off), laneId, payload, now);
      } else if (kind === FrameKind.LANE_OPEN) {
        this.#open(decodeLaneSpec(payload));
        this.#lanesChanged = true;
      } else if (kind === FrameKind.LANE_FORGET) {
        this.#forget(laneId);
        this.#lanesChanged = true;
      } else if (kind === FrameKind.SHUTDOWN) {
        this.#stopping = true;
        break;
      }
    }
  }

  #stageRequest(round: Round, reqId: number, flags: number, laneId: number, body: Uint8Array, now: number): void {
    this.#trace?.read(round, reqId);
    const i = round.n++;
    round.reqIds[i] = reqId;
    round.records[i] = 0;
    round.bytes[i] = 0;
    round.messages[i] = undefined;
    round.reqLane[i] = undefined;
    const lane = this.#lanes.get(laneId);
    if (lane === undefined) {
      round.codes[i] = UNKNOWN_LANE;
      round.messages[i] = 'write failed: the writer does not know this lane; the request was not stored';
      this.#log.error({ laneId }, 'request for a lane this worker was never told about');
      return;
    }
    let records: number;
    try {
      records = this.#decoder.decode(flags, body);
    } catch (e) {
      if (e instanceof BodyError) {
        round.codes[i] = completionCode(e.code);
        round.messages[i] = e.message;
        return;
      }
      round.codes[i] = DECODER_CRASH;
      round.messages[i] = 'write failed: internal error while decoding; the request was not stored';
      this.#log.error({ err: (e as Error).message }, 'unexpected error decoding a body');
      return;
    }
    if ((flags & FLAG_BUDGET_EXHAUSTED) !== 0 && this.#decoder.payload.length > 0) {
      // A valid body against an exhausted budget (contract §4: step 11, then 12): refused, nothing
      // staged. An empty export request is a 200 (§6): it charges nothing and writes nothing.
      round.codes[i] = BUDGET_EXHAUSTED;
      return;
    }
    round.codes[i] = ACCEPTED;
    round.records[i] = records;
    round.bytes[i] = this.#decoder.payload.length;
    if (this.#decoder.payload.length === 0) return; // an empty export request writes nothing
    round.reqLane[i] = lane;
    const type = signalOfFlags(flags) === 'traces' ? RecordType.TRACES : RecordType.LOGS;
    lane.writer.stage(type, records, now, this.#decoder.payload);
    if (!lane.touched) {
      lane.touched = true;
      lane.failure = undefined;
      round.touched.push(lane);
    }
  }

  /** Writes, releases the ring, syncs (batch mode) and answers the round (or leaves it in flight). */
  async #commitRound(): Promise<void> {
    const round = this.#round;
    const touched = round.touched;
    const mode = this.#a.settings.walFsync;
    const journal = this.#journal;
    // A large round of one lane skips the journal: its own segments' fdatasync writes its bytes once.
    const direct = journal !== null && touched.length === 1 && this.#directBytes > 0 && touched[0]!.writer.stagedBytes >= this.#directBytes;
    const journaled = journal !== null && touched.length > 0 && !direct;
    // New lanes: their directories made and synced before anything is written to them.
    const dirs = this.#makeLaneDirs(touched);
    if (dirs !== undefined) await dirs;
    // A lane opened again (forgotten, then admitted) gets a new writer on the
    // same directory: the old one's flush in flight is settled before it writes.
    // A round that writes nothing is answered at once: the round in flight is
    // answered first (its sync's completion needs the event loop, which a run
    // of such rounds would never give a turn).
    if (this.#inFlight !== null && (this.#lanesChanged || !(journaled || direct))) await this.#finishInFlight();
    this.#lanesChanged = false;
    this.#journaling = journaled;
    // Deferred runs keep their journal offset in 32 bits: past that, rounds write their lanes.
    const defer = journaled && this.#deferLanes && journal.fileSize < DEFER_MAX_JOURNAL_OFFSET;
    for (const lane of touched) {
      try {
        const deferred = defer && lane.writer.prefersDeferral;
        const bytes = lane.writer.flush(deferred);
        this.#stats.addWalBytes(bytes);
        lane.dirty = true;
        if (deferred) this.#stats.addDeferredBytes(bytes);
        else if (journaled) {
          lane.unsyncedBytes += bytes;
          if (lane.unsyncedBytes >= WRITEBACK_BYTES && !lane.writingBack && this.#writebacks < MAX_WRITEBACKS && !lane.writer.hasDeferred) this.#writeBack(lane);
        }
      } catch (e) {
        lane.failure = writeFailure(e);
        this.#stats.addWriteError();
        const left = this.#throttle.take(`write:${(e as { errno?: string }).errno ?? (e as Error).message}`);
        if (left >= 0) this.#log.error({ lane: lane.key.label, ...(e instanceof WalWriteError ? { path: e.path } : {}), err: (e as Error).message, suppressed: left }, 'WAL write failed');
        // A rotation whose fdatasync failed gave up a segment holding journaled records.
        if (e instanceof WalWriteError && e.op === 'fdatasync') this.#pinJournal(lane, e, 'rotating a segment');
      }
    }
    this.#journaling = false;
    let journalFailure: LaneFailure | undefined;
    if (journaled) {
      const uses = journal.spareUses;
      try {
        journal.write();
        // Where the deferred runs lie in the journal: what the checkpoint reads back.
        const file = journal.lastFile;
        for (let k = 0; k < this.#placingRun.length; k++) this.#placingLane[k]!.placeRun(this.#placingRun[k]!, file, journal.bodyOffset(this.#placingEntry[k]!));
      } catch (e) {
        journalFailure = this.#journalFailed(e, 'write');
      } finally {
        this.#placingLane.length = 0;
        this.#placingRun.length = 0;
        this.#placingEntry.length = 0;
      }
      if (journal.spareUses !== uses) this.#stats.addJournalSpareUse();
    }
    // The payload views are in the kernel now (or dropped): give the ring space back.
    this.#ring.release();
    this.#trace?.mark(round, 2);

    if (journaled || direct) {
      // A direct round's lane whose write failed: the round is refused and cut back.
      const lane0 = touched[0]!;
      if (direct && lane0.failure !== undefined) journalFailure = lane0.failure;
      // The lanes' own write failures are this round's: the lanes may be in the next one.
      this.#settleLaneFailures(round);
      for (const lane of touched) {
        // Even a lane whose write failed may have rotated to (and created) segments the checkpoint must sync.
        // (A direct round's lane too: the checkpoint still writes its marker.)
        this.#markSinceCheckpoint(lane);
      }
      const earlier = this.#inFlight;
      if (earlier !== null) {
        // This round's entries (or a direct round's bytes) follow the earlier
        // round's: if its sync failed, this round cannot be made durable by another.
        const failure = await this.#finishInFlight();
        journalFailure ??= failure;
      }
      if (journalFailure === undefined) {
        // A direct round's sync always overlaps the next round when requests
        // wait: it writes megabytes, against which the pool hop is nothing.
        if ((this.#pipelined || direct) && !this.#ring.isEmpty() && !this.#stopping) {
          // More requests wait: sync on the pool and write them meanwhile.
          const t0 = performance.now();
          const sync = (direct ? this.#syncDirect(lane0) : journal.sync()).then(
            () => {
              this.#synced(direct, t0);
              this.#trace?.mark(round, 3);
              return undefined;
            },
            (e: unknown) => (direct ? this.#directFailed(lane0, e) : this.#journalFailed(e, 'fdatasync')),
          );
          this.#inFlight = { round, sync };
          this.#round = this.#other;
          this.#other = round;
          return;
        }
        // One fdatasync for the round, whatever the number of lanes it touched
        // (direct: one per segment it wrote, on this thread).
        const t0 = performance.now();
        try {
          if (direct) lane0.writer.syncFlushNow(this.#directLedger);
          else journal.syncNow();
          this.#synced(direct, t0);
          this.#trace?.mark(round, 3);
        } catch (e) {
          journalFailure = direct ? this.#directFailed(lane0, e) : this.#journalFailed(e, 'fdatasync');
        }
      }
      if (direct) lane0.unsyncedBytes = 0;
      this.#endJournaled(round, journalFailure);
    } else if (mode === 'batch') {
      if (touched.length === 1) {
        // One file: fdatasync right here. A thread-pool hop would only add two
        // thread wake-ups to every round (this thread has nothing else to do).
        if (touched[0]!.failure === undefined) this.#syncNow(touched[0]!);
      } else {
        // Several files: their fdatasyncs run in parallel on libuv's pool.
        await Promise.all(touched.map((lane) => (lane.failure === undefined ? this.#sync(lane) : undefined)));
      }
      this.#settleLaneFailures(round);
    } else {
      for (const lane of touched) if (lane.failure === undefined) this.#dirty.add(lane);
      this.#settleLaneFailures(round);
    }
    await this.#answer(round);
  }

  /**
   * The round's lanes whose directory this life has not made ready: each
   * directory made without a sync, then every parent that needs one synced
   * once, all in parallel on the pool. Two new lanes of a tenant, or a
   * thousand new tenants under one WAL root, share their parent's fsync, and
   * this thread writes no other round meanwhile, as before: the difference
   * is that the syncs overlap and are not repeated (docs/wal-format.md "New
   * lanes"). A lane whose sync failed is left as it was: its flush makes and
   * syncs the directory itself, and a failure there refuses its requests.
   */
  #makeLaneDirs(touched: readonly LaneState[]): Promise<void> | undefined {
    let made: { lane: LaneState; dirs: string[] }[] | undefined;
    for (const lane of touched) {
      const dirs = lane.writer.prepareDir();
      if (dirs !== null) (made ??= []).push({ lane, dirs });
    }
    return made === undefined ? undefined : this.#syncLaneDirs(made);
  }

  async #syncLaneDirs(made: readonly { lane: LaneState; dirs: string[] }[]): Promise<void> {
    const syncs = new Map<string, Promise<boolean>>();
    for (const { lane, dirs } of made) {
      for (const d of dirs) {
        if (!syncs.has(d)) syncs.set(d, lane.writer.syncDir(d).then(() => true, () => false));
      }
    }
    this.#stats.addLaneDirFsyncs(syncs.size);
    const ok = new Map<string, boolean>();
    await Promise.all([...syncs].map(async ([d, p]) => ok.set(d, await p)));
    for (const { lane, dirs } of made) if (dirs.every((d) => ok.get(d) === true)) lane.writer.dirDurable();
  }

  /** A journaled or direct round's sync returned. */
  #synced(direct: boolean, t0: number): void {
    this.#stats.observeFsync((performance.now() - t0) / 1000);
    if (direct) this.#stats.addDirectRound();
  }

  /** A direct round's segments, fdatasynced on libuv's pool (docs/wal-format.md "Direct rounds"). */
  #syncDirect(lane: LaneState): Promise<void> {
    return lane.writer.syncFlush(this.#directLedger);
  }

  /**
   * A direct round's fdatasync failed: the round is refused and cut back
   * (#endJournaled), and the journal kept, since the segment's earlier,
   * journaled records may be lost from its pages.
   */
  #directFailed(lane: LaneState, e: unknown): LaneFailure {
    this.#stats.addWriteError();
    const left = this.#throttle.take(`fdatasync:${(e as { errno?: string }).errno ?? (e as Error).message}`);
    if (left >= 0) this.#log.error({ lane: lane.key.label, err: (e as Error).message, suppressed: left }, 'WAL fdatasync failed');
    this.#pinJournal(lane, e, "a direct round's fdatasync");
    return writeFailure(e);
  }

  /** Waits for the round in flight, ends it and answers it; returns its journal failure, if any. */
  async #finishInFlight(): Promise<LaneFailure | undefined> {
    const f = this.#inFlight!;
    const failure = await f.sync;
    this.#inFlight = null;
    this.#endJournaled(f.round, failure);
    await this.#answer(f.round);
    return failure;
  }

  /** A journaled round's sync returned: its lanes' flushes are durable, or refused with `failure`. */
  #endJournaled(round: Round, failure: LaneFailure | undefined): void {
    if (failure === undefined) {
      for (const lane of round.touched) lane.writer.flushDurable();
      return;
    }
    for (let i = 0; i < round.n; i++) {
      if (round.codes[i] === ACCEPTED && round.reqLane[i] !== undefined) {
        round.codes[i] = failure.code;
        round.messages[i] = failure.message;
      }
    }
    for (const lane of round.touched) {
      // The round's lane bytes have no durable journal entry: take them out
      // of the segment (with a later round's, when two are in flight), so that
      // no later acknowledged record sits behind bytes a crash may lose
      // (replay would leave a hole the tail repair cuts). A lane whose own
      // write failed is refused already; it is cut back too (segments it
      // rotated away from are synced there).
      try {
        lane.writer.refuseLastFlush();
      } catch (e) {
        this.#pinJournal(lane, e, 'cutting back a refused round');
      }
    }
  }

  /** Folds each touched lane's write or sync failure into its requests' codes; the lanes leave the round. */
  #settleLaneFailures(round: Round): void {
    for (let i = 0; i < round.n; i++) {
      const lane = round.reqLane[i];
      if (round.codes[i] === ACCEPTED && lane !== undefined && lane.failure !== undefined) {
        round.codes[i] = lane.failure.code;
        round.messages[i] = lane.failure.message;
      }
    }
    for (const lane of round.touched) {
      lane.touched = false;
      lane.failure = undefined;
    }
  }

  /** Posts the round's completions and frees it. */
  async #answer(round: Round): Promise<void> {
    const n = round.n;
    for (let i = 0; i < n; i++) {
      const code = round.codes[i]!;
      const message = round.messages[i];
      const records = code === ACCEPTED ? round.records[i]! : 0;
      const bytes = code === ACCEPTED ? round.bytes[i]! : 0;
      // Stamped before the push: the acceptor may drain the completion (and
      // read the stamp) the moment it is in the ring.
      this.#trace?.posted(round.reqIds[i]!);
      if (!this.#compl.push(round.reqIds[i]!, code, records, message, bytes)) {
        await this.#postWhenRoom(round.reqIds[i]!, code, records, message, bytes);
      }
      round.reqLane[i] = undefined;
      round.messages[i] = undefined;
    }
    this.#served += n;
    round.n = 0;
    round.touched.length = 0;
    if (n > 0) this.#bell.ring();
    this.#trace?.roundEnd(round, n);
  }

  #markSinceCheckpoint(lane: LaneState): void {
    if (lane.sinceCheckpoint) return;
    lane.sinceCheckpoint = true;
    this.#sinceCheckpoint.push(lane);
  }

  /** Journal bytes since the last checkpoint began that start the next one. */
  #checkpointBytes(): number {
    return checkpointTriggerBytes(this.#sinceCheckpoint.length);
  }

  /** The timer's checkpoint is due: CHECKPOINT_MS since the last one began, and its rest over. */
  #checkpointTimerDue(now: number): boolean {
    return now - this.#lastCheckpoint >= this.#checkpointMs && now >= this.#checkpointRestUntil;
  }

  /** Housekeeping has work now: a checkpoint, an interval sync or the age seals are due. */
  #housekeepingDue(): boolean {
    const now = Date.now();
    const journal = this.#journal;
    if (journal !== null && this.#checkpoint === null && (journal.bytesSinceRotate >= this.#checkpointBytes() || this.#checkpointTimerDue(now))) return true;
    return now - this.#lastHousekeeping >= HOUSEKEEPING_MS;
  }

  /**
   * A segment holding journaled records was given up without a good
   * fdatasync: only the journal holds them durably now, so no checkpoint of
   * this life deletes a journal file; the next start replays them (every
   * existing segment not sealed) and releases the journal. Until then the
   * journal grows: restart the process once the disk is healthy (runbook
   * SIGLAKE_WAL_DISK).
   */
  #pinJournal(lane: LaneState, e: unknown, what: string): void {
    if (this.#journal === null) return;
    if (!this.#journalPinned) {
      this.#log.error({ lane: lane.key.label, err: (e as Error).message }, `WAL ${what} failed: the commit journal is kept until the next start`);
    }
    this.#journalPinned = true;
  }

  #journalFailed(e: unknown, op: string): LaneFailure {
    this.#stats.addWriteError();
    const left = this.#throttle.take(`journal-${op}:${(e as { errno?: string }).errno ?? (e as Error).message}`);
    if (left >= 0) this.#log.error({ err: (e as Error).message, suppressed: left }, `WAL journal ${op} failed`);
    return writeFailure(e);
  }

  /**
   * Starts a checkpoint unless one runs: the journal rotates to a new file,
   * every lane written by a journaled round before that is fdatasynced, and
   * then the journal files up to the rotation are deleted.
   */
  #startCheckpoint(): void {
    const journal = this.#journal;
    if (journal === null || this.#checkpoint !== null) return;
    this.#lastCheckpoint = Date.now();
    const upTo = journal.rotate();
    // What each lane wrote before the rotation: its live segment, the ones it
    // rotated or sealed, whether it created one (directory), its seal.
    const lanes = this.#sinceCheckpoint.map((lane) => {
      lane.unsyncedBytes = 0;
      lane.sinceCheckpoint = false;
      return { lane, cp: lane.writer.takeCheckpoint() };
    });
    this.#sinceCheckpoint = [];
    if (upTo === 0 && lanes.length === 0) return;
    this.#checkpoint = this.#runCheckpoint(journal, upTo, lanes).finally(() => {
      this.#checkpoint = null;
    });
  }

  async #runCheckpoint(journal: ShardJournal, upTo: number, lanes: { lane: LaneState; cp: LaneCheckpoint }[]): Promise<void> {
    const t0 = performance.now();
    try {
      if (this.#checkpointDelayMs > 0) await new Promise((r) => setTimeout(r, this.#checkpointDelayMs));
      await this.#checkpointLanes(journal, upTo, lanes);
    } finally {
      const ms = performance.now() - t0;
      this.#checkpointRestUntil = Date.now() + Math.min(CHECKPOINT_MAX_REST_MS, CHECKPOINT_REST_FACTOR * ms);
      this.#stats.addCheckpointSeconds(ms / 1000);
    }
  }

  async #checkpointLanes(journal: ShardJournal, upTo: number, lanes: { lane: LaneState; cp: LaneCheckpoint }[]): Promise<void> {
    let failed = 0;
    let next = 0;
    const one = async (): Promise<void> => {
      while (next < lanes.length) {
        const { lane, cp } = lanes[next++]!;
        try {
          await lane.writer.syncCheckpoint(cp);
        } catch (e) {
          failed++;
          this.#stats.addWriteError();
          this.#log.error({ lane: lane.key.label, err: (e as Error).message }, 'WAL checkpoint: fdatasync of a lane segment failed; the journal is kept');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#checkpointParallel, lanes.length) }, one));
    if (failed > 0) this.#journalPinned = true;
    if (this.#journalPinned) return;
    if (upTo !== 0) {
      try {
        journal.retireUpTo(upTo);
        this.#stats.addCheckpoint();
      } catch (e) {
        this.#log.error({ err: (e as Error).message }, 'WAL checkpoint: deleting journal files failed');
        return;
      }
    }
    // Only now may the compactor take a segment the lane finished (rotated
    // away from or sealed): it is durable by itself, and no journal entry
    // that could write into it or recreate it at the next start is left.
    // Under a journal the compactor takes no other segment of a running
    // lane (src/compactor/seal-rule.ts), even one below the highest.
    const sealed = lanes.filter((l) => l.cp.finished > 0);
    let m = 0;
    const mark = async (): Promise<void> => {
      while (m < sealed.length) {
        const { lane, cp } = sealed[m++]!;
        try {
          await writeSealedMarkerAsync(lane.writer.dir, cp.finished);
        } catch {
          // Only a hint for the compactor: without it, it waits for the lane's next segment.
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#checkpointParallel, sealed.length) }, mark));
  }

  /**
   * Journaled: an fdatasync of the lane's live segment on the pool, ahead of
   * the checkpoint (docs/wal-format.md "Early writeback"). It changes nothing
   * the checkpoint relies on (the checkpoint still syncs every segment written
   * since it last ran, waiting for this one when it is still in flight), but
   * it writes the lane's bytes back a megabyte at a time instead of a
   * checkpoint's worth at once, which held every round's journal fdatasync
   * behind it. A failure is a checkpoint's: the segment is given up and the
   * journal kept until the next start.
   */
  #writeBack(lane: LaneState): void {
    lane.unsyncedBytes = 0;
    lane.writingBack = true;
    this.#writebacks++;
    this.#stats.addWriteback();
    // Not in siglake_wal_fsync_seconds: that is the request path's syncs.
    void lane.writer
      .sync()
      .catch((e: unknown) => {
        this.#stats.addWriteError();
        this.#pinJournal(lane, e, 'an early fdatasync of a segment');
      })
      .finally(() => {
        lane.writingBack = false;
        this.#writebacks--;
      });
  }

  #syncNow(lane: LaneState): void {
    const t0 = performance.now();
    try {
      lane.writer.syncNow();
      this.#laneSynced(lane, t0);
    } catch (e) {
      this.#syncFailed(lane, e);
    }
  }

  async #sync(lane: LaneState): Promise<void> {
    const t0 = performance.now();
    try {
      await lane.writer.sync();
      this.#laneSynced(lane, t0);
    } catch (e) {
      this.#syncFailed(lane, e);
    }
  }

  #laneSynced(lane: LaneState, t0: number): void {
    lane.dirty = false;
    this.#stats.observeFsync((performance.now() - t0) / 1000);
  }

  #syncFailed(lane: LaneState, e: unknown): void {
    lane.failure = writeFailure(e);
    this.#stats.addWriteError();
    const left = this.#throttle.take(`fdatasync:${(e as { errno?: string }).errno ?? (e as Error).message}`);
    if (left >= 0) this.#log.error({ lane: lane.key.label, err: (e as Error).message, suppressed: left }, 'WAL fdatasync failed');
  }

  /** The completion ring is full: wake the acceptor and wait until it drained some. */
  async #postWhenRoom(reqId: number, code: number, records: number, message: string | undefined, bytes = 0): Promise<void> {
    while (!this.#compl.push(reqId, code, records, message, bytes)) {
      this.#bell.ring();
      await this.#compl.waitForRoom(100);
    }
  }

  /** Interval fsyncs and age-based sealing, between rounds. */
  async #housekeeping(): Promise<void> {
    const s = this.#a.settings;
    const now = Date.now();
    const journal = this.#journal;
    if (
      journal !== null &&
      this.#checkpoint === null &&
      (journal.bytesSinceRotate >= this.#checkpointBytes() || (this.#checkpointTimerDue(now) && (this.#sinceCheckpoint.length > 0 || journal.fileCount > 0)))
    ) {
      this.#startCheckpoint();
    }
    if (s.walFsync === 'interval' && this.#dirty.size > 0 && now - this.#lastIntervalSync >= s.walFsyncIntervalMs) {
      this.#lastIntervalSync = now;
      const lanes = [...this.#dirty];
      this.#dirty.clear();
      await Promise.all(lanes.map((l) => this.#sync(l)));
    }
    if (now - this.#lastHousekeeping < HOUSEKEEPING_MS) return;
    this.#lastHousekeeping = now;
    const maxAge = s.walSegmentMaxAgeSecs * 1000;
    if (maxAge <= 0) return;
    for (const lane of this.#lanes.values()) {
      const age = lane.writer.liveSegmentAgeMs();
      if (age === null || age < maxAge) continue;
      try {
        await lane.writer.seal();
        this.#dirty.delete(lane);
        // Journaled: the seal took no sync; the next checkpoint syncs it and writes its marker.
        if (journal !== null) this.#markSinceCheckpoint(lane);
      } catch (e) {
        this.#log.error({ lane: lane.key.label, err: (e as Error).message }, 'sealing a WAL segment failed');
        this.#pinJournal(lane, e, 'sealing a segment');
      }
    }
  }
}

/** The refusal of a lane's requests after its write or sync failed. */
function writeFailure(e: unknown): LaneFailure {
  const errno = (e as { errno?: unknown }).errno;
  const cause = (e as { cause?: { code?: unknown } }).cause?.code ?? (e as { code?: unknown }).code;
  const why = typeof errno === 'string' ? errno : typeof cause === 'string' && !cause.startsWith('SIGLAKE_') ? cause : undefined;
  const code: ErrorCode = e instanceof WalWriteError ? e.code : walFailureCode(why);
  return { code: completionCode(code), message: `write failed: the WAL could not store the request${why ? ` (${why})` : ''}` };
}
