// One lane's writer: stages records, writes each flush's batch with pwritev,
// rotates segments by size, and makes them durable on sync() (group commit:
// the worker flushes every lane it touched in a drain round, then syncs them
// all at once).
//
// - Lazy: nothing touches the disk until a flush has records, so a lane whose
//   requests were all refused leaves no directory behind.
// - A new life starts a new segment: on its first open the writer takes the
//   `nextSegment` recovery found, or repairs the lane itself.
// - No copies: staged payloads are kept as the caller's views (they may lie
//   on a SharedArrayBuffer) and written straight from there. Record headers are
//   built in one slab that is reused every round, through header views made
//   once per slot.
// - A failed write is cut back to the last good offset and the whole staged
//   batch is dropped; the error (code SIGLAKE_WAL_WRITE) makes the caller
//   answer 500. The segment stays valid and later flushes append to it.
// - A batch that spans a rotation and fails in the new segment leaves its
//   earlier records in the old segment (already fdatasynced by the rotation,
//   or journaled): the client is told 500 and may retry, so the WAL is
//   at-least-once there.
// - `journaled` (`batch` mode, the shard's commit journal holds every record
//   until a checkpoint): creating, rotating and sealing a segment take no
//   sync. A segment is created under its final name; its header goes out with
//   its first records, and that run is journaled at offset 0, header included.
//   Rotated and sealed segments wait, dirty, for the next checkpoint
//   (takeCheckpoint, syncCheckpoint), which also fsyncs the lane directory
//   and, after the journal is retired, writes the `.sealed` marker.

import { writeSealedMarker } from './sealed-marker.js';
import { dirname, isAbsolute, join, relative, sep } from 'node:path';
import { DeferredRuns } from './deferred-runs.js';
import type { RunsWriter } from './native-runs.js';
import { FdCache, type FdHandle } from './fd-cache.js';
import { errnoCode, fsyncDirAsync, NODE_FILE_OPS, writevAll, type FileOps } from './file-ops.js';
import {
  MAX_RECORD_PAYLOAD,
  MAX_RECORD_COUNT,
  RECORD_HEADER_SIZE,
  SEGMENT_HEADER_SIZE,
  encodeRecordHeader,
  encodeSegmentHeader,
  formatSegmentName,
  isRecordType,
  type RecordType,
} from './format.js';
import { repairLane, type LaneRecovery } from './repair.js';
import { obstacleOnLanePath } from './layout.js';
import { WalArgumentError } from './wal-argument-error.js';
import { WalWriteError } from './wal-write-error.js';

export interface LaneWriterOptions {
  /** The lane directory (see laneDir). */
  readonly dir: string;
  /** The WAL root above `dir`: when set, a lane reached through a symbolic link below it is refused (WalWriteError 'symlink'). */
  readonly root?: string;
  /** Rotate before a segment would grow past this many bytes. */
  readonly segmentBytes: number;
  /** From recoverWal; when absent the writer repairs the lane itself on its first open. */
  readonly nextSegment?: number;
  /** The worker's descriptor cache, shared by its lanes; default: a private cache of one. */
  readonly fdCache?: FdCache;
  /** File-system calls, for a private cache (a shared cache brings its own). Default node:fs. */
  readonly fileOps?: FileOps;
  /** Unix time in ms (a coarse shared clock is fine). Default Date.now. */
  readonly now?: () => number;
  /** Record slots in the header slab at start; it doubles when a batch needs more. Default 64. */
  readonly slabRecords?: number;
  /**
   * Told of every run of records written: `iov[0, n)` (record headers and
   * non-empty payloads, valid until the next flush) went to `segment` at
   * `offset`, `bytes` long, `records` records. The shard's commit journal
   * copies them (src/wal/journal.ts).
   */
  readonly onWritten?: (segment: number, offset: number, iov: readonly Uint8Array[], n: number, bytes: number, records: number, deferredRun?: number) => void;
  /**
   * Journaled: reads back `length` bytes of commit-journal file `file` at
   * `offset` into `into` at `at` (ShardJournal.readBack). With it, a flush
   * may be deferred (flush(true)): its runs go to the journal only, and the
   * segment gets them when the checkpoint (or an earlier need) reads them
   * back (docs/wal-format.md "Deferred lane writes").
   */
  readonly readBack?: (file: number, offset: number, length: number, into: Uint8Array, at: number) => void;
  /**
   * With `readBack`: writes a segment's deferred runs from the journal and
   * fdatasyncs it off this thread (src/wal/native-runs.ts), which the
   * checkpoint then uses instead of reading the runs back here.
   */
  readonly writeRuns?: RunsWriter;
  /**
   * The shard's commit journal (`onWritten`) holds every record until a
   * checkpoint: create, rotate and seal segments without any sync, and leave
   * their durability, the lane directory's fsync and the sealed marker to
   * the checkpoint (takeCheckpoint, syncCheckpoint). The first run written to
   * a new segment starts at offset 0 with the segment header.
   */
  readonly journaled?: boolean;
  /**
   * Journaled: flushes that may be written before the earlier one is
   * confirmed durable (flushDurable) or refused (refuseLastFlush): 2 when the
   * shard writes round N+1 while round N's journal fdatasync runs. Default 1.
   */
  readonly unconfirmedFlushes?: 1 | 2;
}

/** Where a flush began (see LaneWriter's #marks). */
interface FlushMark {
  segment: number;
  start: number;
  pendingFrom: number;
  /** The first deferred run the flush made (an absolute index: see DeferredRuns). */
  runsFrom: number;
}

/** Bytes of deferred runs read back and written per pwritev. */
const READ_BACK_CHUNK = 1 << 20;
/** Where a checkpoint lists a segment's runs for writeRuns (four numbers a run; the writer copies them). */
let runSpec = new Uint32Array(64 * 4);
/** Where deferred runs are read back into before they are written (writes are synchronous: one buffer serves every lane of the thread). */
let scratch: Buffer | null = null;
function readBackBuffer(bytes: number): Buffer {
  if (scratch === null || scratch.length < bytes) scratch = Buffer.allocUnsafeSlow(Math.max(bytes, READ_BACK_CHUNK));
  return scratch;
}

