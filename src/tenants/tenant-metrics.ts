// Metrics of declared tenants (declared-tenants.md §4): new names only, never
// a label added to a shipped series. Label values are declared tenant ids, so
// the series count is bounded by the tenants file; a tenant removed by a
// reload takes its series with it.

import client, { type Registry } from 'prom-client';
import { scrapedCounter, scrapedGauge } from '../metrics/scraped.js';

export const OUTCOMES = ['accepted', 'rate_limited', 'budget_exhausted', 'index_not_in_tenant', 'refused'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** The per-tenant children, looked up once per tenant per load (inc() then allocates nothing). */
export interface TenantSeries {
  readonly outcome: readonly client.Counter.Internal[];
  readonly records: client.Counter.Internal;
  readonly bytes: client.Counter.Internal;
}

export class TenantMetrics {
  readonly #requests: client.Counter<'tenant' | 'outcome'>;
  readonly #records: client.Counter<'tenant'>;
  readonly #bytes: client.Counter<'tenant'>;
  readonly ambiguous: client.Counter;
  readonly reloadFailures: client.Counter;
  readonly auditDropped: client.Counter;

  constructor(
    registry: Registry,
    sources: {
      remaining: () => { tenant: string; unit: 'records' | 'bytes'; value: number }[];
      declared: () => number;
      auditDropped: () => number;
    },
  ) {
    const registers = [registry];
    this.#requests = new client.Counter({
      name: 'siglake_tenant_requests_total',
      help: 'Ingest requests of principals of declared tenants, by tenant and outcome.',
      labelNames: ['tenant', 'outcome'],
      registers,
    });
    this.#records = new client.Counter({
      name: 'siglake_tenant_records_total',
      help: 'Records (log records and spans) written for declared tenants.',
      labelNames: ['tenant'],
      registers,
    });
    this.#bytes = new client.Counter({
      name: 'siglake_tenant_bytes_total',
      help: 'OTLP protobuf bytes stored (whatever the transport and encoding) for declared tenants.',
      labelNames: ['tenant'],
      registers,
    });
    new client.Gauge({
      name: 'siglake_tenant_budget_remaining',
      help: "What is left of a declared tenant's budget in its current UTC period, by unit (records, bytes).",
      labelNames: ['tenant', 'unit'],
      registers,
      collect() {
        this.reset();
        for (const r of sources.remaining()) this.set({ tenant: r.tenant, unit: r.unit }, r.value);
      },
    });
    scrapedGauge(registry, 'siglake_tenants_declared', 'Tenants declared by the tenants file now loaded.', () => sources.declared());
    this.ambiguous = new client.Counter({
      name: 'siglake_tenant_ambiguous_total',
      help: 'Requests refused because the verified principal matched two or more declared tenants.',
      registers,
    });
    this.reloadFailures = new client.Counter({
      name: 'siglake_tenants_reload_failures_total',
      help: 'Reloads of the tenants file refused (the previous set stays in force).',
      registers,
    });
    this.auditDropped = scrapedCounter(registry, 'siglake_audit_events_dropped_total', 'Audit events dropped because the audit sink could not keep up.', () => sources.auditDropped());
  }

  series(tenant: string): TenantSeries {
    return {
      outcome: OUTCOMES.map((outcome) => this.#requests.labels({ tenant, outcome })),
      records: this.#records.labels({ tenant }),
      bytes: this.#bytes.labels({ tenant }),
    };
  }

  forget(tenant: string): void {
    for (const outcome of OUTCOMES) this.#requests.remove({ tenant, outcome });
    this.#records.remove({ tenant });
    this.#bytes.remove({ tenant });
  }
}
