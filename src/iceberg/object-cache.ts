// A bounded local file cache of warehouse objects, for readers that need a
// file path (DuckDB's read_parquet without the httpfs extension): the query
// server reads S3-hosted tables through it.
//
// Iceberg never rewrites an object in place (every data file, manifest and
// metadata file has a new, unique name), so a cached copy never goes stale:
// the cache is keyed by location alone and needs no revalidation.
//
// Files are `<sha256 of the location><extension>` in `dir` (the extension is
// kept: DuckDB picks a reader by it). A download goes to a temporary name and
// is renamed into place, so a crash leaves no half file under a real name;
// open() removes leftovers and picks up the copies a previous life left.
//
// acquire() pins the files a reader is about to open; an entry is evicted
// (least recently used first) only while unpinned, so the total may exceed
// maxBytes while pinned files need it, and shrinks back on release. Concurrent
// acquires of one location share one download. A FileStorage location is
// served from its own file (no copy) unless `copyLocal` is set.

import { createHash, randomBytes } from 'node:crypto';
import { readdir, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { makeDirs } from '../make-dirs.js';
import { join } from 'node:path';
import { FileStorage } from './file-storage.js';
import { IcebergError } from './iceberg-error.js';
import type { ObjectStorage } from './storage.js';

export interface ObjectCacheOptions {
  readonly storage: ObjectStorage;
  /** Directory the cache owns (created when missing). */
  readonly dir: string;
  /** Total bytes of unpinned cached files kept at most. */
  readonly maxBytes: number;
  /** Copy FileStorage objects too (default false: use their own files). */
  readonly copyLocal?: boolean;
}

/** Storage that can stream an object into a file (S3Storage); others are read whole. */
interface Downloader {
  downloadTo(location: string, path: string): Promise<number>;
}

export interface CacheStats {
  readonly hits: number;
  readonly misses: number;
  readonly evictions: number;
  /** Bytes of cached files now on disk. */
  readonly bytes: number;
  readonly files: number;
}

interface Entry {
  readonly name: string;
  readonly path: string;
  readonly size: number;
  pins: number;
}

/** Files pinned for one reader; release() when the reader is done with them. */
export interface CacheLease {
  /** Location → local file path, for every location acquired. */
  readonly paths: ReadonlyMap<string, string>;
  /** Unpins; resolves once files over the budget are evicted. Idempotent. */
  release(): Promise<void>;
}

const TMP_SUFFIX = '.part';
const NAME_RE = /^[0-9a-f]{64}(\.[A-Za-z0-9]{1,12})?$/;

export class ObjectCache {
  readonly #o: ObjectCacheOptions;
  /** LRU order: first is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  /** Downloads in progress, with how many acquires wait on each (each gets a pin). */
  readonly #inflight = new Map<string, { p: Promise<Entry>; waiters: number }>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;
  #evictions = 0;

  private constructor(o: ObjectCacheOptions) {
    this.#o = o;
  }

  static async open(o: ObjectCacheOptions): Promise<ObjectCache> {
    if (!(o.maxBytes > 0)) throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', 'the object cache needs maxBytes > 0');
    const c = new ObjectCache(o);
    await makeDirs(o.dir);
    const found: { name: string; size: number; mtimeMs: number }[] = [];
    for (const name of await readdir(o.dir)) {
      const path = join(o.dir, name);
      if (!NAME_RE.test(name)) {
        if (name.endsWith(TMP_SUFFIX)) await unlink(path).catch(() => undefined);
        continue;
      }
      const st = await stat(path).catch(() => null);
      if (st?.isFile()) found.push({ name, size: st.size, mtimeMs: st.mtimeMs });
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs);
    for (const f of found) c.#add({ name: f.name, path: join(o.dir, f.name), size: f.size, pins: 0 });
    await c.#evict();
    return c;
  }

  get stats(): CacheStats {
    return { hits: this.#hits, misses: this.#misses, evictions: this.#evictions, bytes: this.#bytes, files: this.#entries.size };
  }

  /** Local files for these locations, pinned until the lease is released. */
  async acquire(locations: readonly string[]): Promise<CacheLease> {
    const paths = new Map<string, string>();
    const pinned: Entry[] = [];
    const release = (): Promise<void> => {
      for (const e of pinned.splice(0)) e.pins--;
      return this.#evict();
    };
    try {
      for (const loc of new Set(locations)) {
        const local = this.#localFile(loc);
        if (local !== null) {
          paths.set(loc, local);
          continue;
        }
        const e = await this.#entry(loc);
        pinned.push(e);
        paths.set(loc, e.path);
      }
    } catch (err) {
      await release();
      throw err;
    }
    await this.#evict();
    let released = false;
    return {
      paths,
      release: () => {
        if (released) return Promise.resolve();
        released = true;
        return release();
      },
    };
  }

  #localFile(location: string): string | null {
    const s = this.#o.storage;
    if (this.#o.copyLocal === true || !(s instanceof FileStorage)) return null;
    return s.pathOf(location);
  }

  /** The entry, already pinned for the caller (pinned synchronously, so no eviction slips in between). */
  #entry(location: string): Promise<Entry> {
    const name = nameOf(location);
    const have = this.#entries.get(name);
    if (have !== undefined) {
      this.#hits++;
      have.pins++;
      // Most recently used goes last.
      this.#entries.delete(name);
      this.#entries.set(name, have);
      return Promise.resolve(have);
    }
    const pending = this.#inflight.get(name);
    if (pending !== undefined) {
      this.#hits++;
      pending.waiters++;
      return pending.p;
    }
    this.#misses++;
    const job = { p: Promise.resolve(null as unknown as Entry), waiters: 1 };
    job.p = this.#download(location, name, () => job.waiters).finally(() => this.#inflight.delete(name));
    this.#inflight.set(name, job);
    return job.p;
  }

  async #download(location: string, name: string, waiters: () => number): Promise<Entry> {
    const path = join(this.#o.dir, name);
    const tmp = `${path}.${randomBytes(6).toString('hex')}${TMP_SUFFIX}`;
    let size: number;
    try {
      const s = this.#o.storage as ObjectStorage & Partial<Downloader>;
      if (typeof s.downloadTo === 'function') {
        size = await s.downloadTo(location, tmp);
      } else {
        const bytes = await s.get(location);
        await writeFile(tmp, bytes);
        size = bytes.length;
      }
      await rename(tmp, path);
    } catch (e) {
      await unlink(tmp).catch(() => undefined);
      if (e instanceof IcebergError) throw e;
      throw new IcebergError('SIGLAKE_ICEBERG_STORAGE', `caching ${location} failed: ${(e as Error).message}`, { cause: e });
    }
    const entry: Entry = { name, path, size, pins: waiters() };
    this.#add(entry);
    return entry;
  }

  #add(e: Entry): void {
    this.#entries.set(e.name, e);
    this.#bytes += e.size;
  }

  async #evict(): Promise<void> {
    if (this.#bytes <= this.#o.maxBytes) return;
    for (const e of [...this.#entries.values()]) {
      if (this.#bytes <= this.#o.maxBytes) break;
      // Evictions run concurrently (one per release): one another run already took out, or a
      // newer copy of the same name, is not this run's to take (its size was subtracted twice,
      // and the cache grew to several times maxBytes while believing itself under it).
      if (e.pins > 0 || this.#entries.get(e.name) !== e) continue;
      this.#entries.delete(e.name);
      this.#bytes -= e.size;
      this.#evictions++;
      await unlink(e.path).catch(() => undefined);
    }
  }
}

function nameOf(location: string): string {
  const hash = createHash('sha256').update(location).digest('hex');
  const ext = /\.([A-Za-z0-9]{1,12})$/.exec(location.slice(location.lastIndexOf('/') + 1));
  return ext === null ? hash : `${hash}.${ext[1]}`;
}
