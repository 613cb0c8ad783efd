// The ingester's metrics (contract §8), registered on a registry passed in,
// never at import time. Hot-path counters are resolved to label children once,
// so counting a request is a property lookup and an add.

import client, { type Counter, type Gauge, type Registry } from 'prom-client';
import { TENANT_DENIED_REASONS, type TenantDeniedReason } from '../errors.js';
import { FSYNC_BUCKETS, type WorkerStats } from './worker-stats.js';

export const ENDPOINTS = ['otlp', 'otlp_traces'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
export const REJECT_REASONS = ['queue_full', 'lane_cap', 'mem_breaker', 'rate_limited'] as const;
export type RejectReason = (typeof REJECT_REASONS)[number];

/** Upper bounds of siglake_ingest_lane_queue_depth. */
const DEPTH_BUCKETS: readonly number[] = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384];
const DEPTH_SUM = DEPTH_BUCKETS.length + 1;

interface CounterChild {
  inc(n?: number): void;
}

interface MetricValue {
  value: number;
  labels?: Record<string, string | number>;
  metricName?: string;
}

/** A metric whose values are computed at scrape time (from worker SABs). */
class ComputedMetric {
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
    readonly collect: () => MetricValue[],
  ) {}
  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.collect() };
  }
  reset(): void {}
}

export interface MetricsSources {
  /** Worker stats blocks, one per shard. */
  workerStats: () => readonly WorkerStats[];
  lanes: () => number;
  tenantsAdmitted: () => number;
  rssBytes: () => number;
}

export class IngestMetrics {
  readonly registry: Registry;
  readonly #requests: Counter<'endpoint' | 'status'>;
  readonly #requestChildren: Map<number, CounterChild>[];
  readonly #records: CounterChild[];
  readonly #denied: Record<TenantDeniedReason, CounterChild>;
  readonly #rejected: Record<RejectReason, CounterChild>;
  readonly #breakerRejected: Counter;
  readonly #backendErrors: Counter;
  /** Bucket counts (non-cumulative), then the sum at DEPTH_SUM. */
  readonly #depthCounts = new Float64Array(DEPTH_BUCKETS.length + 2);

