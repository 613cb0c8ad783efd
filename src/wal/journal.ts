// A writer shard's commit journal (docs/wal-format.md "Commit journal"): the
// file a `batch` round appends its records to and fdatasyncs once, and the
// start-up replay that copies a journal's tail back into the lane segments.
//
// Files live in `<walDir>/.journal/shard-<k>-of-<W>/<n>.jnl`. The writer
// appends to one file; a checkpoint rotates to the next (`rotate`), makes
// every lane segment written before the rotation durable, then deletes the
// files up to it (`retireUpTo`).
//
// Spares (docs/wal-format.md "Spares: reused journal files"): with `recycle`,
// a retired file is renamed to a spare instead of deleted, and the next file
// is a spare renamed to its number when one is ready; with `prefillBytes`,
// the life's first spare is a file of zeros written and synced on libuv's
// pool. A round's entries then overwrite blocks the file system has already
// allocated and written: their fdatasync commits no allocation and no size
// (about half the time of an append's on ext4), and no checkpoint frees the
// blocks of a large file (which, on a file system mounted with `discard`,
// held every other fdatasync for as long as the unlink's trim took). What a
// spare held before is never read as entries of its new number: each
// entry's CRC is seeded with its file's number and covers its body (through
// the records' own CRCs), and every round ends with a terminator.

