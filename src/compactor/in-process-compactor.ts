// The compactor inside `siglake ingest` (compactor.enabled): a worker thread
// that the Ingester starts once WAL recovery is done and stops at shutdown.
// Its figures reach the ingester's /metrics through a SharedArrayBuffer.

import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type client from 'prom-client';
import { CompactorMetrics } from './compactor-metrics.js';
import { earlierLifeBoundary, type CompactorSettings } from './compactor-setup.js';
import { CompactorStats } from './compactor-stats.js';
import type { CompactorThreadData } from './compactor-thread.js';

/** Old-generation heap of the compactor thread. */
const COMPACTOR_HEAP_MIB = 512;

export class InProcessCompactor {
  readonly #settings: CompactorSettings;
  readonly #log: Logger;
  readonly #stats = CompactorStats.create();
  #worker: Worker | null = null;
  #exited: Promise<void> | null = null;
  #boundary: Map<string, number> | null = null;

  constructor(opts: { settings: CompactorSettings; log: Logger; registry: client.Registry }) {
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
    };
    this.#log = opts.log;
    new CompactorMetrics(opts.registry, this.#stats);
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
    worker.on('error', (e) => this.#log.error({ err: e.message }, 'the compactor thread died; WAL segments wait for the next start'));
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
