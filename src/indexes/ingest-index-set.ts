// What the ingester knows of the index registry (contract §6): the set of
// index names per tenant, read from the catalog at start and every
// ingester.indexes.refreshSecs after. The request path asks has(tenant,
// index): one Map lookup and one Set lookup, no allocation, no I/O. A
// refresh builds a new map off the request path and swaps it in; a failed
// refresh keeps the last good one (a catalog outage never turns known indexes
// into refusals). Until the first load succeeds has() answers undefined and
// ingest answers 503 (retryable), not 400.

import type { Logger } from 'pino';
import { SqlCatalog } from '../iceberg/sql-catalog.js';
import { DEFAULT_TENANT } from '../tenancy/identifier.js';
import { indexNamesByNamespace } from './index-names.js';

export interface IndexLookup {
  /** true/false once the registry was read; undefined before the first successful read. */
  has(tenant: string, index: string): boolean | undefined;
}

export class IngestIndexSet implements IndexLookup {
  readonly #catalog: SqlCatalog;
  readonly #refreshMs: number;
  readonly #log: Logger;
  #byTenant: Map<string, Set<string>> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #refreshing: Promise<void> | null = null;
  #failing = false;

  constructor(o: { catalogUrl: string; catalogName: string; refreshSecs: number; log: Logger }) {
    this.#catalog = SqlCatalog.open(o.catalogUrl, o.catalogName);
    this.#refreshMs = o.refreshSecs * 1000;
    this.#log = o.log;
  }

  has(tenant: string, index: string): boolean | undefined {
    const m = this.#byTenant;
    if (m === null) return undefined;
    const s = m.get(tenant);
    return s !== undefined && s.has(index);
  }

  /** Reads the registry once (waiting at most `waitMs`), then every refresh interval. */
  async start(waitMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.refresh(), new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
    this.#timer = setInterval(() => void this.refresh(), this.#refreshMs);
    this.#timer.unref();
  }

  /** One read of the registry; concurrent calls share it. */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#read().finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #read(): Promise<void> {
    try {
      const next = new Map<string, Set<string>>();
      for (const [ns, names] of await indexNamesByNamespace(this.#catalog)) {
        const tenant = ns === 'main' ? DEFAULT_TENANT : ns.startsWith('tenant_') ? ns.slice('tenant_'.length) : null;
        if (tenant === null) continue;
        const s = next.get(tenant);
        if (s === undefined) next.set(tenant, names);
        else for (const t of names) s.add(t);
      }
      this.#byTenant = next;
      if (this.#failing) this.#log.info('index registry readable again');
      this.#failing = false;
    } catch (e) {
      if (!this.#failing) {
        this.#log.warn(
          { err: (e as Error).message, known: this.#byTenant !== null },
          this.#byTenant === null ? 'index registry unreadable: requests naming an index get 503 until it is' : 'index registry refresh failed: keeping the last one read',
        );
      }
      this.#failing = true;
    }
  }

  async close(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    await this.#refreshing;
    await this.#catalog.close();
  }
}