/** What one checkpoint makes durable for a lane (journaled mode): see LaneWriter.takeCheckpoint. */
export interface LaneCheckpoint {
  /** Segments written since the last one was taken: the rotated and sealed ones, then the live one. */
  readonly handles: readonly FdHandle[];
  /** Deferred runs up to this absolute index are the checkpoint's to write (see LaneWriter.flush). */
  readonly runsUpTo: number;
  /** A segment was created since: fsync the lane directory. */
  readonly dir: boolean;
  /** The highest segment sealed since (0: none). */
  readonly sealed: number;
  /**
   * The highest segment finished since (0: none): rotated away from, sealed,
   * or left after a refused round's cut-back was synced; never appended to
   * again. Its `.sealed` marker, once the checkpoint made it durable and
   * deleted the journal up to it (the compactor's rule under a journal).
   */
  readonly finished: number;
}

export class LaneWriter {
  readonly #dir: string;
  readonly #root: string | undefined;
  readonly #segmentBytes: number;
  readonly #cache: FdCache;
  readonly #ops: FileOps;
  readonly #now: () => number;
  readonly #onWritten: LaneWriterOptions['onWritten'];
  readonly #segHeader = Buffer.alloc(SEGMENT_HEADER_SIZE);
  readonly #segHeaderIov: Uint8Array[] = [this.#segHeader];
  readonly #journaled: boolean;
  /** Journaled: rotated or sealed segments the next checkpoint syncs. */
  #pending: FdHandle[] = [];
  /** Journaled: a segment was created since the last checkpoint was taken (its directory entry is not durable). */
  #dirPending = false;
  /** Journaled: the highest segment sealed since the last checkpoint was taken (0: none). */
  #sealedPending = 0;
  /** Journaled: the highest segment finished (rotated, sealed, refused and synced) since then (0: none). */
  #finishedPending = 0;
  /** Journaled: the live segment's header, not written yet (it goes out with the first run). */
  #headerPending: Buffer | null = null;
  /**
   * Journaled: where each flush not yet confirmed durable (flushDurable) or
   * refused (refuseLastFlush) began, oldest first: its segment (0: none was
   * live), that segment's size then, and #pending's length then (segments it
   * rotated are after it). At most #unconfirmed entries: with 1 (the default)
   * each flush replaces the last one's.
   */
  #marks: FlushMark[] = [];
  readonly #unconfirmed: number;
  readonly #readBack: LaneWriterOptions['readBack'];
  readonly #writeRunsOff: RunsWriter | undefined;
  /** Journaled: the runs deferred flushes left out of the segments, in order. */
  readonly #runs = new DeferredRuns();
  /** The flush being written is deferred. */
  #deferring = false;
  /** Journaled: segments created (unsynced, #openJournaled) in this life, and how many of them the last directory fsync of a direct round covered. */
  #created = 0;
  #dirSyncedUpTo = 0;

  /** 0 until the first open of this life has chosen the number. */
  #next: number;
  #recovery: LaneRecovery | null = null;
  #dirReady = false;
  #closed = false;

  #handle: FdHandle | null = null;
  #segment = 0;
  #path = '';
  #size = 0;
  #createdMs = 0;
  /** A failed write whose cut-back failed too: cut to this size before anything else. -1 when none. */
  #truncateTo = -1;
  /** A failure to hand to the next sync(). */
  #deferred: Error | null = null;
  /** A segment seal() is making durable: the next segment may not exist before it is. */
  #sealing: FdHandle | null = null;

  // Staging: header slab, one 24-byte view per slot, payload views.
  #slab: Buffer;
  #heads: Buffer[] = [];
  #payloads: Uint8Array[] = [];
  #staged = 0;
  #stagedBytes = 0;
  readonly #iov: Uint8Array[] = [];