  constructor(registry: Registry, sources: MetricsSources) {
    this.registry = registry;
    const registers = [registry];
    client.collectDefaultMetrics({ register: registry });

    const denied = new client.Counter({
      name: 'siglake_ingest_tenant_denied_total',
      help: 'Ingest requests refused with 403 at the tenant boundary, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.#denied = Object.fromEntries(TENANT_DENIED_REASONS.map((r) => [r, denied.labels(r)])) as Record<
      TenantDeniedReason,
      CounterChild
    >;
    for (const r of TENANT_DENIED_REASONS) this.#denied[r].inc(0);

    this.#requests = new client.Counter({
      name: 'siglake_ingest_requests_total',
      help: 'Ingest requests answered, by endpoint (otlp = logs, otlp_traces = traces) and HTTP status (gRPC answers count under the HTTP status of the same condition).',
      labelNames: ['endpoint', 'status'],
      registers,
    });
    this.#requestChildren = ENDPOINTS.map(() => new Map<number, CounterChild>());
    for (let e = 0; e < ENDPOINTS.length; e++) this.#requestChild(e, 200).inc(0);

    const records = new client.Counter({
      name: 'siglake_ingest_records_total',
      help: 'Log records or spans written to the WAL, by endpoint.',
      labelNames: ['endpoint'],
      registers,
    });
    this.#records = ENDPOINTS.map((e) => {
      const c = records.labels(e);
      c.inc(0);
      return c;
    });

    this.#breakerRejected = new client.Counter({
      name: 'siglake_ingest_mem_breaker_rejected_total',
      help: 'Ingest requests shed because RSS was at or above the memory breaker limit.',
      registers,
    });
    this.#backendErrors = new client.Counter({
      name: 'siglake_rate_budget_backend_errors_total',
      help: 'Rate-budget backend (Redis) failures or timeouts; each admitted the request unenforced. Alert on it.',
      registers,
    });
    const rejected = new client.Counter({
      name: 'siglake_ingest_rejected_total',
      help: 'Ingest requests refused by a limit, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.#rejected = Object.fromEntries(REJECT_REASONS.map((r) => [r, rejected.labels(r)])) as Record<
      RejectReason,
      CounterChild
    >;
    for (const r of REJECT_REASONS) this.#rejected[r].inc(0);

    // Observed on every admitted request: counted in a typed array (prom-client's
    // Histogram.observe allocates per call), exposed at scrape time.
    const depth = this.#depthCounts;
    registry.registerMetric(
      new ComputedMetric(
        'siglake_ingest_lane_queue_depth',
        'Commands already queued on the lane when a request was enqueued.',
        'histogram',
        () => {
          const values: MetricValue[] = [];
          let cumulative = 0;
          for (let i = 0; i <= DEPTH_BUCKETS.length; i++) {
            cumulative += depth[i]!;
            values.push({
              value: cumulative,
              labels: { le: i < DEPTH_BUCKETS.length ? String(DEPTH_BUCKETS[i]) : '+Inf' },
              metricName: 'siglake_ingest_lane_queue_depth_bucket',
            });
          }
          values.push({ value: depth[DEPTH_SUM]!, metricName: 'siglake_ingest_lane_queue_depth_sum' });
          values.push({ value: cumulative, metricName: 'siglake_ingest_lane_queue_depth_count' });
          return values;
        },
      ) as never,
    );

    new client.Gauge({
      name: 'siglake_ingest_lanes',
      help: '(tenant, index) writer lanes open in this process.',
      registers,
      collect(this: Gauge) {
        this.set(sources.lanes());
      },
    });
    new client.Gauge({
      name: 'siglake_ingest_tenants_admitted',
      help: 'Distinct tenants admitted by this process since it started.',
      registers,
      collect(this: Gauge) {
        this.set(sources.tenantsAdmitted());
      },
    });
    new client.Gauge({
      name: 'siglake_process_rss_bytes',
      help: 'Resident set size of the process, as the memory breaker sees it.',
      registers,
      collect(this: Gauge) {
        this.set(sources.rssBytes());
      },
    });

    const sum = (f: (s: WorkerStats) => number) => () => [
      { value: sources.workerStats().reduce((a, s) => a + f(s), 0) },
    ];
    registry.registerMetric(
      new ComputedMetric(
        'siglake_wal_bytes_written_total',
        'Bytes appended to WAL segments (headers and records).',
        'counter',
        sum((s) => s.walBytes),
      ) as never,
    );
    registry.registerMetric(
      new ComputedMetric(
        'siglake_wal_truncated_bytes_total',
        'Bytes cut from torn or corrupt WAL tails during recovery.',
        'counter',
        sum((s) => s.truncatedBytes),
      ) as never,
    );
    registry.registerMetric(
      new ComputedMetric(
        'siglake_wal_segments_created_total',
        'WAL segment files created.',
        'counter',
        sum((s) => s.segmentsCreated),
      ) as never,
    );
    registry.registerMetric(
      new ComputedMetric(
        'siglake_wal_write_errors_total',
        'WAL writes or fdatasyncs that failed; their requests were answered 500.',
        'counter',
        sum((s) => s.writeErrors),
      ) as never,
    );
    registry.registerMetric(
      new ComputedMetric('siglake_wal_fsync_seconds', 'Duration of one WAL fdatasync.', 'histogram', () => {
        const stats = sources.workerStats();
        const values: MetricValue[] = [];
        let cumulative = 0;
        for (let i = 0; i <= FSYNC_BUCKETS.length; i++) {
          for (const s of stats) cumulative += s.fsyncBucket(i);
          const le = i < FSYNC_BUCKETS.length ? String(FSYNC_BUCKETS[i]) : '+Inf';
          values.push({ value: cumulative, labels: { le }, metricName: 'siglake_wal_fsync_seconds_bucket' });
        }
        values.push({
          value: stats.reduce((a, s) => a + s.fsyncSum, 0),
          metricName: 'siglake_wal_fsync_seconds_sum',
        });
        values.push({
          value: stats.reduce((a, s) => a + s.fsyncCount, 0),
          metricName: 'siglake_wal_fsync_seconds_count',
        });
        return values;
      }) as never,
    );
  }

  #requestChild(endpoint: number, status: number): CounterChild {
    const m = this.#requestChildren[endpoint]!;
    let c = m.get(status);
    if (c === undefined) {
      c = this.#requests.labels(ENDPOINTS[endpoint]!, String(status));
      m.set(status, c);
    }
    return c;
  }

  /** One answered ingest request. `endpoint` is 0 for logs, 1 for traces. */
  request(endpoint: number, status: number): void {
    this.#requestChild(endpoint, status).inc();
  }

  records(endpoint: number, n: number): void {
    if (n > 0) this.#records[endpoint]!.inc(n);
  }

  denied(reason: TenantDeniedReason): void {
    this.#denied[reason].inc();
  }

  rejected(reason: RejectReason): void {
    this.#rejected[reason].inc();
  }

  memBreakerRejected(): void {
    this.#breakerRejected.inc();
  }

  backendError(): void {
    this.#backendErrors.inc();
  }

  queueDepth(depth: number): void {
    const b = DEPTH_BUCKETS;
    let i = 0;
    while (i < b.length && depth > b[i]!) i++;
    this.#depthCounts[i]! += 1;
    this.#depthCounts[DEPTH_SUM]! += depth;
  }
}
