// Labelled counters the compactor thread keeps for the registry's features
// (mapping errors per table, tables behind the current schema, retention)
// and hands to the ingester's /metrics after each round: the thread adds,
// `take()` drains the deltas into a message, and the acceptor thread's
// LabelledCompactorMetrics adds them to prom-client counters.

import client from 'prom-client';
import { scrapedGauge } from '../metrics/scraped.js';

export const LABELLED_COUNTERS = {
  siglake_compactor_mapping_errors_total: { help: 'Mapped-column values that did not convert to the column type (written as null), per table.', labels: ['table'] },
  siglake_compactor_truncated_values_total: {
    help: 'Values of landed rows cut to --compact-max-value-chars (a string, bytes, or an array or key-value list as JSON), per table (docs/iceberg.md).',
    labels: ['table'],
  },
  siglake_compactor_schema_behind_total: {
    help: 'Table commits written with a table schema older than this release (run siglake migrate), per namespace and table.',
    labels: ['namespace', 'table'],
  },
  siglake_retention_files_deleted_total: { help: 'Data files deleted by retention (after snapshot expiry), per table.', labels: ['table'] },
  siglake_retention_table_failures_total: {
    help: 'Retention of a table that failed in a round (logged as `retention failed for a table`; the next round retries), per table.',
    labels: ['table'],
  },
  siglake_compactor_deleted_index_records_total: {
    help: 'WAL records (one per accepted request) of an index deleted after they were written, dropped at landing instead of making the index again (docs/indexes.md).',
    labels: [],
  },
} as const;

export type LabelledCounterName = keyof typeof LABELLED_COUNTERS;

export interface LabelledDelta {
  readonly metric: LabelledCounterName;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** The message the compactor thread posts with a round's deltas. */
export interface LabelledMessage {
  readonly type: 'labelled';
  readonly deltas: readonly LabelledDelta[];
  /** When a retention round last finished (Unix seconds). */
  readonly retentionLastRun?: number;
}

export class LabelledCounts {
  readonly #pending = new Map<string, { metric: LabelledCounterName; labels: Record<string, string>; value: number }>();

  inc(metric: LabelledCounterName, labels: Record<string, string>, n = 1): void {
    if (n <= 0) return;
    const key = `${metric}\u0000${JSON.stringify(labels)}`;
    const cur = this.#pending.get(key);
    if (cur === undefined) this.#pending.set(key, { metric, labels, value: n });
    else cur.value += n;
  }

  /** The deltas since the last call. */
  take(): LabelledDelta[] {
    const out = [...this.#pending.values()];
    this.#pending.clear();
    return out;
  }
}

/** The counters on a prom-client registry, fed with deltas from the compactor thread. */
export class LabelledCompactorMetrics {
  readonly #counters = new Map<LabelledCounterName, client.Counter<string>>();
  #retentionLastRun = 0;

  constructor(registry: client.Registry) {
    scrapedGauge(
      registry,
      'siglake_retention_last_run_timestamp_seconds',
      'When the last retention round inside the compactor finished (Unix seconds; 0: none yet).',
      () => this.#retentionLastRun,
    );
    for (const [name, d] of Object.entries(LABELLED_COUNTERS)) {
      this.#counters.set(name as LabelledCounterName, new client.Counter({ name, help: d.help, labelNames: [...d.labels], registers: [registry] }));
    }
  }

  add(deltas: readonly LabelledDelta[], retentionLastRun?: number): void {
    if (retentionLastRun !== undefined) this.#retentionLastRun = retentionLastRun;
    for (const d of deltas) this.#counters.get(d.metric)?.inc(d.labels, d.value);
  }

  /** Whether `m` is a LabelledMessage (from the compactor thread). */
  static isMessage(m: unknown): m is LabelledMessage {
    return typeof m === 'object' && m !== null && (m as LabelledMessage).type === 'labelled' && Array.isArray((m as LabelledMessage).deltas);
  }
}
