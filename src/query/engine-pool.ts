// The tenant contexts of this server: at most one current TenantEngine per
// tenant, for the snapshots its tables had when it was built.
//
// Each query reads the catalog first (the tenant's tables and their
// metadata_location): the tables as the catalog has them when the query is
// planned. If nothing changed, the current context serves it; after a commit
// a new context is built over the new files (resolution cached by
// metadata_location) and the old one closes when its last query ends. Idle
// contexts beyond MAX_IDLE_CONTEXTS are closed, least recently used first.
//
// The engine opens local paths (local-files.ts): a context's data files are
// pinned while it is built and for the length of each query, and the engine
// may open exactly those paths of this tenant, never another tenant's copies.

import type { CacheStats } from '../iceberg/object-cache.js';
import type { SqlCatalog } from '../iceberg/sql-catalog.js';
import { namespaceOf } from '../tenancy/identifier.js';
import type { LocalFiles, LocalFilesLease } from './local-files.js';
import type { TableFilesReader } from './table-files.js';
import { TenantEngine } from './tenant-engine.js';

const MAX_IDLE_CONTEXTS = 32;
/** A context with a table it could not read (a transient storage error, a file since restored) tries again after this long. */
const BROKEN_RETRY_MS = 10_000;

interface Context {
  readonly tenant: string;
  readonly fingerprint: string;
  readonly engine: TenantEngine;
  readonly seq: number;
  /** Every data file location the engine reads. */
  readonly locations: readonly string[];
  /** The files pinned while building, let go once the first query pinned its own. */
  buildLease: LocalFilesLease | undefined;
  refs: number;
  retired: boolean;
  /** When it was built (Date.now()): one with a table it could not read is built again after BROKEN_RETRY_MS. */
  readonly builtAt: number;
}

export interface Lease {
  readonly engine: TenantEngine;
  release(): void;
}

export class EnginePool {
  readonly #catalog: SqlCatalog;
  readonly #reader: TableFilesReader;
  readonly #files: LocalFiles;
  readonly #memoryLimitMib: number;
  readonly #onUnreadable: ((namespace: string, table: string, err: unknown) => void) | undefined;
  /** tenant → current context; Map order is least recently used first. */
  readonly #current = new Map<string, Context>();
  readonly #building = new Map<string, Promise<Context>>();
  #seq = 0;
  #closed = false;

  /** `onUnreadable`: a table's metadata could not be read while a context was built (it is left out of the context). */
  constructor(
    catalog: SqlCatalog,
    reader: TableFilesReader,
    files: LocalFiles,
    opts: { memoryLimitMib: number; onUnreadable?: (namespace: string, table: string, err: unknown) => void },
  ) {
    this.#catalog = catalog;
    this.#reader = reader;
    this.#files = files;
    this.#memoryLimitMib = opts.memoryLimitMib;
    this.#onUnreadable = opts.onUnreadable;
  }

  /** The file cache's counters. */
  get fileStats(): CacheStats {
    return this.#files.stats;
  }

  /** Tenant contexts held now. */
  get size(): number {
    return this.#current.size;
  }

  /**
   * The tenant's context at the catalog's current snapshots; call release()
   * when the query ends. `indexes`: the tenant's declared index subset (its
   * other indexes are not in the context); undefined: all.
   */
  async acquire(tenant: string, indexes?: ReadonlySet<string>): Promise<Lease> {
    const ns = namespaceOf(tenant);
    const seq = ++this.#seq;
    // One catalog statement per query (about 0.1 ms on SQLite, one round trip on PostgreSQL):
    // every query compares the tables' current metadata locations, no time-based cache.
    // A change of the subset changes the names, so the fingerprint: a new context.
    const tables = (await this.#catalog.tableLocations(ns))
      .filter((t) => tableVisible(t.name, indexes))
      .map((t) => ({ name: t.name, location: t.metadataLocation }));
    const fingerprint = tables.map((t) => `${t.name}\0${t.location}`).join('\n');
    let ctx = this.#current.get(tenant);
    const stale = ctx !== undefined && ctx.engine.broken.size > 0 && Date.now() - ctx.builtAt > BROKEN_RETRY_MS;
    if (ctx === undefined || ctx.fingerprint !== fingerprint || stale) {
      const key = `${tenant}\n${fingerprint}`;
      let p = this.#building.get(key);
      if (p === undefined) {
        p = this.#build(tenant, ns, fingerprint, tables, seq).finally(() => this.#building.delete(key));
        this.#building.set(key, p);
      }
      ctx = await p;
      // Retired and closed by a newer context between the build and now: plan again.
      if (ctx.engine.closed) return this.acquire(tenant, indexes);
    }
    ctx.refs++;
    const c = ctx;
    if (this.#current.get(tenant) === c) {
      this.#current.delete(tenant);
      this.#current.set(tenant, c);
    }
    let files: LocalFilesLease;
    try {
      files = await this.#files.acquire(c.locations);
    } catch (e) {
      this.#unref(c);
      throw e;
    }
    const built = c.buildLease;
    c.buildLease = undefined;
    if (built !== undefined) void built.release().catch(() => undefined);
    let released = false;
    return {
      engine: c.engine,
      release: () => {
        if (released) return;
        released = true;
        void files.release().catch(() => undefined);
        this.#unref(c);
      },
    };
  }

  #unref(c: Context): void {
    c.refs--;
    if (c.retired && c.refs === 0) this.#closeContext(c);
    this.#evictIdle();
  }

