// Bounds the segment file descriptors one worker holds open across all its
// lanes: a least-recently-used set with a capacity. Ten thousand lanes share,
// say, 256 descriptors; a lane whose descriptor was evicted gets its segment
// reopened (`r+`, positional writes at its known offset) when next written.
//
// A descriptor leaves only clean: eviction fdatasyncs it first if it was
// written since its last sync (an error seen by a later fsync on a new
// descriptor could be lost, so it is taken now). A failed fdatasync at
// eviction is kept on the handle and thrown by the lane's next sync().
// A descriptor with an async fdatasync in flight is never closed under it: it
// lingers, counted, until the sync returns.
//
// With `lazyEviction` (the `batch` mode's commit journal holds what a segment
// lacks until a checkpoint) eviction only closes: a dirty handle stays dirty,
// and its next sync (a checkpoint's, or a refused round's) opens the file
// again just to fdatasync it; so does a checkpoint's sync of a segment the
// lane rotated away from or sealed (retired unsynced). Linux reports a writeback error to a descriptor
// opened after it as long as nobody has seen it yet (errseq), so the
// checkpoint's sync still learns of it.

import { NODE_FILE_OPS, writevAll, type FileOps } from './file-ops.js';
import { WalArgumentError } from './wal-argument-error.js';

/** One segment file as the cache tracks it. Fields are written by the cache only. */
export interface FdHandle {
  readonly path: string;
  /** The open descriptor, or -1 while evicted or closed. */
  readonly fd: number;
  /** Written since its last fdatasync started. */
  readonly dirty: boolean;
  /** Async fdatasyncs in flight. */
  readonly busy: number;
  /** No longer a lane's live segment: never reopened. */
  readonly retired: boolean;
  /** A failed fdatasync (at eviction, or an async one), kept for the owner's next sync(). */
  readonly error: Error | null;
  /** What waits for every async fdatasync of the handle in flight, or null when none is. */
  readonly inflight: Promise<void> | null;
}

interface Entry {
  path: string;
  fd: number;
  dirty: boolean;
  busy: number;
  retired: boolean;
  error: Error | null;
  inLru: boolean;
  /**
   * Every async fdatasync in flight, together: the newest covers every write
   * made before it started, but an error only one of them reports (Linux
   * reports a writeback error once per open file) is learnt by waiting on all.
   */
  inflight: Promise<void> | null;
}

export class FdCache {
  readonly #capacity: number;
  readonly #ops: FileOps;
  /** Open, reusable entries, least recently used first. */
  readonly #lru = new Map<Entry, true>();
  /** Entries out of the LRU whose descriptor waits for an fdatasync in flight before it is closed. */
  #lingering = 0;
  readonly #lazy: boolean;

