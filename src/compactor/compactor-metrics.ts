// Registers the compactor's series on a prom-client registry, read at scrape
// time from the CompactorStats block the compactor thread fills. No label
// carries a tenant.

import client from 'prom-client';
import { ComputedMetric, histogramValues, scrapedCounter, scrapedGauge } from '../metrics/scraped.js';
import { COMMIT_BUCKETS, type CompactorStats } from './compactor-stats.js';

export class CompactorMetrics {
  constructor(registry: client.Registry, stats: CompactorStats) {
    const counter = (name: string, help: string, read: () => number) => scrapedCounter(registry, name, help, read);
    counter('siglake_compactor_rounds_total', 'Compaction rounds run.', () => stats.rounds);
    counter(
      'siglake_compactor_busy_seconds_total',
      'Seconds the compactor spent in rounds, the one in progress included: its rate is the share of a core the compactor needs (near 1, it does not keep up).',
      () => stats.busySeconds(),
    );
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
    // _count is the +Inf bucket, as for every histogram read at scrape time.
    const commitSeconds = 'siglake_compactor_commit_seconds';
    registry.registerMetric(
      new ComputedMetric(
        commitSeconds,
        'Latency of one table commit (manifest, manifest list, metadata file, catalog swap, retries included).',
        'histogram',
        () => histogramValues(commitSeconds, COMMIT_BUCKETS, (i) => stats.commitBucket(i), stats.commitSum),
      ) as never,
    );
  }
}
