// A writer shard's commit journal (docs/wal-format.md "Commit journal"): the
// file a `batch` round appends its records to and fdatasyncs once, and the
// start-up replay that copies a journal's tail back into the lane segments.
//
// Files live in `<walDir>/.journal/shard-<k>-of-<W>/<n>.jnl`. The writer
// appends to one file; a checkpoint rotates to the next (`rotate`), makes
// every lane segment written before the rotation durable, then deletes the
// files up to it (`retireUpTo`).

import { closeSync, constants, fstatSync, fsyncSync, openSync, readdirSync, readFileSync, readSync, rmdirSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { errnoCode, NODE_FILE_OPS, writevAll, type FileOps } from './file-ops.js';
import { formatSegmentName, SEGMENT_HEADER_SIZE } from './format.js';
import {
  decodeJournal,
  ENTRY_HEADER_SIZE,
  encodeEntryHeader,
  encodeJournalHeader,
  formatJournalName,
  JOURNAL_HEADER_SIZE,
  JOURNAL_ROOT,
  JOURNAL_VERSION_1,
  isJournalDirName,
  parseJournalName,
} from './journal-format.js';
import { listLaneDirs } from './layout.js';
import { WalWriteError } from './wal-write-error.js';

/** The tag of a lane directory: its path relative to the WAL root, `/`-separated. */
export function laneTag(walDir: string, laneDir: string): Uint8Array {
  const rel = relative(walDir, laneDir).split(sep).join('/');
  return Buffer.from(rel, 'utf8');
}

export interface ShardJournalOptions {
  /** `<walDir>/.journal/shard-<k>-of-<W>` */
  readonly dir: string;
  readonly ops?: FileOps;
  /** Test-only: every fdatasync of the journal takes this much longer (a slow disk). */
  readonly syncDelayMs?: number;
  readonly now?: () => number;
}

export class ShardJournal {
  readonly #dir: string;
  readonly #ops: FileOps;
  readonly #now: () => number;
  readonly #syncDelayMs: number;
  #fd = -1;
  #number = 0;
  #size = 0;
  #next = 1;
  #dirReady = false;
  /** Numbers of files on disk that a checkpoint has not retired yet (the open one included). */
  readonly #files: number[] = [];
  // Staged entries of the round: one 32-byte header per entry in a growing slab.
  #slab = Buffer.alloc(64 * ENTRY_HEADER_SIZE);
  #entries = 0;
  readonly #iov: Uint8Array[] = [];
  #stagedBytes = 0;
  readonly #fileHeader = Buffer.alloc(JOURNAL_HEADER_SIZE);
  /** sync() calls in flight, and the descriptors given up meanwhile (closed when none is). */
  #syncing = 0;
  readonly #closeAfterSync: number[] = [];

  constructor(opts: ShardJournalOptions) {
    this.#dir = opts.dir;
    this.#ops = opts.ops ?? NODE_FILE_OPS;
    this.#now = opts.now ?? Date.now;
    this.#syncDelayMs = opts.syncDelayMs ?? 0;
    // Replay ran before: any file left is one this life must not reuse the number of.
    for (const n of listJournalFiles(this.#dir)) {
      this.#files.push(n);
      if (n >= this.#next) this.#next = n + 1;
    }
  }

  get dir(): string {
    return this.#dir;
  }

  /** Bytes in the open file (0 when none is open). */
  get fileSize(): number {
    return this.#size;
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
  stage(tag: Uint8Array, segment: number, offset: number, iov: readonly Uint8Array[], from: number, to: number, bytes: number, records: number): void {
    const i = this.#entries;
    if ((i + 1) * ENTRY_HEADER_SIZE > this.#slab.length) {
      // A new slab: views already staged keep the old one alive until written.
      this.#slab = Buffer.alloc(this.#slab.length * 2);
    }
    const head = this.#slab.subarray(i * ENTRY_HEADER_SIZE, (i + 1) * ENTRY_HEADER_SIZE);
    encodeEntryHeader(head, 0, tag, segment, offset, bytes, records);
    this.#iov.push(head, tag);
    for (let k = from; k < to; k++) if (iov[k]!.length > 0) this.#iov.push(iov[k]!);
    this.#entries = i + 1;
    this.#stagedBytes += ENTRY_HEADER_SIZE + tag.length + bytes;
  }

  /** Drops what was staged (a round whose lanes all failed, say). */
  clearStaged(): void {
    this.#iov.length = 0;
    this.#entries = 0;
    this.#stagedBytes = 0;
  }

  /**
   * Appends the staged entries to the open file (opening the next one first
   * when none is). Returns the bytes written. On failure the file is cut back,
   * or given up when that fails too, and a WalWriteError is thrown.
   */
  write(): number {
    if (this.#entries === 0) return 0;
    try {
      if (this.#fd < 0) this.#openNext();
      const start = this.#size;
      try {
        const done = writevAll(this.#ops, this.#fd, this.#iov, start);
        this.#size = start + done;
        return done;
      } catch (err) {
        try {
          this.#ops.ftruncate(this.#fd, start);
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
    let max = 0;
    for (const n of this.#files) if (n > max) max = n;
    return max;
  }

  /** Deletes the files numbered up to `upTo` (never the open one), then fsyncs the directory. */
  retireUpTo(upTo: number): number {
    let removed = 0;
    for (let i = this.#files.length - 1; i >= 0; i--) {
      const n = this.#files[i]!;
      if (n > upTo || (n === this.#number && this.#fd >= 0)) continue;
      try {
        this.#ops.unlink(join(this.#dir, formatJournalName(n)));
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') throw err;
      }
      this.#files.splice(i, 1);
      removed++;
    }
    if (removed > 0) this.#ops.fsyncDir(this.#dir);
    return removed;
  }

  /** Closes the open file without deleting anything. */
  close(): void {
    if (this.#fd >= 0) this.#giveUpFile();
  }

  #path(): string {
    return join(this.#dir, formatJournalName(this.#number));
  }

  #giveUpFile(): void {
    const fd = this.#fd;
    this.#fd = -1;
    this.#size = 0;
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

  /** Creates the next journal file: header, fdatasync, fsync of the directory. */
  #openNext(): void {
    if (!this.#dirReady) {
      mkdirp(this.#ops, this.#dir);
      this.#dirReady = true;
    }
    const n = this.#next++;
    const path = join(this.#dir, formatJournalName(n));
    encodeJournalHeader(this.#fileHeader, 0, n, this.#now());
    let fd = -1;
    try {
      fd = this.#ops.open(path, 'wx');
      writevAll(this.#ops, fd, [this.#fileHeader], 0);
      this.#ops.fdatasyncSync(fd);
      this.#files.push(n);
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
  }
}

/** mkdir -p, fsyncing the parent of every directory made. */
function mkdirp(ops: FileOps, dir: string): void {
  try {
    ops.mkdir(dir);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'EEXIST') return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    mkdirp(ops, parent);
    try {
      ops.mkdir(dir);
    } catch (again) {
      if (errnoCode(again) === 'EEXIST') return;
      throw again;
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
    throw err;
  }
  return names
    .map(parseJournalName)
    .filter((n) => n > 0)
    .sort((a, b) => a - b);
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

/** The shard journal directories under `<walDir>/.journal`, by name. */
export function listJournalDirs(walDir: string): string[] {
  try {
    return readdirSync(join(walDir, JOURNAL_ROOT), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
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
}

/**
 * Replays the journal files of `dir` into the lane segments under `walDir`,
 * then deletes them (the directory too when `removeDir`). Idempotent: an
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
  for (const n of files) {
    const path = join(dir, formatJournalName(n));
    const decoded = decodeJournal(readFileSync(path), n);
    if (decoded.stop.kind !== 'end') stops.push({ file: path, kind: decoded.stop.kind, offset: decoded.stop.offset, why: decoded.stop.why });
    for (const e of decoded.entries) {
      entries++;
      if (opts.lanes !== undefined && !opts.lanes(e.tag)) continue;
      const laneDir = known.get(e.tag);
      if (laneDir === undefined) {
        skipped++;
        continue;
      }
      const seg = join(laneDir, formatSegmentName(e.segment));
      const r = replayEntry(seg, e.offset, e.body, decoded.version !== JOURNAL_VERSION_1);
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
  for (const n of files) unlinkSync(join(dir, formatJournalName(n)));
  if (opts.removeDir) {
    try {
      rmdirSync(dir);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    NODE_FILE_OPS.fsyncDir(dirname(dir));
  } else if (files.length > 0) {
    NODE_FILE_OPS.fsyncDir(dir);
  }
  return { files: files.length, entries, present, rewritten, rewrittenRecords, skipped, recreated, stops };
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
    fd = openSync(seg, 'r+');
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
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
    const size = fstatSync(fd).size;
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