  constructor(capacity: number, ops: FileOps = NODE_FILE_OPS, opts: { lazyEviction?: boolean } = {}) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new WalArgumentError(`fd cache capacity ${capacity} must be a positive integer`);
    this.#capacity = capacity;
    this.#ops = ops;
    this.#lazy = opts.lazyEviction === true;
  }

  get capacity(): number {
    return this.#capacity;
  }

  get ops(): FileOps {
    return this.#ops;
  }

  /** Descriptors this cache holds open now (at most capacity, plus any lingering for a sync in flight). */
  get openCount(): number {
    return this.#lru.size + this.#lingering;
  }

  /** Takes charge of a descriptor just opened on `path` (a new segment). */
  adopt(path: string, fd: number): FdHandle {
    const e: Entry = { path, fd, dirty: false, busy: 0, retired: false, error: null, inLru: false, inflight: null };
    this.#insert(e);
    return e;
  }

  /** The handle's descriptor, reopening its file if it was evicted. Throws what open throws. */
  fd(handle: FdHandle): number {
    const e = handle as Entry;
    if (e.retired) throw new WalArgumentError(`fd handle for ${e.path} is retired`);
    if (e.inLru) {
      this.#lru.delete(e);
      this.#lru.set(e, true);
      return e.fd;
    }
    if (e.fd >= 0) this.#lingering--; // evicted while a sync ran, not closed yet: take it back
    else e.fd = this.#ops.open(e.path, 'r+');
    this.#insert(e);
    return e.fd;
  }

  markDirty(handle: FdHandle): void {
    (handle as Entry).dirty = true;
  }

  /** Takes (and clears) an error left by a failed fdatasync at eviction. */
  takeError(handle: FdHandle): Error | null {
    const e = handle as Entry;
    const err = e.error;
    e.error = null;
    return err;
  }

  /**
   * Makes everything written through this handle durable: an async fdatasync
   * if it is dirty, and every one already in flight. A failure stays on the
   * handle (a later sync() rejects with it once more): after a failed
   * fdatasync the file's pages may be gone, and a new fdatasync would say 0.
   */
  sync(handle: FdHandle, before?: (fd: number) => void): Promise<void> {
    const e = handle as Entry;
    const err = this.takeError(e);
    if (err !== null) return Promise.reject(err);
    if (before !== undefined) {
      // Bytes to write first (a lane's deferred records): through the open
      // descriptor, or one opened for this sync only (the LRU is left as it is).
      if (e.fd < 0) return this.#syncClosed(e, before);
      try {
        before(e.fd);
      } catch (failure) {
        return Promise.reject(failure);
      }
      e.dirty = true;
    }
    if (this.#lazy && e.dirty && e.fd < 0) return this.#syncClosed(e);
    if (!e.dirty || e.fd < 0) return e.inflight ?? Promise.resolve();
    e.dirty = false;
    e.busy++;
    const p = this.#ops
      .fdatasync(e.fd)
      .catch((failure: unknown) => {
        e.error ??= failure as Error;
        throw failure;
      })
      .finally(() => {
        e.busy--;
        this.#closeIfIdle(e);
      });
    return this.#track(e, p);
  }

  /**
   * Makes the handle's file durable by `job`, which writes and fdatasyncs it
   * through a descriptor of its own (a checkpoint's deferred runs, written in
   * native code: src/wal/native-runs.ts), tracked as a sync in flight as
   * sync() tracks its own. The handle is clean from the start (a write
   * meanwhile makes it dirty again). A failed fdatasync stays on the handle
   * as sync()'s does; after a failed write or read the handle is dirty again
   * and keeps no error (the file's synced bytes are as they were).
   */
  syncBy(handle: FdHandle, job: () => Promise<void>): Promise<void> {
    const e = handle as Entry;
    const err = this.takeError(e);
    if (err !== null) return Promise.reject(err);
    e.dirty = false;
    const p = job().catch((failure: unknown) => {
      if ((failure as { syscall?: unknown }).syscall === 'fdatasync') e.error ??= failure as Error;
      else e.dirty = true;
      throw failure;
    });
    return this.#track(e, p);
  }

  /** Makes `e.inflight` wait for `p` too, until every sync in flight has returned. */
  #track(e: Entry, p: Promise<void>): Promise<void> {
    const prev = e.inflight;
    const all = prev === null ? p : Promise.all([prev, p]).then(() => undefined);
    e.inflight = all;
    all.then(
      () => {
        if (e.inflight === all) e.inflight = null;
      },
      () => {
        if (e.inflight === all) e.inflight = null;
      },
    );
    return all;
  }

  /**
   * Writes `iov` at `position` through the handle's descriptor, or through
   * one opened for this write only when it is closed (the LRU is left as it
   * is); the handle is then dirty. Throws what open and write throw.
   */
  writeNow(handle: FdHandle, iov: Uint8Array[], position: number): void {
    const e = handle as Entry;
    const own = e.fd < 0;
    const fd = own ? this.#ops.open(e.path, 'r+') : e.fd;
    try {
      e.dirty = true;
      writevAll(this.#ops, fd, iov, position);
    } finally {
      if (own) this.#ops.close(fd);
    }
  }

  /**
   * fdatasync on this thread, blocking it: cheaper than a thread-pool hop when
   * the caller has nothing else to do meanwhile (one dirty file per round).
   */
  syncNow(handle: FdHandle): void {
    const e = handle as Entry;
    const err = this.takeError(e);
    if (err !== null) throw err;
    if (this.#lazy && e.dirty && e.fd < 0) return this.#syncClosedNow(e);
    if (!e.dirty || e.fd < 0) return;
    e.dirty = false;
    try {
      this.#ops.fdatasyncSync(e.fd);
    } catch (failure) {
      e.dirty = true;
      throw failure;
    }
  }

  /**
   * The handle's file is done with. With `durable`, a dirty descriptor is
   * fdatasynced (synchronously) before it is closed; a failure is thrown after
   * the handle is retired all the same.
   */
  retire(handle: FdHandle, durable: boolean): void {
    const e = handle as Entry;
    if (e.retired) return;
    e.retired = true;
    this.#detach(e);
    let failure: unknown = null;
    if (durable && this.#lazy && e.fd < 0 && e.dirty) {
      try {
        this.#syncClosedNow(e);
      } catch (err) {
        failure = err;
      }
    } else if (durable && e.fd >= 0 && e.dirty) {
      try {
        this.#ops.fdatasyncSync(e.fd);
        e.dirty = false;
      } catch (err) {
        failure = err;
      }
    }
    this.#closeIfIdle(e);
    if (failure === null && durable) failure = this.takeError(e);
    if (failure !== null) throw failure;
  }

  /** As retire(handle, true), with the fdatasync on the thread pool. */
  async retireAsync(handle: FdHandle): Promise<void> {
    const e = handle as Entry;
    if (e.retired) return;
    const pending = this.sync(e);
    e.retired = true;
    this.#detach(e);
    try {
      await pending;
    } finally {
      this.#closeIfIdle(e);
    }
  }

  /** Closes every descriptor, without syncing (after the lanes were sealed, or on a failure path). */
  closeAll(): void {
    for (const e of [...this.#lru.keys()]) {
      this.#detach(e);
      this.#closeIfIdle(e);
    }
  }

  #insert(e: Entry): void {
    e.inLru = true;
    this.#lru.set(e, true);
    while (this.#lru.size > this.#capacity) {
      const oldest = this.#lru.keys().next().value as Entry;
      this.#evict(oldest);
    }
  }

  /** A dirty handle whose descriptor was closed lazily: open the file again only to fdatasync it (thread pool). */
  #syncClosed(e: Entry, before?: (fd: number) => void): Promise<void> {
    e.dirty = false;
    let fd: number;
    try {
      fd = this.#ops.open(e.path, 'r+');
    } catch (err) {
      e.dirty = true;
      return Promise.reject(err);
    }
    if (before !== undefined) {
      try {
        before(fd);
      } catch (err) {
        e.dirty = true;
        this.#ops.close(fd);
        return Promise.reject(err);
      }
    }
    const p = this.#ops
      .fdatasync(fd)
      .catch((err: unknown) => {
        e.error ??= err as Error;
        throw err;
      })
      .finally(() => {
        this.#ops.close(fd);
      });
    return this.#track(e, p);
  }

  /** As #syncClosed, blocking this thread. */
  #syncClosedNow(e: Entry): void {
    const fd = this.#ops.open(e.path, 'r+');
    try {
      this.#ops.fdatasyncSync(fd);
      e.dirty = false;
    } finally {
      this.#ops.close(fd);
    }
  }

  #evict(e: Entry): void {
    this.#detach(e);
    if (e.dirty && e.fd >= 0 && !this.#lazy) {
      try {
        this.#ops.fdatasyncSync(e.fd);
        e.dirty = false;
      } catch (err) {
        e.error = err as Error;
      }
    }
    this.#closeIfIdle(e);
  }

  /** Takes `e` out of the LRU; its descriptor, if open, now lingers until closed. */
  #detach(e: Entry): void {
    if (!e.inLru) return;
    this.#lru.delete(e);
    e.inLru = false;
    if (e.fd >= 0) this.#lingering++;
  }

  #closeIfIdle(e: Entry): void {
    if (e.inLru || e.busy > 0 || e.fd < 0) return;
    const fd = e.fd;
    e.fd = -1;
    this.#lingering--;
    try {
      this.#ops.close(fd);
    } catch (err) {
      e.error ??= err as Error;
    }
  }
}
