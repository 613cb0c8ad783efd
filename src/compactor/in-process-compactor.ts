// The compactor inside `siglake ingest` (compactor.enabled): a worker thread
// that the Ingester starts once WAL recovery is done and stops at shutdown.
// Its figures reach the ingester's /metrics through a SharedArrayBuffer.

import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type client from 'prom-client';
import { CompactorMetrics } from './compactor-metrics.js';
import { earlierLifeBoundary, type CompactorSettings } from './compactor-setup.js';
import { CompactorStats } from './compactor-stats.js';
import type { CompactorThreadData, RoundMessage } from './compactor-thread.js';
import { LabelledCompactorMetrics } from '../indexes/labelled-counts.js';
import { scrapedGauge } from '../metrics/scraped.js';

/** Old-generation heap of the compactor thread. */
const COMPACTOR_HEAP_MIB = 512;

export class InProcessCompactor {
  readonly #settings: CompactorSettings;
  readonly #log: Logger;
  readonly #stats = CompactorStats.create();
  #worker: Worker | null = null;
  #exited: Promise<void> | null = null;
  #boundary: Map<string, number> | null = null;
  readonly #maxFailingMs: number;
  readonly #now: () => number;
  /** When the current run of failed rounds began (null while the last round did not fail). */
  #failingSince: number | null = null;
  #lastError = '';
  readonly #labelled: LabelledCompactorMetrics;

  constructor(opts: {
    settings: CompactorSettings & { compactMaxFailingSecs: number; retentionLogsDays: number; retentionTracesDays: number; retentionSnapshotMaxAgeHours: number };
    log: Logger;
    registry: client.Registry;
    now?: () => number;
  }) {
    this.#settings = {
      walDir: opts.settings.walDir,
      catalogUrl: opts.settings.catalogUrl,
      catalogName: opts.settings.catalogName,
      warehousePath: opts.settings.warehousePath,
      warehouseS3Endpoint: opts.settings.warehouseS3Endpoint,
      warehouseS3Region: opts.settings.warehouseS3Region,
      warehouseS3ForcePathStyle: opts.settings.warehouseS3ForcePathStyle,
      compactIntervalSecs: opts.settings.compactIntervalSecs,
      compactMaxRoundBytes: opts.settings.compactMaxRoundBytes,
      logLevel: opts.settings.logLevel,
      // Retention runs inside the compactor loop (src/retention).
      retentionLogsDays: opts.settings.retentionLogsDays,
      retentionTracesDays: opts.settings.retentionTracesDays,
      retentionSnapshotMaxAgeHours: opts.settings.retentionSnapshotMaxAgeHours,
    };
    this.#log = opts.log;
    this.#maxFailingMs = opts.settings.compactMaxFailingSecs * 1000;
    this.#now = opts.now ?? Date.now;
    new CompactorMetrics(opts.registry, this.#stats);
    this.#labelled = new LabelledCompactorMetrics(opts.registry);
    scrapedGauge(
      opts.registry,
      'siglake_compactor_failing_seconds',
      'Seconds since the first of the compaction rounds that have all failed in a row (0 while the last round did not fail).',
      () => (this.#failingSince === null ? 0 : Math.max(0, (this.#now() - this.#failingSince) / 1000)),
    );
    scrapedGauge(
      opts.registry,
      'siglake_compactor_not_ready',
      '1 while failing compaction rounds hold /readyz at 503 (failing for longer than compactor.maxFailingSecs), else 0.',
      () => (this.notReadyReason() === undefined ? 0 : 1),
    );
  }

  /**
   * Why the compactor holds the ingester unready: every round with work has
   * failed for longer than compactor.maxFailingSecs (issue 19). Undefined
   * otherwise, and always when the bound is 0.
   */
  notReadyReason(): string | undefined {
    if (this.#maxFailingMs === 0 || this.#failingSince === null) return undefined;
    const ms = this.#now() - this.#failingSince;
    if (ms <= this.#maxFailingMs) return undefined;
    return `compactor: every round has failed for ${Math.floor(ms / 1000)} s (compactor.maxFailingSecs ${this.#maxFailingMs / 1000}): ${this.#lastError}`;
  }

  #onMessage(m: unknown): void {
    if (LabelledCompactorMetrics.isMessage(m)) {
      this.#labelled.add(m.deltas, m.retentionLastRun);
      return;
    }
    if (typeof m !== 'object' || m === null || (m as RoundMessage).type !== 'round') return;
    const outcome = (m as RoundMessage).outcome;
    if (!outcome.failed) {
      if (this.#failingSince !== null) this.#log.info('compaction rounds succeed again');
      this.#failingSince = null;
      this.#lastError = '';
      return;
    }
    this.#failingSince ??= this.#now();
    this.#lastError = outcome.error;
  }

  /**
   * Notes which segments belong to earlier lives of the ingester. Must run
   * before the writer workers start: afterwards a lane's highest segment may
   * be one they are appending to (regression: compactor-lands-live-segment).
   */
  markEarlierLife(): void {
    this.#boundary = earlierLifeBoundary(this.#settings.walDir);
  }

  /** Starts the compactor thread. */
  start(): void {
    if (this.#worker !== null) return;
    if (this.#boundary === null) throw new Error('InProcessCompactor.markEarlierLife() must run before the writers start');
    const data: CompactorThreadData = { settings: this.#settings, statsSab: this.#stats.sab, boundary: [...this.#boundary] };
    const worker = new Worker(new URL('./compactor-thread.js', import.meta.url), {
      workerData: data,
      name: 'siglake-compactor',
      // A bounded heap makes V8 collect a round's garbage instead of growing
      // toward its default limit (GBs on a big host): RSS counts toward the breaker.
      resourceLimits: { maxOldGenerationSizeMb: COMPACTOR_HEAP_MIB },
    });
    this.#worker = worker;
    this.#exited = new Promise((resolve) => worker.once('exit', () => resolve()));
    worker.on('message', (m: unknown) => this.#onMessage(m));
    worker.on('error', (e) => {
      this.#log.error({ err: e.message }, 'the compactor thread died; WAL segments wait for the next start');
      // Nothing lands until a restart: readiness goes once the bound has passed.
      this.#onMessage({ type: 'round', outcome: { failed: true, error: `the compactor thread died: ${e.message}` } } satisfies RoundMessage);
    });
    worker.unref();
  }

  /** Lets the round in progress finish (up to `timeoutMs`), then ends the thread. */
  async stop(timeoutMs: number): Promise<void> {
    const worker = this.#worker;
    if (worker === null) return;
    this.#worker = null;
    worker.postMessage('stop');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), timeoutMs);
    });
    const late = await Promise.race([this.#exited!.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) {
      // Safe to cut short: a round that did not commit leaves its segments in the WAL.
      this.#log.warn({ timeoutMs }, 'compaction round still running at shutdown: stopping it');
      await worker.terminate();
    }
  }
}
