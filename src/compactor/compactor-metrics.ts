// Registers the compactor's series on a prom-client registry, read at scrape
// time from the CompactorStats block the compactor thread fills. No label
// carries a tenant.

import client from 'prom-client';
import { scrapedCounter, scrapedGauge } from '../metrics/scraped.js';
import { COMMIT_BUCKETS, type CompactorStats } from './compactor-stats.js';

export class CompactorMetrics {
  constructor(registry: client.Registry, stats: CompactorStats) {
    const counter = (name: string, help: string, read: () => number) => scrapedCounter(registry, name, help, read);
    counter('siglake_compactor_rounds_total', 'Compaction rounds run.', () => stats.rounds);
    counter('siglake_compactor_round_errors_total', 'Compaction rounds that stopped on an error (retried next round).', () => stats.roundErrors);
    counter('siglake_compactor_commits_total', 'Append snapshots committed to Iceberg tables.', () => stats.commits);
    counter('siglake_compactor_commit_conflicts_total', 'Catalog compare-and-swaps lost to another writer (then retried).', () => stats.conflicts);
    counter('siglake_compactor_commit_failures_total', 'Table commits that failed (their segments stay for the next round).', () => stats.commitFailures);
    counter('siglake_compactor_files_written_total', 'Parquet data files written.', () => stats.files);
    counter('siglake_compactor_bytes_written_total', 'Bytes of Parquet data files written.', () => stats.bytes);
    counter('siglake_compactor_rows_written_total', 'Rows (log records and spans) written to data files.', () => stats.rows);
    counter('siglake_compactor_wal_bytes_read_total', 'Bytes of sealed WAL segments read.', () => stats.walBytes);
    counter('siglake_compactor_segments_retired_total', 'WAL segments retired after their commit was visible.', () => stats.segmentsRetired);
    counter('siglake_compactor_corrupt_segments_total', 'Sealed WAL segments found corrupt (their good prefix is landed; the file is kept).', () => stats.corruptSegments);
    scrapedGauge(registry, 'siglake_compactor_lag_seconds', 'Age of the oldest WAL segment of this process not yet landed in Iceberg (0 when none).', () => stats.lagSeconds);
    new CommitHistogram(registry, stats);
  }
}

interface MetricValue {
  value: number;
  labels?: Record<string, string>;
  metricName: string;
}

/** siglake_compactor_commit_seconds, copied from the stats block at scrape time. */
class CommitHistogram {
  readonly name = 'siglake_compactor_commit_seconds';
  readonly help = 'Latency of one table commit (manifest, manifest list, metadata file, catalog swap, retries included).';
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #stats: CompactorStats;

  constructor(registry: client.Registry, stats: CompactorStats) {
    this.#stats = stats;
    registry.registerMetric(this as never);
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    const s = this.#stats;
    const values: MetricValue[] = [];
    let cum = 0;
    for (let i = 0; i <= COMMIT_BUCKETS.length; i++) {
      cum += s.commitBucket(i);
      const le = i < COMMIT_BUCKETS.length ? String(COMMIT_BUCKETS[i]) : '+Inf';
      values.push({ value: cum, labels: { le }, metricName: `${this.name}_bucket` });
    }
    values.push({ value: s.commitSum, metricName: `${this.name}_sum` });
    values.push({ value: s.commitCount, metricName: `${this.name}_count` });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {}
}