import { closeSync, constants, fstatSync, fsyncSync, lstatSync, openSync, readdirSync, readSync, rmdirSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { errnoCode, NODE_FILE_OPS, writeAsync, writevAll, type FileOps } from './file-ops.js';
import { formatSegmentName, SEGMENT_HEADER_SIZE } from './format.js';
import {
  ENTRY_HEADER_SIZE,
  JournalReader,
  encodeEntryFields,
  encodeJournalHeader,
  JOURNAL_FLAG_REUSED,
  stampEntryCrc,
  bodyDigest,
  formatJournalName,
  JOURNAL_HEADER_SIZE,
  JOURNAL_MAGIC,
  JOURNAL_ROOT,
  JOURNAL_SUFFIX,
  JOURNAL_VERSION,
  JOURNAL_VERSION_1,
  isJournalDirName,
  parseJournalName,
} from './journal-format.js';
import { listLaneDirs } from './layout.js';
import { refuseNewer } from './newer-format.js';
import { kindOf, WalFileTypeError } from './regular-file.js';
import { JournalFile } from './journal-file.js';
import { WalWriteError } from './wal-write-error.js';

/** The tag of a lane directory: its path relative to the WAL root, `/`-separated. */
export function laneTag(walDir: string, laneDir: string): Uint8Array {
  const rel = relative(walDir, laneDir).split(sep).join('/');
  return Buffer.from(rel, 'utf8');
}

/** A spare: a retired journal file kept for reuse, or the life's first file prefilled with zeros (`spare-00000000.jnl`). */
const SPARE_NAME_RE = /^spare-(\d{8,})\.jnl$/;
/** A spare being prefilled (renamed to spare-00000000.jnl once synced). */
export const SPARE_TMP_NAME = 'spare-00000000.jnl.tmp';

export function formatSpareName(n: number): string {
  return `spare-${String(n).padStart(8, '0')}.jnl`;
}

/** Whether `name` is a spare's or a spare being prefilled (replay deletes them: they hold no entry this life needs). */
export function isSpareName(name: string): boolean {
  return SPARE_NAME_RE.test(name) || name === SPARE_TMP_NAME;
}

/** Spares kept at most (the largest): a checkpoint retires about one file and the next rotation takes one. */
const MAX_SPARES = 2;
/** A retired file shorter than this is deleted rather than kept (reusing it would save little and cost a rotation). */
const MIN_SPARE_BYTES = 1024 * 1024;
/**
 * Zeros written per call while prefilling a spare, each write then
 * fdatasynced, so that no one sync holds the disk long (rounds sync
 * meanwhile). Each step completes on the event loop, which the writer
 * worker turns once per round while a spare is prefilled (shard-loop.ts).
 */
const PREFILL_CHUNK = 4 * 1024 * 1024;
const ZEROS = new Uint8Array(PREFILL_CHUNK);
/** The first spare is prefilled once a journal file of the life holds this much (a journal under load, not one that took a few requests). */
const PREFILL_AFTER_BYTES = 1024 * 1024;
/** A checkpoint starts once the journal has taken this many bytes since the last one began (in any number of files)… */
export const CHECKPOINT_BYTES = 256 * 1024 * 1024;
/**
 * …or, when more lanes were written since than CHECKPOINT_BYTES / this, this
 * many bytes a lane, up to CHECKPOINT_MAX_BYTES. A checkpoint writes and
 * fdatasyncs the segment of every lane written since the last one, a cost
 * per file whatever it holds: with thousands of lanes it waits until each
 * has about this much to write on average (docs/wal-format.md "When a
 * checkpoint starts"; measured in docs/performance.md).
 */
export const CHECKPOINT_BYTES_PER_LANE = 64 * 1024;
export const CHECKPOINT_MAX_BYTES = 1024 * 1024 * 1024;

/** Journal bytes since the last checkpoint began that start the next one, with `lanes` lanes written since. */
export function checkpointTriggerBytes(lanes: number): number {
  return Math.min(CHECKPOINT_MAX_BYTES, Math.max(CHECKPOINT_BYTES, lanes * CHECKPOINT_BYTES_PER_LANE));
}

/**
 * A journal file that holds this much goes on in a new one (or a spare) at
 * the next round, checkpoint or not: a checkpoint period of up to
 * CHECKPOINT_MAX_BYTES, or one that ran long, spans several files of about
 * this size instead of one large one, which a checkpoint retires (or keeps
 * as a spare) a file at a time. (Replay reads a file a piece at a time,
 * journal-file.ts, so its length no longer bounds replay's memory.)
 */
export const JOURNAL_FILE_BYTES = 256 * 1024 * 1024;

/** Read-only journal descriptors readBack keeps open (counted in the worker's descriptor budget). */
export const JOURNAL_READERS = 2;
const READERS = JOURNAL_READERS;
/** Written after every round's entries: where a reader finds it, the file's entries end. */
const TERMINATOR = new Uint8Array(ENTRY_HEADER_SIZE);

export interface ShardJournalOptions {
  /** `<walDir>/.journal/shard-<k>-of-<W>` */
  readonly dir: string;
  readonly ops?: FileOps;
  /** Test-only: every fdatasync of the journal takes this much longer (a slow disk). */
  readonly syncDelayMs?: number;
  readonly now?: () => number;
  /**
   * Keep retired files (up to two) as spares and reuse them as the next
   * files, instead of deleting them (`ingester.wal.journalRecycle`).
   */
  readonly recycle?: boolean;
  /** The life's first spare: a file of this many zero bytes, written and synced on the pool (`ingester.wal.journalPrefillMib`); 0: none. */
  readonly prefillBytes?: number;
  /** Test-only: the size past which the next round starts a new file (default JOURNAL_FILE_BYTES). */
  readonly fileBytes?: number;
}

export class ShardJournal {
  readonly #dir: string;
  readonly #ops: FileOps;
  readonly #now: () => number;
  readonly #syncDelayMs: number;
  readonly #recycle: boolean;
  readonly #prefillBytes: number;
  readonly #fileBytes: number;
  #fd = -1;
  #number = 0;
  /** Where the open file's entries end (its last round's terminator starts here). */
  #size = 0;
  /** The open file's length when it was opened: a spare's earlier bytes lie below it (0: a new file). */
  #reusedLength = 0;
  /** Entry bytes written since the last rotate() (the checkpoint's size trigger). */
  #sinceRotate = 0;
  /** Spares ready to become the next file, largest first. */
  readonly #spares: { name: string; size: number }[] = [];
  #prefillStarted = false;
  /** Files made from a spare, this life. */
  #spareUses = 0;
  #prefill: Promise<void> = Promise.resolve();
  #prefilling = false;
  #closed = false;
  #next = 1;
  #dirReady = false;
  /** Numbers of files on disk that a checkpoint has not retired yet (the open one included). */
  readonly #files: number[] = [];
  // Staged entries of the round: one 32-byte header per entry in a growing slab.
  #slab = Buffer.alloc(64 * ENTRY_HEADER_SIZE);
  #entries = 0;
  readonly #iov: Uint8Array[] = [];
  /** Each staged entry's header and tag: their CRC is stamped when the round is written, with the file's number. */
  readonly #heads: Uint8Array[] = [];
  readonly #tags: Uint8Array[] = [];
  /** Each staged entry's body digest (journal-format.ts bodyDigest), summed into its CRC by write(). */
  readonly #digests: number[] = [];
  /** Each staged entry's body length (its records' bytes): where its body lands is known once written. */
  #bodyLengths: number[] = [];
  /** Where each entry of the last round written begins its body, in file #lastFile (see bodyOffset). */
  #bodyAt: number[] = [];
  #lastFile = 0;
  /** Read-only descriptors of journal files, opened by readBack (at most READERS), oldest first. */
  readonly #readers = new Map<number, number>();
  #stagedBytes = 0;
  readonly #fileHeader = Buffer.alloc(JOURNAL_HEADER_SIZE);
  /** sync() calls in flight, and the descriptors given up meanwhile (closed when none is). */
  #syncing = 0;
  readonly #closeAfterSync: number[] = [];

  constructor(opts: ShardJournalOptions) {
    this.#fileBytes = opts.fileBytes ?? JOURNAL_FILE_BYTES;
    this.#dir = opts.dir;
    this.#ops = opts.ops ?? NODE_FILE_OPS;
    this.#now = opts.now ?? Date.now;
    this.#syncDelayMs = opts.syncDelayMs ?? 0;
    this.#recycle = opts.recycle ?? false;
    this.#prefillBytes = opts.prefillBytes ?? 0;
    // Replay runs before the first write: any file left is one this life must not reuse the number of.
    for (const n of listJournalFiles(this.#dir)) {
      this.#files.push(n);
      if (n >= this.#next) this.#next = n + 1;
    }
  }

  get dir(): string {
    return this.#dir;
  }

  /** Bytes of entries (and the header) in the open file (0 when none is open). */
  get fileSize(): number {
    return this.#size;
  }

  /** Entry bytes written since the last rotate(), in every file (a checkpoint starts past CHECKPOINT_BYTES). */
  get bytesSinceRotate(): number {
    return this.#sinceRotate;
  }

  /** Whether the open file was a spare (its entries overwrite bytes the file system has already allocated). */
  get reused(): boolean {
    return this.#fd >= 0 && this.#reusedLength > 0;
  }

  /** Journal files made from a spare in this life. */
  get spareUses(): number {
    return this.#spareUses;
  }

  /** Spares ready now. */
  get spareCount(): number {
    return this.#spares.length;
  }

  /** Whether the first spare is being prefilled now (its steps complete on the event loop). */
  get sparePreparing(): boolean {
    return this.#prefilling;
  }

  /** Resolves once the prefill begun (if any) is done or has failed. */
  spareSettled(): Promise<void> {
    return this.#prefill;
  }

  /** Files on disk not retired yet. */
  get fileCount(): number {
    return this.#files.length;
  }

  get stagedEntries(): number {
    return this.#entries;
  }

  /**
   * Queues one entry: the records in `iov[from, to)` (record headers and
   * payloads, as written to the lane), `bytes` long, holding `records` records,
   * which went to `segment` at `offset`. The buffers are kept, not copied:
   * they must stay unchanged until write() returns.
   */
  stage(tag: Uint8Array, segment: number, offset: number, iov: readonly Uint8Array[], from: number, to: number, bytes: number, records: number): number {
    const i = this.#entries;
    if ((i + 1) * ENTRY_HEADER_SIZE > this.#slab.length) {
      // A new slab: views already staged keep the old one alive until written.
      this.#slab = Buffer.alloc(this.#slab.length * 2);
    }
    const head = this.#slab.subarray(i * ENTRY_HEADER_SIZE, (i + 1) * ENTRY_HEADER_SIZE);
    encodeEntryFields(head, 0, tag, segment, offset, bytes, records); // its CRC once write() knows the file
    this.#iov.push(head, tag);
    this.#heads.push(head);
    this.#tags.push(tag);
    this.#digests.push(bodyDigest(iov, from, to, offset === 0));
    for (let k = from; k < to; k++) if (iov[k]!.length > 0) this.#iov.push(iov[k]!);
    this.#bodyLengths.push(bytes);
    this.#entries = i + 1;
    this.#stagedBytes += ENTRY_HEADER_SIZE + tag.length + bytes;
    return i;
  }

  /** The number of the file the last round was written to (see bodyOffset). */
  get lastFile(): number {
    return this.#lastFile;
  }

  /**
   * Where entry `i` (as stage() numbered it) of the last round written
   * begins its body, in file lastFile. Valid from write()'s return until the
   * next write().
   */
  bodyOffset(i: number): number {
    return this.#bodyAt[i]!;
  }

  /**
   * Reads `length` bytes of journal file `file` at `offset` into `into` at
   * `at` (a lane's deferred records, which the journal holds until a
   * checkpoint writes them to the segment: docs/wal-format.md "Deferred lane
   * writes"). The file must not be retired yet. Throws what the read throws,
   * and a short read (EIO).
   */
  readBack(file: number, offset: number, length: number, into: Uint8Array, at: number): void {
    let fd = this.#readers.get(file);
    if (fd === undefined) {
      // A journal pinned by a failure grows file by file: keep only the newest
      // few open, closing the oldest first (never more than READERS at once).
      for (const [n, old] of this.#readers) {
        if (this.#readers.size < READERS) break;
        this.#readers.delete(n);
        closeQuietly(old);
      }
      fd = openSync(join(this.#dir, formatJournalName(file)), 'r');
      this.#readers.set(file, fd);
    }
    let got = 0;
    while (got < length) {
      const r = readSync(fd, into, at + got, length - got, offset + got);
      if (r <= 0) throw Object.assign(new Error(`journal file ${formatJournalName(file)}: short read at ${offset + got}`), { code: 'EIO' });
      got += r;
    }
  }

  /** Closes the read-only descriptor of `file`, if one is open. */
  #closeReader(file: number): void {
    const fd = this.#readers.get(file);
    if (fd === undefined) return;
    this.#readers.delete(file);
    closeQuietly(fd);
  }

  /** Drops what was staged (a round whose lanes all failed, say). */
  clearStaged(): void {
    this.#iov.length = 0;
    this.#heads.length = 0;
    this.#tags.length = 0;
    this.#digests.length = 0;
    this.#bodyLengths.length = 0;
    this.#entries = 0;
    this.#stagedBytes = 0;
  }

  /**
   * Appends the staged entries to the open file (opening the next one first
   * when none is), then a terminator, which the next round overwrites.
   * Returns the entry bytes written. On failure the file is cut back, or
   * given up when that fails too or when it is a spare, and a WalWriteError
   * is thrown.
   */
  write(): number {
    if (this.#entries === 0) return 0;
    try {
      // A spare is ready and the open file is appended to (a new file, or a
      // spare whose earlier length is used up), or the file is full: go on in
      // the spare or a new file (not while a round's sync of this file is in
      // flight: a round and the one written behind it stay in one file,
      // docs/wal-format.md "A round, in order").
      if (
        this.#fd >= 0 &&
        this.#syncing === 0 &&
        ((this.#spares.length > 0 && this.#size + this.#stagedBytes > this.#reusedLength) || this.#size + this.#stagedBytes > this.#fileBytes)
      ) {
        this.#giveUpFile();
      }
      if (this.#fd < 0) this.#openNext();
      for (let k = 0; k < this.#heads.length; k++) stampEntryCrc(this.#heads[k]!, 0, this.#tags[k]!, this.#number, this.#digests[k]!);
      this.#iov.push(TERMINATOR);
      const start = this.#size;
      try {
        const done = writevAll(this.#ops, this.#fd, this.#iov, start) - TERMINATOR.length;
        // Where each entry's body went: after its header and tag.
        const at = this.#bodyAt;
        at.length = this.#entries;
        let pos = start;
        for (let k = 0; k < this.#entries; k++) {
          pos += ENTRY_HEADER_SIZE + this.#tags[k]!.length;
          at[k] = pos;
          pos += this.#bodyLengths[k]!;
        }
        this.#lastFile = this.#number;
        this.#size = start + done;
        this.#sinceRotate += done;
        if (!this.#prefillStarted && this.#size >= PREFILL_AFTER_BYTES) this.#startPrefill();
        return done;
      } catch (err) {
        // Cut back to the last whole entry (a spare too: whole entries of the
        // failed round would check under its seed, and its earlier bytes
        // would be read past them), or give the file up when that fails.
        try {
          this.#ops.ftruncate(this.#fd, start);
          this.#reusedLength = Math.min(this.#reusedLength, start);
        } catch {
          this.#giveUpFile();
        }
        throw new WalWriteError('write', this.#path(), err);
      }
    } finally {
      this.clearStaged();
    }
  }

  /** fdatasync of the open file, on this thread. After a failure the file is given up: the next write opens a new one. */
  syncNow(): void {
    if (this.#fd < 0) return;
    try {
      if (this.#syncDelayMs > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, this.#syncDelayMs);
      this.#ops.fdatasyncSync(this.#fd);
    } catch (err) {
      const path = this.#path();
      this.#giveUpFile();
      throw new WalWriteError('fdatasync', path, err);
    }
  }

  /**
   * fdatasync of the open file on libuv's thread pool, so that the shard
   * writes its next round meanwhile. After a failure the file is given up
   * (if it is still the open one). A file given up while a sync is in flight
   * keeps its descriptor until every sync in flight returned: its number must
   * not be reused by another file under a sync that has not started yet.
   */
  async sync(): Promise<void> {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    const number = this.#number;
    this.#syncing++;
    try {
      if (this.#syncDelayMs > 0) await new Promise((r) => setTimeout(r, this.#syncDelayMs));
      await this.#ops.fdatasync(fd);
    } catch (err) {
      if (this.#fd === fd && this.#number === number) this.#giveUpFile();
      throw new WalWriteError('fdatasync', join(this.#dir, formatJournalName(number)), err);
    } finally {
      if (--this.#syncing === 0) for (const f of this.#closeAfterSync.splice(0)) this.#closeQuietly(f);
    }
  }

  /**
   * Closes the open file so that the next write starts a new one; returns the
   * highest file number a checkpoint begun now may retire (0 when none).
   * Every entry in those files was synced by its round.
   */
  rotate(): number {
    if (this.#fd >= 0) this.#giveUpFile();
    this.#sinceRotate = 0;
    let max = 0;
    for (const n of this.#files) if (n > max) max = n;
    return max;
  }

  /**
   * Retires the files numbered up to `upTo` (never the open one), oldest
   * first: each is kept as a spare while recycling and fewer than MAX_SPARES
   * are ready (a rename: what it holds is never read as entries again, see
   * stampEntryCrc), else deleted; then fsyncs the directory. Oldest first, so
   * that a process that dies in the middle leaves the newest files, a run
   * with no gap: the journal left still holds every round from its first
   * entry on. (Newest first left the oldest files and the newest, and a gap
   * between them: a reader taking the oldest entry left as the point from
   * which the journal holds everything, as a crash model does, found rounds
   * missing.)
   */
  retireUpTo(upTo: number): number {
    let removed = 0;
    for (let i = 0; i < this.#files.length; ) {
      const n = this.#files[i]!;
      if (n > upTo || (n === this.#number && this.#fd >= 0)) {
        i++;
        continue;
      }
      this.#closeReader(n);
      const path = join(this.#dir, formatJournalName(n));
      if (!this.#keepAsSpare(n, path)) {
        try {
          this.#ops.unlink(path);
        } catch (err) {
          if (errnoCode(err) !== 'ENOENT') throw err;
        }
      }
      this.#files.splice(i, 1);
      removed++;
    }
    if (removed > 0) this.#ops.fsyncDir(this.#dir);
    return removed;
  }

  /**
   * Renames retired file `n` to a spare when recycling, it is long enough and
   * one of the two largest; false when it is to be deleted instead (a failed
   * rename too: the file is then deleted like any other).
   */
  #keepAsSpare(n: number, path: string): boolean {
    if (!this.#recycle || this.#closed) return false;
    const size = sizeOf(path);
    if (size < MIN_SPARE_BYTES || (this.#spares.length >= MAX_SPARES && size <= this.#spares[this.#spares.length - 1]!.size)) return false;
    const name = formatSpareName(n);
    try {
      this.#ops.rename(path, join(this.#dir, name));
    } catch {
      return false;
    }
    this.#spares.push({ name, size });
    this.#spares.sort((a, b) => b.size - a.size);
    // Keep the largest: the smallest one beyond MAX_SPARES goes (left behind if that fails: replay deletes it).
    for (const gone of this.#spares.splice(MAX_SPARES)) unlinkQuietly(this.#ops, join(this.#dir, gone.name));
    return true;
  }

  /** Closes the open file without deleting any journal file; the spares go (a next life makes its own). */
  close(): void {
    this.#closed = true;
    if (this.#fd >= 0) this.#giveUpFile();
    for (const n of [...this.#readers.keys()]) this.#closeReader(n);
    for (const { name } of this.#spares.splice(0)) unlinkQuietly(this.#ops, join(this.#dir, name));
  }

  #path(): string {
    return join(this.#dir, formatJournalName(this.#number));
  }

  #giveUpFile(): void {
    const fd = this.#fd;
    this.#fd = -1;
    this.#size = 0;
    this.#reusedLength = 0;
    if (this.#syncing > 0) this.#closeAfterSync.push(fd);
    else this.#closeQuietly(fd);
  }

  #closeQuietly(fd: number): void {
    try {
      this.#ops.close(fd);
    } catch {
      // Giving the file up: nothing more to learn from it.
    }
  }

  /**
   * Makes the next journal file: the largest spare renamed (its earlier bytes
   * stay, past a terminator), else a new file; then its header and a
   * terminator, fdatasync, fsync of the directory.
   */
  #openNext(): void {
    if (!this.#dirReady) {
      mkdirp(this.#ops, this.#dir);
      this.#dirReady = true;
    }
    const n = this.#next++;
    const path = join(this.#dir, formatJournalName(n));
    const spare = this.#spares.shift()?.name;
    encodeJournalHeader(this.#fileHeader, 0, n, this.#now(), spare !== undefined ? JOURNAL_FLAG_REUSED : 0);
    let fd = -1;
    let length = 0;
    try {
      if (spare !== undefined) {
        this.#ops.rename(join(this.#dir, spare), path);
        // Named now: a checkpoint retires it like any other. A crash before
        // its header is on disk leaves a file under this name with its earlier
        // header (a lower number): replay reads it as torn and empty.
        this.#files.push(n);
        fd = this.#ops.open(path, 'r+');
        length = fstatSync(fd).size;
      } else {
        fd = this.#ops.open(path, 'wx');
      }
      writevAll(this.#ops, fd, [this.#fileHeader, TERMINATOR], 0);
      this.#ops.fdatasyncSync(fd);
      if (spare === undefined) this.#files.push(n);
      this.#ops.fsyncDir(this.#dir);
    } catch (err) {
      if (fd >= 0) {
        try {
          this.#ops.close(fd);
        } catch {
          // already failing
        }
      }
      throw new WalWriteError('create', path, err);
    }
    this.#fd = fd;
    this.#number = n;
    this.#size = JOURNAL_HEADER_SIZE;
    this.#reusedLength = length;
    if (spare !== undefined) this.#spareUses++;
  }

  /**
   * The life's first spare, when prefilling is on and a journal file of
   * this life first holds PREFILL_AFTER_BYTES: a file of zeros written
   * and fdatasynced in steps on libuv's pool (so that no one sync holds the
   * disk long while rounds sync), then named as a spare. Until it is ready,
   * and whenever it fails, the journal appends to new files as before; from
   * the first checkpoint on, recycling keeps spares coming.
   */
  #startPrefill(): void {
    if (this.#prefillBytes <= 0 || this.#prefillStarted || this.#closed) return;
    this.#prefillStarted = true;
    this.#prefilling = true;
    this.#prefill = this.#prefillSpare().then(
      (name) => {
        this.#prefilling = false;
        if (name === undefined) return;
        if (this.#closed) unlinkQuietly(this.#ops, join(this.#dir, name));
        else {
          this.#spares.push({ name, size: this.#prefillBytes });
          this.#spares.sort((a, b) => b.size - a.size);
        }
      },
      () => {
        this.#prefilling = false;
      },
    );
  }

  /** The spare's name once it is ready; undefined when the journal was closed meanwhile (nothing left behind). */
  async #prefillSpare(): Promise<string | undefined> {
    const ops = this.#ops;
    const tmp = join(this.#dir, SPARE_TMP_NAME);
    unlinkQuietly(ops, tmp);
    let fd = ops.open(tmp, 'wx');
    try {
      for (let at = 0; at < this.#prefillBytes; at += PREFILL_CHUNK) {
        if (this.#closed) break;
        const chunk = ZEROS.subarray(0, Math.min(PREFILL_CHUNK, this.#prefillBytes - at));
        for (let done = 0; done < chunk.length; ) {
          const w = await writeAsync(ops, fd, chunk.subarray(done), at + done);
          if (w <= 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' });
          done += w;
        }
        await ops.fdatasync(fd);
      }
      ops.close(fd);
      fd = -1;
      if (this.#closed) {
        unlinkQuietly(ops, tmp);
        return undefined;
      }
      const name = formatSpareName(0);
      ops.rename(tmp, join(this.#dir, name));
      return name;
    } catch (err) {
      if (fd >= 0) {
        try {
          ops.close(fd);
        } catch {
          // already failing
        }
      }
      unlinkQuietly(ops, tmp);
      throw err;
    }
  }
}

/** A file's length, 0 when it cannot be read (it is then deleted, not kept). */
function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // A read-only descriptor: nothing to learn from its close.
  }
}

function unlinkQuietly(ops: FileOps, path: string): void {
  try {
    ops.unlink(path);
  } catch {
    // Not there, or the directory is going: nothing to keep.
  }
}

/**
 * mkdir -p, fsyncing the parent of every directory made or found: one
 * found may have been made by a life killed before its parent's fsync.
 */
function mkdirp(ops: FileOps, dir: string): void {
  try {
    ops.mkdir(dir);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'EEXIST') {
      ops.fsyncDir(dirname(dir));
      return;
    }
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    mkdirp(ops, parent);
    try {
      ops.mkdir(dir);
    } catch (again) {
      if (errnoCode(again) !== 'EEXIST') throw again;
    }
  }
  ops.fsyncDir(dirname(dir));
}

/** Journal file numbers in `dir`, ascending; empty when it does not exist. */
export function listJournalFiles(dir: string): number[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    if (errnoCode(err) === 'ENOTDIR') throw new WalFileTypeError(dir, 'not a directory: a shard\'s commit journal lives there; move it aside');
    throw err;
  }
  return names
    .map(parseJournalName)
    .filter((n) => n > 0)
    .sort((a, b) => a - b);
}

/**
 * Entries of a shard journal directory that replay neither reads nor deletes:
 * not a journal file's name as the writer spells it (`%08d.jnl`, from 1), nor
 * a spare's. Sorted; empty when the directory does not exist.
 */
export function listUnreadJournalNames(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((name) => parseJournalName(name) === 0 && !isSpareName(name))
      .sort();
  } catch {
    return []; // gone, or not a directory: said where it is listed (listJournalFiles)
  }
}

/**
 * What the entry at `path` holds, read as a journal file from any number
 * (a piece at a time); null when it is not a regular file or cannot be read.
 */
export function unreadJournal(path: string): { entries: number; records: number } | null {
  if (!path.endsWith(JOURNAL_SUFFIX)) return null;
  let file: JournalFile;
  try {
    file = new JournalFile(path);
  } catch {
    return null;
  }
  try {
    const r = new JournalReader(file, 0);
    let entries = 0;
    let records = 0;
    for (let e = r.next(); e !== null; e = r.next()) {
      entries++;
      records += e.records;
    }
    return { entries, records };
  } catch {
    return null;
  } finally {
    file.close();
  }
}

/** Spare file names in `dir` (and a spare being prefilled); empty when it does not exist. */
export function listSpares(dir: string): string[] {
  try {
    return readdirSync(dir).filter(isSpareName);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
}

/**
 * Whether the WAL root holds a `batch`-mode commit journal directory
 * (`.journal/shard-<k>-of-<W>`, files or not): an ingester writes, or wrote,
 * this WAL with segments that are durable only once a checkpoint has run
 * (src/compactor/seal-rule.ts).
 */
export function hasShardJournal(walDir: string): boolean {
  return listJournalDirs(walDir).some(isJournalDirName);
}

/**
 * The shard journal directories under `<walDir>/.journal`, by name. Throws
 * WalFileTypeError when `.journal`, or an entry named as a shard's directory,
 * is a symbolic link: nothing reads or writes the journal through one. Until
 * stop 55 a `.journal` linked to another directory (another WAL's journal,
 * say) passed verify and was replayed, its files deleted, and written by the
 * new life; a linked shard directory was replayed by its worker.
 */
export function listJournalDirs(walDir: string): string[] {
  const root = join(walDir, JOURNAL_ROOT);
  try {
    if (lstatSync(root).isSymbolicLink()) {
      throw new WalFileTypeError(root, "a symbolic link: the commit journal is never read or written through one (it might be another WAL's); move it aside");
    }
    const entries = readdirSync(root, { withFileTypes: true });
    const link = entries.find((e) => e.isSymbolicLink() && isJournalDirName(e.name));
    if (link !== undefined) {
      throw new WalFileTypeError(join(root, link.name), "a symbolic link: a shard's commit journal is never read or written through one; move it aside");
    }
    return entries
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
  } catch (err) {
    if (err instanceof WalFileTypeError) throw err;
    if (errnoCode(err) === 'ENOENT') return [];
    // A scandir error with no word of what the path is for stopped the start; `wal verify` threw.
    if (errnoCode(err) === 'ENOTDIR') throw new WalFileTypeError(join(walDir, JOURNAL_ROOT), 'not a directory: the commit journal lives there; move it aside');
    throw err;
  }
}

// ---------------------------------------------------------------- replay

export interface JournalReplay {
  readonly files: number;
  readonly entries: number;
  /** Entries whose bytes were already in their segment. */
  readonly present: number;
  /** Entries written back into their segment. */
  readonly rewritten: number;
  /** Records in the rewritten entries. */
  readonly rewrittenRecords: number;
  /** Entries for a segment the compactor retired (deleted or emptied), or of a lane that is gone: landed. */
  readonly skipped: number;
  /** Segments made again from an entry holding their header (version 2): a crash lost the unsynced file or its header. */
  readonly recreated: number;
  /** Journal files whose tail was torn or corrupt, with where and why (the rest of that file is ignored). */
  readonly stops: readonly { file: string; kind: 'torn' | 'corrupt'; offset: number; why: string }[];
  /**
   * Journal files replay did not delete, each logged by logKeptJournal:
   * those that stopped `corrupt` (damage, not a torn tail): the entries
   * before the damage were replayed, and the file was moved aside to `keptAs`
   * (KEPT_JOURNAL_RE, in `.journal`), for an operator to look at (`wal
   * verify` fails until it is removed); and, with `unread`, entries of the
   * shard directory under a name replay does not read (not `<n>.jnl` as the
   * writer spells it, nor a spare's: `00000000.jnl`, a number past 2^53),
   * left where they are (`keptAs` is `file`), with the entries and records a
   * journal file there holds.
   */
  readonly kept: readonly KeptJournal[];
}

/** A journal file replay did not delete (JournalReplay.kept). */
export interface KeptJournal {
  readonly file: string;
  readonly keptAs: string;
  readonly offset: number;
  readonly why: string;
  /** Set for an entry under a name replay does not read: what it holds, read as a journal file (null: not a regular file, or unreadable). */
  readonly unread?: { readonly entries: number; readonly records: number } | null;
}

/**
 * A damaged journal file kept aside by replay, in `<walDir>/.journal`:
 * `<shard dir>-<n>.jnl.damaged-<k>`. Not a directory, so never a shard's
 * journal directory; not `<n>.jnl` or a spare's name, and not in a shard
 * directory, so never replayed, reused or deleted as a journal file; under a
 * dot-directory, so never a tenant. `<k>` (from 1) keeps a later life's
 * damaged file of the same number (numbers start again at 1 once a life's
 * replay has emptied the directory) from replacing an earlier one.
 */
export const KEPT_JOURNAL_RE = /^(shard-\d+-of-\d+)-(\d{8,})\.jnl\.damaged-(\d+)$/;

/** The damaged journal files kept aside under `<walDir>/.journal` (KEPT_JOURNAL_RE), by name, sorted. */
export function listKeptJournals(walDir: string): string[] {
  try {
    return readdirSync(join(walDir, JOURNAL_ROOT), { withFileTypes: true })
      .filter((e) => !e.isDirectory() && KEPT_JOURNAL_RE.test(e.name))
      .map((e) => e.name)
      .sort();
  } catch {
    return []; // no `.journal` (or not a directory: reported as such)
  }
}

/**
 * The line for a journal file replay did not delete (the worker's, the main
 * thread's, the compactor's): at error for a damaged one kept aside, at warn
 * for one under a name replay does not read (its path, entries and records:
 * no lane tag, no record content).
 */
export function logKeptJournal(log: { error(o: object, msg: string): void; warn(o: object, msg: string): void }, k: KeptJournal): void {
  if (k.unread !== undefined) {
    log.warn(
      { file: k.file, entries: k.unread?.entries ?? null, records: k.unread?.records ?? null },
      'WAL journal directory holds an entry under a name start-up does not read: not replayed, not deleted (run siglake wal verify; docs/runbooks.md "A commit journal file under a name start-up does not read")',
    );
    return;
  }
  log.error(
    { file: k.file, keptAs: k.keptAs, offset: k.offset, why: k.why },
    'WAL journal damaged: the entries before the damage replayed, the file kept aside, not deleted (run siglake wal verify; docs/runbooks.md "A commit journal file kept aside as damaged")',
  );
}

/**
 * Moves journal file `n` of the shard directory `dir` aside, into its parent
 * `.journal`, under a name no earlier kept file holds. Returns its new path.
 */
function keepDamaged(ops: FileOps, dir: string, n: number): string {
  const root = dirname(dir);
  const stem = `${basename(dir)}-${formatJournalName(n)}.damaged-`;
  for (let k = 1; ; k++) {
    const to = join(root, stem + k);
    try {
      lstatSync(to);
      continue; // taken: a damaged file of an earlier life
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    ops.rename(join(dir, formatJournalName(n)), to);
    return to;
  }
}

/**
 * Replays the journal files of `dir` into the lane segments under `walDir`,
 * then deletes them (the directory too when `removeDir`); a file that stopped
 * `corrupt` (damage, not a crash's torn tail) is moved aside instead
 * (KEPT_JOURNAL_RE), after the entries before its damage were replayed. Idempotent: an
 * entry whose bytes are already at their place is left alone, one that is
 * missing or differs is written there, in any segment that still holds
 * records: the live tail, and also a segment given up after a failed
 * fdatasync (followed by a higher one, or even by a sealed one), whose
 * records only the journal holds durably. Entries for segments the compactor
 * retired (deleted, or cut to zero bytes) or of lanes that are gone are
 * skipped. A segment that is durable on its own (sealed, rotated) compares
 * equal and is left alone.
 * Version 2: an entry at offset 0 carries the header of a segment the round
 * created without a sync; when that segment is gone or shorter than a header
 * it is made again from the entry (a machine crash lost it). An entry past
 * the header of a segment gone or emptied is skipped as before: that segment
 * existed at a completed checkpoint, which made it durable, so only the
 * compactor removed it.
 * Every segment an entry was checked against (present or written back) is
 * fdatasynced, and the directory of every segment a version-2 file says was
 * created since the last checkpoint is fsynced, before any journal file is
 * deleted.
 * `lanes` limits replay to lane tags it accepts (a worker's own lanes).
 */
export function replayJournalDir(
  walDir: string,
  dir: string,
  opts: { removeDir?: boolean; lanes?: (tag: string) => boolean; ops?: FileOps } = {},
): JournalReplay {
  const ops = opts.ops ?? NODE_FILE_OPS;
  const files = listJournalFiles(dir);
  const known = new Map<string, string>();
  for (const l of listLaneDirs(walDir)) known.set(new TextDecoder().decode(laneTag(walDir, l.dir)), l.dir);
  const written = new Set<string>();
  /** Lane directories whose entry for a new segment may still be only in the page cache. */
  const created = new Set<string>();
  let recreated = 0;
  let entries = 0;
  let present = 0;
  let rewritten = 0;
  let rewrittenRecords = 0;
  let skipped = 0;
  const stops: { file: string; kind: 'torn' | 'corrupt'; offset: number; why: string }[] = [];
  /** Files that stopped corrupt, by number: kept aside, not deleted. */
  const damaged = new Map<number, { offset: number; why: string }>();
  // A journal of a newer release is refused before anything is replayed or deleted: read as
  // damage, it was deleted with every acknowledged record only it held.
  for (const n of files) refuseNewer(join(dir, formatJournalName(n)), 'journal', JOURNAL_MAGIC, JOURNAL_VERSION);
  for (const n of files) {
    const path = join(dir, formatJournalName(n));
    // Not through a link, never blocking on a FIFO (readFileSync waited for ever on one); a piece
    // at a time, each entry applied as it is read: a file made long and sparse was read whole.
    const file = openJournalFile(path);
    let reader: JournalReader;
    try {
      reader = new JournalReader(file, n);
      for (let e = reader.next(); e !== null; e = reader.next()) {
        entries++;
        if (opts.lanes !== undefined && !opts.lanes(e.tag)) continue;
        const laneDir = known.get(e.tag);
        if (laneDir === undefined) {
          skipped++;
          continue;
        }
        const seg = join(laneDir, formatSegmentName(e.segment));
        const r = replayEntry(seg, e.offset, e.body, reader.version !== JOURNAL_VERSION_1);
        if (r === 'skipped') {
          skipped++;
          continue;
        }
        if (e.offset === 0) created.add(laneDir);
        if (r === 'recreated') recreated++;
        // Present or not, its bytes may sit only in the page cache (a worker
        // that died, a process killed): the journal goes only once they are synced.
        written.add(seg);
        if (r === 'present') present++;
        else {
          rewritten++;
          rewrittenRecords += e.records;
        }
      }
    } finally {
      file.close();
    }
    const stop = reader.stop!;
    if (stop.kind !== 'end') stops.push({ file: path, kind: stop.kind, offset: stop.offset, why: stop.why });
    // Damage, not a torn tail (the reader takes a spare's stop as torn: there the two look
    // alike): the entries after it may be acknowledged records, so the file is not destroyed.
    if (stop.kind === 'corrupt') damaged.set(n, { offset: stop.offset, why: stop.why });
  }
  for (const seg of written) {
    let fd: number;
    try {
      fd = ops.open(seg, 'r+');
    } catch (err) {
      // A compactor beside the ingester (`siglake compact`) landed and deleted it meanwhile.
      if (errnoCode(err) === 'ENOENT') continue;
      throw err;
    }
    try {
      fsyncSync(fd);
    } finally {
      ops.close(fd);
    }
  }
  for (const laneDir of created) NODE_FILE_OPS.fsyncDir(laneDir);
  const kept: KeptJournal[] = [];
  for (const n of files) {
    const d = damaged.get(n);
    if (d === undefined) unlinkSync(join(dir, formatJournalName(n)));
    else kept.push({ file: join(dir, formatJournalName(n)), keptAs: keepDamaged(ops, dir, n), ...d });
  }
  // The kept file's new name reaches the disk before this life writes a journal file of the same number.
  if (kept.length > 0) NODE_FILE_OPS.fsyncDir(dirname(dir));
  // Names replay does not read (`00000000.jnl`, a number past 2^53): left alone, and said (they were
  // passed over in silence, entries and all).
  for (const name of listUnreadJournalNames(dir)) {
    const file = join(dir, name);
    kept.push({ file, keptAs: file, offset: 0, why: 'a name start-up does not read', unread: unreadJournal(file) });
  }
  // A spare holds no entry this life needs (what it held was retired by a checkpoint): the next life makes its own.
  const spares = listSpares(dir);
  for (const name of spares) unlinkQuietly(ops, join(dir, name));
  if (opts.removeDir) {
    try {
      rmdirSync(dir);
    } catch (err) {
      // Left, it would keep the WAL a batch-mode one for the compactor (seal-rule.ts) in any mode.
      if (errnoCode(err) === 'ENOTEMPTY') {
        throw new WalFileTypeError(
          dir,
          `holds ${listUnreadJournalNames(dir).join(', ')}, under names start-up does not read: the journal directory of another worker count is replayed and removed before any worker starts, and this one cannot be; move them aside`,
        );
      }
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    NODE_FILE_OPS.fsyncDir(dirname(dir));
  } else if (files.length > 0 || spares.length > 0) {
    NODE_FILE_OPS.fsyncDir(dir);
  }
  return { files: files.length, entries, present, rewritten, rewrittenRecords, skipped, recreated, stops, kept };
}

/**
 * One entry against its segment. `creates`: the entry is from a version-2
 * file, where offset 0 means the round created the segment (body: header,
 * then records).
 */
function replayEntry(seg: string, offset: number, body: Uint8Array, creates: boolean): 'skipped' | 'present' | 'rewritten' | 'recreated' {
  const recreate = creates && offset === 0;
  let fd: number;
  try {
    // Never through a symbolic link: one put in a lane may point at another tenant's segment,
    // which replay then overwrote with this lane's records. Never blocking on a FIFO.
    fd = openSync(seg, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ELOOP' || code === 'EISDIR' || code === 'ENXIO') throw notASegment(seg, code === 'ELOOP' ? 'a symbolic link' : code === 'EISDIR' ? 'a directory' : 'a socket or a device');
    if (code !== 'ENOENT') throw err;
    // Gone. Created since the last checkpoint (its header is in this entry):
    // a machine crash lost the unsynced file; make it again. Otherwise it
    // was durable, and the compactor retired it (its records landed).
    if (!recreate) return 'skipped';
    fd = openSync(seg, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o644);
    try {
      writeAll(fd, body, 0);
    } finally {
      closeSync(fd);
    }
    return 'recreated';
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw notASegment(seg, kindOf(st));
    const size = st.size;
    if (size < SEGMENT_HEADER_SIZE) {
      // No whole header. A segment created since the last checkpoint: the
      // crash lost its header with the rest; write it all again. Else a head
      // the compactor retired (emptied; its records landed): version 1 made
      // every header durable before any record went in, version 2 at the
      // checkpoint that retired the segment's creating entry.
      if (!recreate) return 'skipped';
      writeAll(fd, body, 0);
      return 'recreated';
    }
    if (offset < SEGMENT_HEADER_SIZE && !recreate) return 'skipped';
    if (size >= offset + body.length) {
      const have = Buffer.allocUnsafe(body.length);
      let got = 0;
      while (got < body.length) {
        const r = readSync(fd, have, got, body.length - got, offset + got);
        if (r <= 0) break;
        got += r;
      }
      if (got === body.length && have.equals(body)) return 'present';
    }
    writeAll(fd, body, offset);
    return 'rewritten';
  } finally {
    closeSync(fd);
  }
}

/** A segment name the journal names that holds no regular file: replay can neither check nor write it. */
function notASegment(seg: string, kind: string): WalFileTypeError {
  return new WalFileTypeError(seg, `${kind}, not a regular file, where the commit journal holds records of this segment (not followed, not written); move it aside and start again`);
}

/** A journal file, read a piece at a time; anything but a regular file under its name is refused by name. */
export function openJournalFile(path: string): JournalFile {
  try {
    return new JournalFile(path);
  } catch (err) {
    if (err instanceof WalFileTypeError) throw new WalFileTypeError(path, `${err.why}: a commit journal file is one; move it aside`);
    throw err;
  }
}

function writeAll(fd: number, body: Uint8Array, offset: number): void {
  let done = 0;
  while (done < body.length) done += writeSync(fd, body, done, body.length - done, offset + done);
}

/**
 * Replays and removes the journal directories of another worker count (the
 * ingester restarted with a different `--workers`): their lanes may belong to
 * any shard now, so this runs in the main thread before any worker starts.
 * With `workers` 0, every journal directory (`siglake compact
 * --ingester-stopped`, which lands the lanes' highest segments too).
 * Returns the replays, by directory name.
 */
export function replayForeignJournals(walDir: string, workers: number): Map<string, JournalReplay> {
  const out = new Map<string, JournalReplay>();
  for (const name of listJournalDirs(walDir)) {
    const m = /^shard-(\d+)-of-(\d+)$/.exec(name);
    if (m === null) continue; // not ours: left alone
    if (Number(m[2]) === workers && Number(m[1]) < workers) continue; // its worker replays it
    out.set(name, replayJournalDir(walDir, join(walDir, JOURNAL_ROOT, name), { removeDir: true }));
  }
  return out;
}