  constructor(opts: LaneWriterOptions) {
    if (!Number.isSafeInteger(opts.segmentBytes) || opts.segmentBytes <= SEGMENT_HEADER_SIZE) {
      throw new WalArgumentError(`segmentBytes ${opts.segmentBytes} must be an integer above ${SEGMENT_HEADER_SIZE}`);
    }
    const next = opts.nextSegment ?? 0;
    // Up to 2^53: the successor of the highest name a disk can hold (a name of 2^53 − 1 put there),
    // refused at the segment's creation (#openNext), never here, where it killed the writer worker.
    if (!Number.isInteger(next) || next < 0 || next > Number.MAX_SAFE_INTEGER + 1) throw new WalArgumentError(`nextSegment ${next} out of range`);
    if (opts.fdCache !== undefined && opts.fileOps !== undefined && opts.fdCache.ops !== opts.fileOps) {
      throw new WalArgumentError('fileOps differ from the fdCache ones');
    }
    this.#dir = opts.dir;
    this.#root = opts.root;
    this.#segmentBytes = opts.segmentBytes;
    this.#ops = opts.fdCache?.ops ?? opts.fileOps ?? NODE_FILE_OPS;
    this.#cache = opts.fdCache ?? new FdCache(1, this.#ops);
    this.#now = opts.now ?? Date.now;
    this.#onWritten = opts.onWritten;
    this.#journaled = opts.journaled === true;
    this.#unconfirmed = opts.unconfirmedFlushes ?? 1;
    this.#readBack = this.#journaled ? opts.readBack : undefined;
    this.#writeRunsOff = this.#readBack !== undefined ? opts.writeRuns : undefined;
    if (this.#unconfirmed !== 1 && this.#unconfirmed !== 2) throw new WalArgumentError(`unconfirmedFlushes ${this.#unconfirmed} must be 1 or 2`);
    this.#next = next;
    this.#slab = Buffer.alloc(0);
    this.#growSlab(Math.max(1, opts.slabRecords ?? 64));
  }

  get dir(): string {
    return this.#dir;
  }

  /** The live segment's number; 0 when there is none (before the first flush, after seal). */
  get segment(): number {
    return this.#segment;
  }

  /** The live segment's size in bytes (header included); 0 when there is none. */
  get segmentSize(): number {
    return this.#size;
  }

  get stagedRecords(): number {
    return this.#staged;
  }

  /** Bytes the staged records will take on disk, headers included. */
  get stagedBytes(): number {
    return this.#stagedBytes;
  }

  /** What the writer's own repair found on its first open; null when it was handed `nextSegment` or has not opened yet. */
  get recovery(): LaneRecovery | null {
    return this.#recovery;
  }

  /** Age of the live segment in ms, or null when there is none. */
  liveSegmentAgeMs(): number | null {
    return this.#handle === null ? null : this.#now() - this.#createdMs;
  }

  /**
   * Queues one record for the next flush. `payload` is kept, not copied: it
   * must stay unchanged until flush() returns.
   */
  stage(type: RecordType, count: number, timeMs: number, payload: Uint8Array): void {
    if (this.#closed) throw new WalWriteError('closed', this.#dir);
    if (!isRecordType(type)) throw new WalArgumentError(`unknown record type ${type}`);
    if (!Number.isInteger(count) || count < 0 || count > MAX_RECORD_COUNT) throw new WalArgumentError(`record count ${count} out of range`);
    if (!Number.isSafeInteger(timeMs) || timeMs < 0) throw new WalArgumentError(`record time ${timeMs} out of range`);
    if (payload.length > MAX_RECORD_PAYLOAD) throw new WalArgumentError(`payload of ${payload.length} bytes is too large`);
    const i = this.#staged;
    if (i === this.#heads.length) this.#growSlab(i * 2);
    encodeRecordHeader(this.#slab, i * RECORD_HEADER_SIZE, type, count, timeMs, payload);
    this.#payloads[i] = payload;
    this.#staged = i + 1;
    this.#stagedBytes += RECORD_HEADER_SIZE + payload.length;
  }

  /**
   * Writes the staged records and returns the bytes written. On failure the
   * batch is dropped, the segment is cut back to its last good size and a
   * WalWriteError is thrown. Not durable until sync() (or a rotation) says so.
   * `defer` (journaled, with `readBack`): the records go to the journal only
   * (onWritten hears each run with its index, whose journal place the shard
   * gives placeRun once the round is written); the segment gets them at the
   * checkpoint, or before anything that needs them there. Without `defer`,
   * runs deferred earlier are written first.
   */
  flush(defer = false): number {
    // Every flush of staged records leaves exactly one mark, whatever it then
    // throws: flushDurable() and refuseLastFlush() take the oldest, one per round.
    if (this.#journaled && this.#staged > 0) this.#mark();
    if (this.#closed) throw new WalWriteError('closed', this.#dir);
    if (this.#staged === 0) return 0;
    try {
      this.#deferring = defer && this.#readBack !== undefined;
      if (!this.#deferring) this.writeDeferred();
      return this.#writeBatch();
    } finally {
      this.#deferring = false;
      this.#clearStaged();
    }
  }

  /**
   * Whether the next flush is better deferred: runs deferred earlier still
   * wait (the segment's end is not written yet), or the live segment's
   * descriptor was evicted (writing would open the file again). A lane
   * without a live segment creates one with a descriptor, and writes.
   */
  get prefersDeferral(): boolean {
    if (this.#readBack === undefined) return false;
    return this.#runs.waiting || (this.#handle !== null && this.#handle.fd < 0);
  }

  /** Bytes deferred flushes left out of the segments that are not written yet. */
  get deferredBytes(): number {
    return this.#runs.waitingBytes;
  }

  /** Whether runs deferred by flushes wait to be written to the segments. */
  get hasDeferred(): boolean {
    return this.#runs.waiting;
  }

  /** The commit journal holds deferred run `run` (as onWritten numbered it) in file `file` at `offset`. */
  placeRun(run: number, file: number, offset: number): void {
    this.#runs.place(run, file, offset);
  }

  /**
   * Writes every deferred run whose journal place is known (read back from
   * the journal) to its segment, on this thread, without a sync. Throws a
   * WalWriteError at the first failure; the runs from there on stay deferred.
   */
  writeDeferred(): void {
    const runs = this.#runs;
    while (runs.waiting && runs.file(runs.next) !== 0) {
      const h = runs.handle(runs.next);
      this.#writeRuns(h, runs.end, (iov, at) => this.#cache.writeNow(h, iov, at), false);
    }
  }

  /**
   * Writes the runs from the first one waiting on that belong to `h` (and to
   * no later segment), up to absolute index `upTo`, in chunks of
   * READ_BACK_CHUNK bytes read back from the journal, each with `write`. A
   * run with no journal place stops it: quietly, or (`strict`, a
   * checkpoint's, which must write every run it covers) with a WalWriteError.
   */
  #writeRuns(h: FdHandle, upTo: number, write: (iov: Uint8Array[], at: number) => void, strict: boolean): void {
    const runs = this.#runs;
    const read = this.#readBack!;
    while (runs.next < upTo && runs.handle(runs.next) === h) {
      const first = runs.next;
      if (runs.file(first) === 0) {
        if (!strict) return;
        throw new WalWriteError('write', h.path, Object.assign(new Error('a deferred run has no journal place'), { code: 'EIO' }));
      }
      // Runs that follow each other in the segment, up to a chunk.
      const start = runs.at(first);
      let k = first;
      let bytes = 0;
      while (k < upTo) {
        const len = runs.length(k);
        if (runs.handle(k) !== h || runs.file(k) === 0 || runs.at(k) !== start + bytes || (bytes > 0 && bytes + len > READ_BACK_CHUNK)) break;
        bytes += len;
        k++;
      }
      const buf = readBackBuffer(bytes);
      let pos = 0;
      try {
        for (let i = first; i < k; i++) {
          const len = runs.length(i);
          read(runs.file(i), runs.offset(i), len, buf, pos);
          pos += len;
        }
        write([buf.subarray(0, bytes)], start);
      } catch (err) {
        throw err instanceof WalWriteError ? err : new WalWriteError('write', h.path, err);
      }
      runs.written(k);
    }
  }

  /**
   * The checkpoint's write and sync of `h`'s deferred runs before `upTo`
   * with `writeRuns` (off this thread). A run with no journal place throws
   * as #writeRuns does; a failed read or write is a WalWriteError('write'),
   * and leaves the runs waiting; a failed open or fdatasync is thrown as it
   * came (the caller's to judge, as a sync's). Code that runs meanwhile may
   * write the same runs again (writeDeferred: the same bytes at the same
   * places) or drop some (a refused flush): DeferredRuns.writeEnded counts
   * only what this write had.
   */
  async #syncRunsOff(h: FdHandle, upTo: number, writeRuns: RunsWriter): Promise<void> {
    const runs = this.#runs;
    let k = runs.next;
    for (; k < upTo && runs.handle(k) === h; k++) {
      if (runs.file(k) === 0) throw new WalWriteError('write', h.path, Object.assign(new Error('a deferred run has no journal place'), { code: 'EIO' }));
      const o = (k - runs.next) * 4;
      if (o + 4 > runSpec.length) {
        const grown = new Uint32Array(runSpec.length * 2);
        grown.set(runSpec);
        runSpec = grown;
      }
      runSpec[o] = runs.file(k);
      runSpec[o + 1] = runs.offset(k);
      runSpec[o + 2] = runs.length(k);
      runSpec[o + 3] = runs.at(k);
    }
    const count = k - runs.next;
    runs.writeBegun();
    try {
      await this.#cache.syncBy(h, () => writeRuns(h.path, runSpec, count));
    } catch (err) {
      const step = (err as { syscall?: unknown }).syscall;
      if (step === 'read' || step === 'write') throw new WalWriteError('write', h.path, err);
      throw err;
    }
    runs.writeEnded(k);
  }

  /** fdatasync of the live segment if it was written since its last sync; rotations sync old segments themselves. */
  async sync(): Promise<void> {
    const h = this.#handleToSync();
    if (h === null) return;
    try {
      await this.#cache.sync(h);
    } catch (err) {
      throw this.#syncFailed(h, err);
    }
  }

  /** sync() without leaving the thread: a blocking fdatasync (see FdCache.syncNow). */
  syncNow(): void {
    const h = this.#handleToSync();
    if (h === null) return;
    try {
      this.#cache.syncNow(h);
    } catch (err) {
      throw this.#syncFailed(h, err);
    }
  }

  /** The live handle to sync, after reporting a failure deferred from an eviction. */
  #handleToSync(): FdHandle | null {
    const deferred = this.#deferred;
    if (deferred !== null) {
      this.#deferred = null;
      throw deferred;
    }
    return this.#handle;
  }

  /**
   * What was written since the last good sync may not be on disk: stop
   * appending to this segment (the next flush starts a new one) and say why.
   */
  #syncFailed(h: FdHandle, err: unknown): WalWriteError {
    if (this.#handle === h) this.#abandon();
    return new WalWriteError('fdatasync', h.path, err);
  }


  /**
   * Closes the live segment, durable, so that the next flush starts a new one
   * (age-based sealing, shutdown). Staged records stay staged.
   */
  async seal(): Promise<void> {
    const h = this.#handle;
    if (h === null) return;
    this.#settleTail();
    const sealed = this.#segment;
    this.#handle = null;
    this.#segment = 0;
    this.#size = 0;
    if (this.#journaled) {
      // No sync: the next checkpoint makes it durable, then writes the marker.
      this.#retireLazily(h);
      if (sealed > this.#sealedPending) this.#sealedPending = sealed;
      this.#finished(sealed);
      return;
    }
    this.#sealing = h;
    try {
      await this.#cache.retireAsync(h);
    } catch (err) {
      throw new WalWriteError('fdatasync', h.path, err);
    } finally {
      if (this.#sealing === h) this.#sealing = null;
    }
    try {
      writeSealedMarker(this.#dir, sealed);
    } catch {
      // Only a hint for the compactor: without it, it waits for the next segment.
    }
  }

  /** Where the next flush begins: a cut-back still owed (#truncateTo) counts as done. */
  #mark(): void {
    if (this.#marks.length === this.#unconfirmed) this.#marks.shift();
    this.#marks.push(this.#here());
  }

  #here(): FlushMark {
    return { segment: this.#segment, start: this.#truncateTo >= 0 ? this.#truncateTo : this.#size, pendingFrom: this.#pending.length, runsFrom: this.#runs.end };
  }

  /** The oldest flush not yet confirmed is durable (its round's journal fdatasync returned): it can no longer be refused. */
  flushDurable(): void {
    this.#marks.shift();
  }

  /**
   * The last flush's records were refused after it returned (the commit
   * journal could not make them durable): cut the live segment back to where
   * that flush began, make what is left durable (earlier rounds' acknowledged
   * records, which the journal may no longer be trusted to hold), and start
   * the next flush in a new segment, so that no offset a refused record had is
   * ever given to another record (a refused record's journal entry may still
   * surface at replay). Records of the flush that a rotation already made
   * durable stay: at-least-once, as for a failed write. Every step is tried
   * even when an earlier one failed (the live segment is always cut back and
   * given up, so that no later round appends behind the refused bytes); then
   * the first failure is thrown.
   */
  refuseLastFlush(): void {
    let first: WalWriteError | null = null;
    // With two flushes unconfirmed, both are refused: from where the older began.
    // Without a mark (no flush since the last confirmed one) nothing is cut.
    const mark = this.#marks[0] ?? this.#here();
    this.#marks.length = 0;
    if (this.#readBack !== undefined) {
      // Deferred runs: the refused ones never reach their segments (those
      // that started a segment leave its header), the earlier, acknowledged
      // ones are written now, to be made durable below with the rest.
      for (const { handle, header } of this.#runs.dropFrom(mark.runsFrom)) {
        try {
          this.#cache.writeNow(handle, [header], 0);
        } catch (err) {
          first ??= new WalWriteError('write', handle.path, err);
        }
      }
      try {
        this.writeDeferred();
      } catch (err) {
        first ??= err as WalWriteError;
      }
    }
    if (this.#journaled) {
      // Segments this flush rotated away from hold some of its records after
      // acknowledged ones, and are no longer the lane's last: make them
      // durable now, as a rotation did before, so that none can end torn.
      for (let k = mark.pendingFrom; k < this.#pending.length; k++) {
        const p = this.#pending[k]!;
        try {
          this.#cache.syncNow(p);
        } catch (err) {
          if (p.retired && errnoCode(err) === 'ENOENT') continue; // landed and retired by the compactor
          first ??= new WalWriteError('fdatasync', p.path, err);
        }
      }
    }
    const h = this.#handle;
    if (h !== null) {
      const start = this.#segment === mark.segment ? mark.start : SEGMENT_HEADER_SIZE;
      const path = this.#path;
      const segment = this.#segment;
      try {
        this.#ops.ftruncate(this.#cache.fd(h), start);
        this.#size = start;
        // The cut is a change to sync, even when a sync in flight (an early
        // writeback) had made the handle clean.
        this.#cache.markDirty(h);
        this.#cache.syncNow(h);
        if (this.#journaled && first === null) this.#finished(segment);
      } catch (err) {
        first ??= new WalWriteError('fdatasync', path, err);
      }
      this.#abandon();
    }
    if (first !== null) throw first;
  }

  /**
   * Journaled: makes the last flush durable by itself, without the commit
   * journal (a direct round: docs/wal-format.md "Direct rounds"). fdatasyncs
   * the segments the flush rotated away from, then the live one, then the
   * lane directory when a segment was created since its last fsync here
   * (by this flush, or unsynced by a journaled round this one appended to or
   * rotated away from: its name is not durable yet, nor these bytes with it).
   * The earlier journaled bytes of those segments become durable with them;
   * earlier segments still rely on the journal until a checkpoint. Then
   * confirm the flush (flushDurable); on a WalWriteError refuse it
   * (refuseLastFlush cuts the live segment back and gives it up).
   * `onDurable` hears each segment made durable, with the size synced when
   * known (a rotated segment no longer grows).
   */
  syncFlushNow(onDurable?: (path: string, size: number | undefined) => void): void {
    const job = this.#directJob();
    if (job === null) return;
    for (const p of job.rotated) {
      try {
        this.#cache.syncNow(p);
      } catch (err) {
        if (p.retired && errnoCode(err) === 'ENOENT') continue; // landed and retired by the compactor
        throw new WalWriteError('fdatasync', p.path, err);
      }
      onDurable?.(p.path, undefined);
    }
    if (job.live !== null) {
      try {
        this.#cache.syncNow(job.live);
      } catch (err) {
        throw new WalWriteError('fdatasync', job.live.path, err);
      }
      onDurable?.(job.live.path, job.size);
    }
    if (job.dir) {
      try {
        this.#ops.fsyncDir(this.#dir);
      } catch (err) {
        throw new WalWriteError('fdatasync', this.#dir, err);
      }
      this.#dirSynced(job.created);
    }
  }

  /**
   * syncFlushNow on libuv's pool, in parallel. What it syncs is taken when it
   * is called, so the next flush may be written meanwhile: that one needs its
   * own sync (and is refused with this one if this one fails).
   */
  async syncFlush(onDurable?: (path: string, size: number | undefined) => void): Promise<void> {
    const job = this.#directJob();
    if (job === null) return;
    const one = async (h: FdHandle, size: number | undefined): Promise<void> => {
      try {
        await this.#cache.sync(h);
      } catch (err) {
        if (h.retired && errnoCode(err) === 'ENOENT') return;
        throw new WalWriteError('fdatasync', h.path, err);
      }
      onDurable?.(h.path, size);
    };
    const all = job.rotated.map((p) => one(p, undefined));
    if (job.live !== null) all.push(one(job.live, job.size));
    // Every sync is waited for before the first failure is thrown (none is left running unseen).
    const settled = await Promise.allSettled(all);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    if (job.dir) {
      try {
        await fsyncDirAsync(this.#ops, this.#dir);
      } catch (err) {
        throw new WalWriteError('fdatasync', this.#dir, err);
      }
      this.#dirSynced(job.created);
    }
  }

  /** What a direct round's sync covers, taken now (null: nothing was flushed since the last confirmed flush). */
  #directJob(): { rotated: FdHandle[]; live: FdHandle | null; size: number; dir: boolean; created: number } | null {
    const mark = this.#marks[this.#marks.length - 1];
    if (mark === undefined) return null;
    const deferred = this.#deferred;
    if (deferred !== null) {
      this.#deferred = null;
      throw deferred;
    }
    const created = this.#created;
    return { rotated: this.#pending.slice(mark.pendingFrom), live: this.#handle, size: this.#size, dir: this.#dirSyncedUpTo < created, created };
  }

  #dirSynced(created: number): void {
    if (created > this.#dirSyncedUpTo) this.#dirSyncedUpTo = created;
  }

  /** Seals the live segment and refuses further use. Staged records are dropped. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#clearStaged();
    await this.seal();
  }

  // ---------------------------------------------------------------- checkpoint (journaled)

  /** Journaled: whether a checkpoint taken now would have anything to do for this lane. */
  get checkpointPending(): boolean {
    return this.#handle !== null || this.#runs.waiting || this.#pending.length > 0 || this.#dirPending || this.#sealedPending > 0 || this.#finishedPending > 0;
  }

  /**
   * Journaled: takes what a checkpoint begun now must make durable: every
   * segment written since the last one was taken (rotated, sealed, and the
   * live one), whether the lane directory gained a segment, and the highest
   * segment sealed. Call it between rounds, when the journal rotates.
   */
  takeCheckpoint(): LaneCheckpoint {
    const handles = this.#pending;
    this.#pending = [];
    for (const m of this.#marks) m.pendingFrom = 0;
    if (this.#handle !== null) handles.push(this.#handle);
    const cp: LaneCheckpoint = { handles, runsUpTo: this.#runs.end, dir: this.#dirPending, sealed: this.#sealedPending, finished: this.#finishedPending };
    this.#dirPending = false;
    this.#sealedPending = 0;
    this.#finishedPending = 0;
    return cp;
  }

  /**
   * Journaled: fdatasyncs the checkpoint's segments (on the thread pool; a
   * closed one is opened again for it) and fsyncs the lane directory when a
   * segment was created. A segment gone meanwhile was landed and retired by
   * the compactor (or its tenant deleted): nothing to sync. Throws a
   * WalWriteError at the first failure; the live segment is given up then.
   */
  async syncCheckpoint(cp: LaneCheckpoint): Promise<void> {
    const deferred = this.#deferred;
    if (deferred !== null) {
      this.#deferred = null;
      throw deferred;
    }
    for (const h of cp.handles) {
      const runs = this.#runs;
      const deferred = runs.next < cp.runsUpTo && runs.handle(runs.next) === h;
      try {
        if (deferred && this.#writeRunsOff !== undefined) {
          // Deferred runs of this segment, written and synced on the pool.
          await this.#syncRunsOff(h, cp.runsUpTo, this.#writeRunsOff);
        } else {
          // Deferred runs of this segment (read back from the journal) go in first, through the descriptor the sync uses.
          const write = deferred ? (fd: number) => this.#writeRuns(h, cp.runsUpTo, (iov, at) => writevAll(this.#ops, fd, iov, at), true) : undefined;
          await this.#cache.sync(h, write);
        }
      } catch (err) {
        if (err instanceof WalWriteError) throw err;
        if (h.retired && errnoCode(err) === 'ENOENT') continue;
        if (this.#handle === h) this.#abandon();
        throw new WalWriteError('fdatasync', h.path, err);
      }
      // Runs deferred into this segment after the checkpoint was taken are
      // not written by it, but its sync left the handle clean: keep it dirty
      // and the next checkpoint's (the live one is taken anyway), so that
      // whoever writes those runs, a later checkpoint syncs them.
      if (this.#runs.holds(h)) {
        this.#cache.markDirty(h);
        if (h !== this.#handle && !this.#pending.includes(h)) this.#pending.push(h);
      }
    }
    // Every run the checkpoint covers is in a segment now, or the journal must stay.
    if (this.#runs.next < cp.runsUpTo) {
      const left = this.#runs.handle(this.#runs.next);
      throw new WalWriteError('write', left.path, Object.assign(new Error('deferred records of a segment the checkpoint did not sync'), { code: 'EIO' }));
    }
    if (!cp.dir) return;
    try {
      await fsyncDirAsync(this.#ops, this.#dir);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw new WalWriteError('fdatasync', this.#dir, err);
    }
  }

  /** Journaled: segment `n` will never be appended to again (the checkpoint's marker). */
  #finished(n: number): void {
    if (n > this.#finishedPending) this.#finishedPending = n;
  }

  /** Journaled: a segment the lane no longer writes, left dirty for the next checkpoint. */
  #retireLazily(h: FdHandle): void {
    try {
      this.#cache.retire(h, false);
    } catch {
      // Not thrown without `durable`; a close error stays on the handle for the checkpoint's sync.
    }
    // Also one whose fdatasync is in flight (an early writeback): the
    // checkpoint must wait for it, and learn of its failure. And one whose
    // deferred runs are not written yet, even if a sync since left it clean:
    // a later checkpoint writes and syncs them.
    if (this.#owedToCheckpoint(h)) this.#pending.push(h);
  }

  /** Journaled: a segment the next checkpoint must still sync (or wait for, or learn the failure of). */
  #owedToCheckpoint(h: FdHandle): boolean {
    return h.dirty || h.error !== null || h.inflight !== null || this.#runs.holds(h);
  }

  // ---------------------------------------------------------------- writing

  #writeBatch(): number {
    this.#settleTail();
    if (this.#handle !== null) {
      const evictionError = this.#cache.takeError(this.#handle);
      if (evictionError !== null) {
        this.#abandon();
        this.#deferred = new WalWriteError('fdatasync', this.#path, evictionError);
      }
    }

    const n = this.#staged;
    const payloads = this.#payloads;
    const limit = this.#segmentBytes;
    let written = 0;
    let i = 0;
    while (i < n) {
      if (this.#handle === null) this.#openSegment();
      let j = i;
      let bytes = 0;
      while (j < n) {
        const len = RECORD_HEADER_SIZE + payloads[j].length;
        const end = this.#size + bytes;
        if (end + len > limit && end > SEGMENT_HEADER_SIZE) break; // full; a lone oversized record still goes in
        bytes += len;
        j++;
      }
      if (j > i) {
        this.#writeGroup(i, j);
        written += bytes;
        i = j;
      }
      if (i < n) this.#rotate();
    }
    return written;
  }

  /** Writes staged records [from, to) at the end of the live segment, with pwritev calls of at most IOV_MAX buffers. */
  #writeGroup(from: number, to: number): void {
    const h = this.#handle as FdHandle;
    const iov = this.#iov;
    iov.length = 0;
    // Journaled: a new segment's header goes out with its first run.
    const header = this.#headerPending;
    if (header !== null) iov.push(header);
    for (let k = from; k < to; k++) {
      iov.push(this.#heads[k]);
      if (this.#payloads[k].length > 0) iov.push(this.#payloads[k]);
    }
    const start = this.#size;
    const at = header !== null ? 0 : start;
    if (this.#deferring) {
      // Deferred: the journal takes the run; the segment gets it later (no descriptor needed now).
      let done = 0;
      for (const b of iov) done += b.length;
      const run = this.#runs.push(h, at, done, header);
      this.#cache.markDirty(h);
      this.#headerPending = null;
      this.#size = at + done;
      this.#onWritten?.(this.#segment, at, iov, iov.length, done, to - from, run);
      iov.length = 0;
      return;
    }
    let fd: number;
    try {
      fd = this.#cache.fd(h);
    } catch (err) {
      throw new WalWriteError('open', this.#path, err);
    }
    try {
      const done = writevAll(this.#ops, fd, iov, at);
      this.#cache.markDirty(h);
      this.#headerPending = null;
      this.#size = at + done;
      this.#onWritten?.(this.#segment, at, iov, iov.length, done, to - from);
    } catch (err) {
      this.#cache.markDirty(h);
      this.#cutBack(fd, at);
      const failedPath = this.#path;
      if (start === SEGMENT_HEADER_SIZE && (header !== null || this.#truncateTo < 0)) {
        // The segment holds no record (a new lane's first write, say, on a
        // full disk): remove it rather than leave a header-only file behind.
        this.#abandon();
        this.#quietly(() => this.#ops.unlink(failedPath));
      }
      if (this.#journaled && this.#truncateTo < 0) this.#syncCut();
      throw new WalWriteError('write', failedPath, err);
    } finally {
      iov.length = 0;
    }
  }

  /**
   * Journaled: a cut-back must be durable before the segment is rotated away
   * unsynced, or a crash could bring the cut bytes back into a segment that
   * is no longer the lane's last (where the tail repair does not look).
   * Rare (a failed write): synced on the spot. A failure gives the segment
   * up and is thrown as an fdatasync failure (the shard pins the journal).
   */
  #syncCut(): void {
    const h = this.#handle;
    if (h === null) return;
    try {
      this.#cache.syncNow(h);
    } catch (err) {
      this.#abandon();
      throw new WalWriteError('fdatasync', h.path, err);
    }
  }

  /** After a failed write: truncate to `size`, or remember to before anything else. */
  #cutBack(fd: number, size: number): void {
    try {
      this.#ops.ftruncate(fd, size);
      this.#size = size;
    } catch {
      this.#truncateTo = size;
    }
  }

  /** Retries a cut-back that failed earlier; throws while it still fails. */
  #settleTail(): void {
    if (this.#truncateTo < 0 || this.#handle === null) return;
    try {
      this.#ops.ftruncate(this.#cache.fd(this.#handle), this.#truncateTo);
    } catch (err) {
      throw new WalWriteError('truncate', this.#path, err);
    }
    this.#size = this.#truncateTo;
    this.#truncateTo = -1;
    if (this.#journaled) this.#syncCut();
  }

  #rotate(): void {
    const h = this.#handle as FdHandle;
    const n = this.#segment;
    this.#handle = null;
    this.#segment = 0;
    this.#size = 0;
    if (this.#journaled) {
      this.#retireLazily(h);
      this.#finished(n);
      return;
    }
    try {
      this.#cache.retire(h, true);
    } catch (err) {
      throw new WalWriteError('fdatasync', h.path, err);
    }
  }

  /** Drops the live segment without a sync (its durability is already in doubt). */
  #abandon(): void {
    const h = this.#handle as FdHandle;
    this.#handle = null;
    this.#segment = 0;
    this.#size = 0;
    this.#truncateTo = -1;
    this.#headerPending = null;
    try {
      this.#cache.retire(h, false);
    } catch {
      // Closing a descriptor we are giving up on: nothing more to learn from it.
    }
    // Journaled: a segment given up with a sync in flight (an early writeback)
    // or unsynced bytes stays the checkpoint's to wait for, so that its
    // failure is learnt before the journal that holds its records is retired.
    if (this.#journaled && this.#owedToCheckpoint(h) && !this.#pending.includes(h)) this.#pending.push(h);
  }

  // ---------------------------------------------------------------- segments

  /** Creates the next segment atomically: header to `.tmp`, fdatasync, rename, fsync the directory. */
  #openSegment(): void {
    const sealing = this.#sealing;
    if (sealing !== null && sealing.fd >= 0) {
      // A flush while seal() awaits its fdatasync: make the sealed segment
      // durable now, so that no segment is ever followed by one that could
      // outlive it in a crash.
      try {
        this.#ops.fdatasyncSync(sealing.fd);
      } catch (err) {
        throw new WalWriteError('fdatasync', sealing.path, err);
      }
    }
    this.#beforeDir();
    if (!this.#dirReady) {
      try {
        this.#mkdirs(this.#dir);
      } catch (err) {
        throw new WalWriteError('mkdir', this.#dir, err);
      }
      this.#dirReady = true;
    }
    const n = this.#next;
    if (n > Number.MAX_SAFE_INTEGER) {
      // A segment named 9007199254740991.seg (damage, or put there by hand) leaves no number to take.
      // Refused like a write (500 SIGLAKE_WAL_WRITE), for this lane only: the WalArgumentError of the
      // header encoder killed the writer worker, refusing every tenant's requests in flight on it.
      throw new WalWriteError('create', this.#dir, new Error(`no segment number left after ${Number.MAX_SAFE_INTEGER} (the highest the WAL format allows)`));
    }
    this.#next = n + 1; // burnt even if creation fails: numbers are never reused
    const path = join(this.#dir, formatSegmentName(n));
    if (this.#journaled) {
      this.#openJournaled(n, path);
      return;
    }
    const tmp = `${path}.tmp`;
    const created = this.#now();
    encodeSegmentHeader(this.#segHeader, 0, n, created);
    let fd = -1;
    try {
      fd = this.#ops.open(tmp, 'wx');
      writevAll(this.#ops, fd, this.#segHeaderIov, 0);
      this.#ops.fdatasyncSync(fd);
      this.#ops.rename(tmp, path);
    } catch (err) {
      if (fd >= 0) this.#quietly(() => this.#ops.close(fd));
      this.#quietly(() => this.#ops.unlink(tmp));
      throw new WalWriteError('create', tmp, err);
    }
    try {
      this.#ops.fsyncDir(this.#dir);
    } catch (err) {
      this.#quietly(() => this.#ops.close(fd));
      throw new WalWriteError('create', path, err);
    }
    this.#handle = this.#cache.adopt(path, fd);
    this.#segment = n;
    this.#path = path;
    this.#size = SEGMENT_HEADER_SIZE;
    this.#createdMs = created;
  }

  /**
   * Journaled: the segment is created under its final name, with no sync and
   * no rename; its header goes out with its first records, which the journal
   * holds (offset 0) until a checkpoint made the file and its directory
   * entry durable. A crash before that loses an unsynced file, and replay
   * recreates it from the journal.
   */
  #openJournaled(n: number, path: string): void {
    const created = this.#now();
    const header = Buffer.allocUnsafe(SEGMENT_HEADER_SIZE); // one per segment: the journal keeps a view until its write
    encodeSegmentHeader(header, 0, n, created);
    let fd: number;
    try {
      fd = this.#ops.open(path, 'wx');
    } catch (err) {
      throw new WalWriteError('create', path, err);
    }
    this.#handle = this.#cache.adopt(path, fd);
    this.#segment = n;
    this.#path = path;
    this.#size = SEGMENT_HEADER_SIZE;
    this.#createdMs = created;
    this.#headerPending = header;
    this.#dirPending = true;
    this.#created++;
  }

  /** What comes before the lane directory is made or used: its path checked, the lane repaired (its first open in this life). */
  #beforeDir(): void {
    if (!this.#dirReady && this.#root !== undefined) {
      // Before repair or mkdir touch anything through it: a symbolic link (layout.ts linksInWal), or a
      // regular file named as the tenant (or the lane), through which every step below fails with ENOTDIR.
      const obstacle = obstacleOnLanePath(this.#root, this.#dir);
      if (obstacle?.link === true) throw new WalWriteError('symlink', obstacle.path);
      if (obstacle !== null) throw new WalWriteError('notdir', obstacle.path, Object.assign(new Error(obstacle.kind), { code: 'ENOTDIR' }));
    }
    if (this.#next === 0) {
      this.#recovery = repairLane(this.#dir, { ops: this.#ops });
      this.#next = this.#recovery.nextSegment;
    }
  }

  /**
   * A lane whose directory this life has not made ready yet (its first
   * segment not opened): makes the directory, and the tenant's, without a
   * sync, and returns the directories to fsync before dirDurable() (the
   * parent of every directory made or found). The shard syncs those of a
   * round's new lanes together, each once, in parallel on the pool, instead
   * of two fsyncs a new lane one after the other on its thread
   * (docs/wal-format.md "New lanes"). null: nothing to do, or a step failed
   * (the flush's own path meets the failure again and reports it).
   */
  prepareDir(): string[] | null {
    if (this.#dirReady || this.#closed) return null;
    try {
      const fresh = this.#makeFreshDirs();
      if (fresh !== null) return fresh;
      this.#beforeDir();
      const parents: string[] = [];
      this.#mkdirsUnsynced(this.#dir, parents);
      return parents;
    } catch {
      return null;
    }
  }

  /**
   * A lane of a tenant this WAL has no directory for (a new tenant): the
   * tenant's directory made here (mkdir succeeds, so nothing stood under its
   * name: no link, no file), then the lane's below it. Both are new and
   * empty, so the path check and the lane's repair, which would each look
   * up names that do not exist, have nothing to find: the lane starts at
   * segment 1. Two mkdirs instead of six calls a new tenant, on the writer's
   * thread. null: the tenant's directory could not be made here (it exists:
   * the usual path checks and repairs what is there).
   */
  #makeFreshDirs(): string[] | null {
    if (this.#next !== 0 || this.#root === undefined) return null;
    const rel = relative(this.#root, this.#dir);
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return null;
    const parts = rel.split(sep);
    let at = join(this.#root, parts[0]!);
    try {
      this.#ops.mkdir(at);
    } catch {
      return null;
    }
    const parents = [this.#root];
    for (let i = 1; i < parts.length; i++) {
      parents.push(at);
      at = join(at, parts[i]!);
      this.#ops.mkdir(at); // in a directory made just now: a failure is the disk's, reported by the flush
    }
    this.#next = 1;
    return parents;
  }

  /** Every directory prepareDir() returned is synced: the first segment's open makes no directory. */
  dirDurable(): void {
    this.#dirReady = true;
  }

  /** fsyncDir on the pool, through this writer's file operations. */
  syncDir(path: string): Promise<void> {
    return fsyncDirAsync(this.#ops, path);
  }

  /**
   * mkdir -p, fsyncing the parent of every directory made or found (once a
   * lane a life: one found may have been made by a life killed before its
   * parent's fsync).
   */
  #mkdirs(dir: string): void {
    const parents: string[] = [];
    this.#mkdirsUnsynced(dir, parents);
    for (const p of parents) this.#ops.fsyncDir(p);
  }

  /** mkdir -p with no sync; `parents` gets the parent of every directory made or found, outermost first. */
  #mkdirsUnsynced(dir: string, parents: string[]): void {
    try {
      this.#ops.mkdir(dir);
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'EEXIST') {
        parents.push(dirname(dir));
        return;
      }
      const parent = dirname(dir);
      if (code !== 'ENOENT' || parent === dir) throw err;
      this.#mkdirsUnsynced(parent, parents);
      try {
        this.#ops.mkdir(dir);
      } catch (again) {
        if (errnoCode(again) !== 'EEXIST') throw again;
      }
    }
    parents.push(dirname(dir));
  }

  #quietly(f: () => void): void {
    try {
      f();
    } catch {
      // Cleanup on a path that already failed; the first error is the one reported.
    }
  }

  // ---------------------------------------------------------------- staging

  #growSlab(slots: number): void {
    const slab = Buffer.alloc(slots * RECORD_HEADER_SIZE);
    this.#slab.copy(slab, 0, 0, this.#staged * RECORD_HEADER_SIZE);
    const heads: Buffer[] = [];
    for (let k = 0; k < slots; k++) heads.push(slab.subarray(k * RECORD_HEADER_SIZE, (k + 1) * RECORD_HEADER_SIZE));
    this.#slab = slab;
    this.#heads = heads;
  }

  #clearStaged(): void {
    this.#payloads.fill(EMPTY, 0, this.#staged); // let go of the callers' buffers
    this.#staged = 0;
    this.#stagedBytes = 0;
  }
}

const EMPTY = new Uint8Array(0);
