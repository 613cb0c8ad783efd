// The ingester's metrics (contract §8), registered on a registry passed in,
// never at import time. Everything counted per request lives in typed arrays
// and is turned into Prometheus series only at scrape time: prom-client's
// labelled inc() and Histogram.observe() allocate on every call, and the hot
// path must not.

import client, { type Gauge, type Registry } from 'prom-client';
import { TENANT_DENIED_REASONS, type TenantDeniedReason } from '../errors.js';
import type { Logger } from '../log.js';
import { RefusalLog } from './refusal-log.js';
import { ComputedMetric, histogramValues, type MetricValue } from './scraped.js';
import { FSYNC_BUCKETS, type WorkerStats } from './worker-stats.js';

export const ENDPOINTS = ['otlp', 'otlp_traces'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
export const REJECT_REASONS = ['queue_full', 'lane_cap', 'mem_breaker', 'rate_limited', 'unknown_index'] as const;
export type RejectReason = (typeof REJECT_REASONS)[number];

/** Upper bounds of siglake_ingest_lane_queue_depth. */
const DEPTH_BUCKETS: readonly number[] = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384];

/** Every HTTP status the ingest endpoints answer with (a gRPC answer counts as its HTTP row). */
const STATUSES: readonly number[] = [200, 400, 401, 403, 404, 408, 413, 415, 429, 499, 500, 503, 431, 501];
const STATUS_SLOT = new Int8Array(600).fill(-1);
STATUSES.forEach((s, i) => {
  STATUS_SLOT[s] = i;
});

export interface MetricsSources {
  /** Worker stats blocks, one per shard. */
  workerStats: () => readonly WorkerStats[];
  lanes: () => number;
  tenantsAdmitted: () => number;
  rssBytes: () => number;
}

