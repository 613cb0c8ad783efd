// The query server's metrics, on its own registry. Every labelled series
// that a user alerts on exists at zero from start-up (contract query §4).

import client, { type Registry } from 'prom-client';
import type { CacheStats } from '../iceberg/object-cache.js';
import { scrapedCounter, scrapedGauge } from '../metrics/scraped.js';
import { QUERY_DENIED_REASONS, type QueryDeniedReason } from './query-error.js';

export const QUERY_ENDPOINTS = ['sql', 'sql_shard', 'tables', 'indexes'] as const;
export type QueryEndpoint = (typeof QUERY_ENDPOINTS)[number];

export class QueryMetrics {
  readonly registry: Registry;
  readonly #denied: client.Counter<'reason'>;
  readonly #requests: client.Counter<'endpoint' | 'status'>;
  readonly #duration: client.Histogram<'endpoint'>;
  readonly #timeouts: client.Counter;
  readonly #shardErrors: client.Counter;
  readonly #ambiguous: client.Counter | undefined;
  /** Only with --tenants-file: reloads of the file refused (the previous set stays in force). */
  readonly reloadFailures: client.Counter | undefined;

  constructor(
    gauges: { running: () => number; contexts: () => number; cache: () => CacheStats },
    opts: { declaredTenants?: boolean; declared?: () => number } = {},
  ) {
    const registry = new client.Registry();
    this.registry = registry;
    this.#denied = new client.Counter({
      name: 'siglake_query_tenant_denied_total',
      help: 'Queries refused by tenant routing, by reason (missing, invalid, unlisted claim).',
      labelNames: ['reason'],
      registers: [registry],
    });
    for (const r of QUERY_DENIED_REASONS) this.#denied.inc({ reason: r }, 0);
    this.#requests = new client.Counter({
      name: 'siglake_query_requests_total',
      help: 'Query API requests answered, by endpoint and HTTP status.',
      labelNames: ['endpoint', 'status'],
      registers: [registry],
    });
    for (const e of QUERY_ENDPOINTS) for (const s of [200, 400, 401, 403, 408, 429, 499, 500, 502, 503, 504]) this.#requests.inc({ endpoint: e, status: String(s) }, 0);
    this.#duration = new client.Histogram({
      name: 'siglake_query_duration_seconds',
      help: 'Time from a request to its answer, by endpoint (successful queries).',
      labelNames: ['endpoint'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    });
    this.#timeouts = new client.Counter({
      name: 'siglake_query_timeouts_total',
      help: 'Queries interrupted after query.timeoutSecs (answered 504).',
      registers: [registry],
    });
    this.#shardErrors = new client.Counter({
      name: 'siglake_query_shard_errors_total',
      help: 'Forwarded queries whose shard did not answer (answered 502).',
      registers: [registry],
    });
    // Only with --tenants-file (declared-tenants.md §2): the ingester's name, on this server's registry.
    this.#ambiguous = opts.declaredTenants === true
      ? new client.Counter({
          name: 'siglake_tenant_ambiguous_total',
          help: 'Requests refused because the verified principal matches more than one declared tenant (403 SIGLAKE_TENANT_AMBIGUOUS).',
          registers: [registry],
        })
      : undefined;
    // The ingester's names for the tenants file's reloads, on this server's registry.
    this.reloadFailures = opts.declaredTenants === true
      ? new client.Counter({
          name: 'siglake_tenants_reload_failures_total',
          help: 'Reloads of the tenants file refused (the previous set stays in force).',
          registers: [registry],
        })
      : undefined;
    if (opts.declaredTenants === true) {
      const declared = opts.declared ?? (() => 0);
      scrapedGauge(registry, 'siglake_tenants_declared', 'Tenants declared by the tenants file now loaded.', () => declared());
    }
    scrapedGauge(registry, 'siglake_query_running', 'Slots of query.maxConcurrentPerTenant held now, all tenants together: queries, table listings and index API calls, and work still going on after its 504.', () => gauges.running());
    // The file cache of an s3:// warehouse (docs/query.md); all zero for a local one.
    scrapedGauge(registry, 'siglake_query_cache_bytes', 'Bytes of data-file copies in query.cacheDir now (above query.cacheMaxMib only while running queries pin them).', () => gauges.cache().bytes);
    scrapedGauge(registry, 'siglake_query_cache_files', 'Data-file copies in query.cacheDir now.', () => gauges.cache().files);
    for (const [name, help, of] of [
      ['siglake_query_cache_hits_total', 'Data files a query found in the cache (or already being downloaded).', (c: CacheStats) => c.hits],
      ['siglake_query_cache_misses_total', 'Data files downloaded from the warehouse into the cache.', (c: CacheStats) => c.misses],
      ['siglake_query_cache_evictions_total', 'Copies removed from the cache to keep it within query.cacheMaxMib.', (c: CacheStats) => c.evictions],
    ] as const) {
      // The cache keeps the running total; mirror it.
      scrapedCounter(registry, name, help, () => of(gauges.cache()));
    }
    scrapedGauge(registry, 'siglake_query_tenant_contexts', 'Tenant contexts (embedded engine instances) held now.', () => gauges.contexts());
  }

  ambiguous(): void {
    this.#ambiguous?.inc();
  }

  denied(reason: QueryDeniedReason): void {
    this.#denied.inc({ reason });
  }

  /** `forwarded`: a coordinator passing a shard's answer on (the shard counted its own timeout). */
  answered(endpoint: QueryEndpoint, status: number, seconds: number, forwarded = false): void {
    this.#requests.inc({ endpoint, status: String(status) });
    if (status === 200) this.#duration.observe({ endpoint }, seconds);
    if (status === 504 && !forwarded) this.#timeouts.inc();
    if (status === 502) this.#shardErrors.inc();
  }
}