  #closeContext(c: Context): void {
    c.engine.close();
    const built = c.buildLease;
    c.buildLease = undefined;
    if (built !== undefined) void built.release().catch(() => undefined);
  }

  async #build(tenant: string, ns: string, fingerprint: string, tables: { name: string; location: string }[], seq: number): Promise<Context> {
    // A table whose metadata or manifests cannot be read (gone, damaged, another engine's delete
    // files) answers 500 when a query names it; the tenant's other tables answer as ever. (One such
    // table failed every query of its tenant, SELECT 1 included, with the server's path in the answer.)
    const resolved = await Promise.all(
      tables.map(async (t) => {
        try {
          const { files, rowCount, columns } = await this.#reader.read(ns, t.location);
          return { name: t.name, files, rowCount, columns };
        } catch (e) {
          this.#onUnreadable?.(ns, t.name, e);
          return { name: t.name, files: [] as string[], rowCount: undefined, columns: undefined, unreadable: true };
        }
      }),
    );
    const locations = resolved.flatMap((t) => t.files);
    const lease = await this.#files.acquire(locations);
    let engine: TenantEngine;
    try {
      engine = await TenantEngine.open(
        resolved.map((t) => ({ name: t.name, files: t.files.map((f) => lease.paths.get(f)!), rowCount: t.rowCount, columns: t.columns, unreadable: 'unreadable' in t })),
        { memoryLimitMib: this.#memoryLimitMib, checked: this.#current.get(tenant)?.engine.checked },
      );
    } catch (e) {
      await lease.release();
      throw e;
    }
    const ctx: Context = { tenant, fingerprint, engine, seq, locations, buildLease: lease, refs: 0, retired: false, builtAt: Date.now() };
    const old = this.#current.get(tenant);
    if (this.#closed || (old !== undefined && old.seq > seq)) {
      // Planned before the current one (or the pool is closing): serve this query, then close.
      ctx.retired = true;
      return ctx;
    }
    if (old !== undefined) this.#retire(old);
    this.#current.set(tenant, ctx);
    this.#evictIdle();
    return ctx;
  }

  #retire(ctx: Context): void {
    if (this.#current.get(ctx.tenant) === ctx) this.#current.delete(ctx.tenant);
    ctx.retired = true;
    if (ctx.refs === 0) this.#closeContext(ctx);
  }

  #evictIdle(): void {
    if (this.#current.size <= MAX_IDLE_CONTEXTS) return;
    for (const ctx of [...this.#current.values()]) {
      if (this.#current.size <= MAX_IDLE_CONTEXTS) break;
      if (ctx.refs === 0) this.#retire(ctx);
    }
  }

  /** Closes every idle context now and every busy one when its query ends. */
  close(): void {
    this.#closed = true;
    for (const ctx of [...this.#current.values()]) this.#retire(ctx);
  }
}

/** Whether a query sees table `name` of its namespace: logs and traces always, an index when `indexes` (a declared subset) is undefined or holds it. */
export function tableVisible(name: string, indexes: ReadonlySet<string> | undefined): boolean {
  return indexes === undefined || name === 'logs' || name === 'traces' || indexes.has(name);
}