/** prom-client default metrics that `promtool check metrics` rejects. */
const PROMTOOL_LINT_FAILURES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export class IngestMetrics {
  readonly registry: Registry;
  /** [endpoint * STATUSES.length + status slot] */
  readonly #requests = new Float64Array(ENDPOINTS.length * STATUSES.length);
  readonly #records = new Float64Array(ENDPOINTS.length);
  readonly #denied = new Float64Array(TENANT_DENIED_REASONS.length);
  readonly #deniedSlot: Record<TenantDeniedReason, number>;
  readonly #rejected = new Float64Array(REJECT_REASONS.length);
  readonly #rejectedSlot: Record<RejectReason, number>;
  /** [0] breaker rejections, [1] rate budget backend errors, [2] gRPC streams refused past the bound, [3] bodies refused past the in-flight byte bound */
  readonly #singles = new Float64Array(5);
  /** Requests the client abandoned mid-upload, by endpoint. */
  readonly #aborted = new Float64Array(ENDPOINTS.length);
  /** Bytes of request bodies being received or queued now (set by the acceptors). */
  inflightBytes: () => number = () => 0;
  /** gRPC calls holding a --grpc-max-streams slot now (set by the gRPC acceptor). */
  grpcStreamsOpen: () => number = () => 0;
  /** Frames that found their shard's request ring full and waited in the acceptor's backlog (set by the server: the dispatcher's count). */
  ringBacklogFrames: () => number = () => 0;
  /** Non-cumulative bucket counts, then the sum. */
  readonly #depth = new Float64Array(DEPTH_BUCKETS.length + 2);
  #refusalLog: RefusalLog | undefined;

  constructor(registry: Registry, sources: MetricsSources) {
    this.registry = registry;
    const registers = [registry];
    client.collectDefaultMetrics({ register: registry });
    // Gauges named *_total fail `promtool check metrics` (only counters end in
    // _total); each has a twin without the suffix that stays (issue 17).
    for (const name of PROMTOOL_LINT_FAILURES) registry.removeSingleMetric(name);
    this.#deniedSlot = Object.fromEntries(TENANT_DENIED_REASONS.map((r, i) => [r, i])) as Record<TenantDeniedReason, number>;
    this.#rejectedSlot = Object.fromEntries(REJECT_REASONS.map((r, i) => [r, i])) as Record<RejectReason, number>;

    const computed = (name: string, help: string, type: 'counter' | 'gauge' | 'histogram', collect: () => MetricValue[]) =>
      registry.registerMetric(new ComputedMetric(name, help, type, collect) as never);

    computed(
      'siglake_ingest_tenant_denied_total',
      'Ingest requests refused with 403 at the tenant boundary, by reason.',
      'counter',
      () => TENANT_DENIED_REASONS.map((reason, i) => ({ value: this.#denied[i]!, labels: { reason } })),
    );
    computed(
      'siglake_ingest_requests_total',
      'Ingest requests answered, by endpoint (otlp = logs, otlp_traces = traces) and HTTP status (gRPC answers count under the HTTP status of the same condition).',
      'counter',
      () => {
        const values: MetricValue[] = [];
        for (let e = 0; e < ENDPOINTS.length; e++) {
          for (let k = 0; k < STATUSES.length; k++) {
            const v = this.#requests[e * STATUSES.length + k]!;
            // 200 exists at zero from start-up; other statuses appear as they happen.
            if (v > 0 || STATUSES[k] === 200) values.push({ value: v, labels: { endpoint: ENDPOINTS[e]!, status: String(STATUSES[k]) } });
          }
        }
        return values;
      },
    );
    computed('siglake_ingest_records_total', 'Log records or spans written to the WAL, by endpoint.', 'counter', () =>
      ENDPOINTS.map((endpoint, i) => ({ value: this.#records[i]!, labels: { endpoint } })),
    );
    computed(
      'siglake_ingest_mem_breaker_rejected_total',
      'Ingest requests shed because RSS was at or above the memory breaker limit.',
      'counter',
      () => [{ value: this.#singles[0]! }],
    );
    computed(
      'siglake_rate_budget_backend_errors_total',
      'Rate-budget backend (Redis) failures or timeouts: a rate-bucket error admitted its request unenforced; a budget-sync batch error admitted nothing (the replica enforces its own view). Alert on it.',
      'counter',
      () => [{ value: this.#singles[1]! }],
    );
    computed(
      'siglake_ingest_aborted_total',
      'Ingest requests the client abandoned before its answer (closed mid-body, or cancelled); everything they held was released.',
      'counter',
      () => ENDPOINTS.map((endpoint, i) => ({ value: this.#aborted[i]!, labels: { endpoint } })),
    );
    computed(
      'siglake_grpc_streams_refused_total',
      'gRPC calls refused UNAVAILABLE because --grpc-max-streams calls were already open.',
      'counter',
      () => [{ value: this.#singles[2]! }],
    );
    computed(
      'siglake_grpc_streams_preempted_total',
      'gRPC calls still waiting for their message, refused UNAVAILABLE to give their --grpc-max-streams slot to a tenant holding less than its fair share of the full pool.',
      'counter',
      () => [{ value: this.#singles[4]! }],
    );
    computed(
      'siglake_ingest_inflight_bytes_rejected_total',
      'Ingest requests refused 503 because bodies in flight already held --ingest-max-inflight-mib.',
      'counter',
      () => [{ value: this.#singles[3]! }],
    );
    computed('siglake_grpc_streams_open', 'gRPC calls holding a --grpc-max-streams slot now, from their headers to their status.', 'gauge', () => [
      { value: this.grpcStreamsOpen() },
    ]);
    computed('siglake_ingest_inflight_bytes', 'Bytes of request bodies being received or queued for a writer now.', 'gauge', () => [
      { value: this.inflightBytes() },
    ]);
    computed(
      'siglake_ingest_ring_backlog_total',
      "Frames (request bodies, and lane notices to a writer) that found their shard's request ring full and waited in the acceptor's backlog, copied once more: a worker that falls behind, or bodies in flight that outgrow its ring (twice --max-request-bytes).",
      'counter',
      () => [{ value: this.ringBacklogFrames() }],
    );
    computed('siglake_ingest_rejected_total', 'Ingest requests refused by a limit, by reason.', 'counter', () =>
      REJECT_REASONS.map((reason, i) => ({ value: this.#rejected[i]!, labels: { reason } })),
    );
    computed(
      'siglake_ingest_lane_queue_depth',
      'Commands already queued on the lane when a request was enqueued.',
      'histogram',
      () => histogramValues('siglake_ingest_lane_queue_depth', DEPTH_BUCKETS, (i) => this.#depth[i]!, this.#depth[DEPTH_BUCKETS.length + 1]!),
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

    const sum = (f: (s: WorkerStats) => number) => () => [{ value: sources.workerStats().reduce((a, s) => a + f(s), 0) }];
    computed('siglake_wal_bytes_written_total', 'Record bytes appended to WAL segments.', 'counter', sum((s) => s.walBytes));
    computed(
      'siglake_wal_truncated_bytes_total',
      'Bytes cut from torn or corrupt WAL tails during recovery.',
      'counter',
      sum((s) => s.truncatedBytes),
    );
    computed(
      'siglake_wal_journal_replayed_records_total',
      'WAL records written back into lane segments from the shard commit journals at start-up (batch mode).',
      'counter',
      sum((s) => s.journalReplayedRecords),
    );
    computed(
      'siglake_wal_checkpoints_total',
      'Commit journal checkpoints done: lane segments made durable and the journal retired up to that point (batch mode).',
      'counter',
      sum((s) => s.checkpoints),
    );
    computed(
      'siglake_wal_checkpoint_seconds_total',
      'Time spent in commit journal checkpoints (every one, failed ones too), from the lane syncs to the sealed markers; its rate is the share of time a checkpoint runs (batch mode).',
      'counter',
      sum((s) => s.checkpointSeconds),
    );
    computed(
      'siglake_wal_deferred_bytes_total',
      "WAL bytes a round wrote to the commit journal only, leaving them out of their lane segment until the checkpoint writes them there (read back from the journal): lanes whose segment descriptor the LRU had closed, so that a round does not open one file per lane (batch mode, --wal-defer-lane-writes).",
      'counter',
      sum((s) => s.deferredBytes),
    );
    computed(
      'siglake_wal_writebacks_total',
      "Early fdatasyncs of a lane's live segment between checkpoints, one per MiB the lane wrote, so that a checkpoint has little left to write (batch mode).",
      'counter',
      sum((s) => s.writebacks),
    );
    computed(
      'siglake_wal_journal_spare_uses_total',
      'Commit journal files made from a spare (a retired file reused, or the prefilled first one) instead of a new file (batch mode).',
      'counter',
      sum((s) => s.journalSpareUses),
    );
    computed(
      'siglake_wal_lane_dir_fsyncs_total',
      "Directory fsyncs that made new lanes' directories durable (the WAL root, tenant directories) before their first records: one per directory a round's new lanes share, not one per lane.",
      'counter',
      sum((s) => s.laneDirFsyncs),
    );
    computed(
      'siglake_wal_direct_rounds_total',
      'Rounds of one lane, at least --wal-direct-round-kib, made durable by an fdatasync of their segments instead of the commit journal (batch mode).',
      'counter',
      sum((s) => s.directRounds),
    );
    computed(
      'siglake_wal_write_errors_total',
      'WAL writes or fdatasyncs that failed; their requests were answered 500.',
      'counter',
      sum((s) => s.writeErrors),
    );
    computed('siglake_wal_fsync_seconds', 'Duration of one WAL fdatasync.', 'histogram', () => {
      const stats = sources.workerStats();
      return histogramValues(
        'siglake_wal_fsync_seconds',
        FSYNC_BUCKETS,
        (i) => stats.reduce((a, s) => a + s.fsyncBucket(i), 0),
        stats.reduce((a, s) => a + s.fsyncSum, 0),
      );
    });
  }

  /** One answered ingest request. `endpoint` is 0 for logs, 1 for traces. */
  request(endpoint: number, status: number): void {
    const slot = STATUS_SLOT[status] ?? -1;
    if (slot >= 0) this.#requests[endpoint * STATUSES.length + slot]! += 1;
    if (status !== 200) this.#refusalLog?.refused(status);
  }

  /** Logs refusals, sampled and rate-limited (src/metrics/refusal-log.ts). */
  logRefusals(log: Logger, periodMs?: number): void {
    this.#refusalLog = new RefusalLog(log, { ...(periodMs !== undefined ? { periodMs } : {}), reasons: (status) => this.#reasonCounts(status) });
  }

  /** Cumulative refusals by reason label behind a status: denials for 403, limits for 429 and 503. */
  #reasonCounts(status: number): Record<string, number> | undefined {
    const out: Record<string, number> = {};
    if (status === 403) TENANT_DENIED_REASONS.forEach((r, i) => (out[r] = this.#denied[i]!));
    else if (status === 429 || status === 503) {
      REJECT_REASONS.forEach((r, i) => {
        if ((r === 'rate_limited') === (status === 429)) out[r] = this.#rejected[i]!;
      });
    } else return undefined;
    return out;
  }

  records(endpoint: number, n: number): void {
    this.#records[endpoint]! += n;
  }

  denied(reason: TenantDeniedReason): void {
    this.#denied[this.#deniedSlot[reason]]! += 1;
  }

  rejected(reason: RejectReason): void {
    this.#rejected[this.#rejectedSlot[reason]]! += 1;
  }

  memBreakerRejected(): void {
    this.#singles[0]! += 1;
  }

  backendError(): void {
    this.#singles[1]! += 1;
  }

  aborted(endpoint: number): void {
    this.#aborted[endpoint]! += 1;
  }

  grpcStreamsRefused(): void {
    this.#singles[2]! += 1;
  }

  grpcStreamsPreempted(): void {
    this.#singles[4]! += 1;
  }

  inflightRefused(): void {
    this.#singles[3]! += 1;
  }

  queueDepth(depth: number): void {
    const b = DEPTH_BUCKETS;
    let i = 0;
    while (i < b.length && depth > b[i]!) i++;
    this.#depth[i]! += 1;
    this.#depth[DEPTH_BUCKETS.length + 1]! += depth;
  }
}
