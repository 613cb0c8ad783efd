// The compactor thread of `siglake ingest`: a worker_threads Worker, so that
// reading segments, encoding Parquet and waiting on the catalog never run on
// the acceptor thread. It runs the CompactorLoop until the parent posts
// 'stop', then closes the catalog and ends.

import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../log.js';
import { CompactorLoop, type RoundOutcome } from './compactor-loop.js';
import { CompactorSetup, type CompactorSettings } from './compactor-setup.js';
import { CompactorStats } from './compactor-stats.js';
import type { LabelledMessage } from '../indexes/labelled-counts.js';
import { retentionHook } from '../retention/in-loop.js';

export interface CompactorThreadData {
  readonly settings: CompactorSettings;
  readonly statsSab: SharedArrayBuffer;
  /** [lane dir, highest segment number] before the writers started. */
  readonly boundary: [string, number][];
}

/** What the thread posts to the parent besides 'started'/'stopped'/'failed': each round's outcome. */
export interface RoundMessage {
  readonly type: 'round';
  readonly outcome: RoundOutcome;
}

const postRound = (outcome: RoundOutcome): void => parentPort!.postMessage({ type: 'round', outcome } satisfies RoundMessage);

const data = workerData as CompactorThreadData;
const log = createLogger(data.settings.logLevel, 'siglake-compactor');

let stopping = false;
parentPort!.on('message', (m: unknown) => {
  if (m === 'stop') stopping = true;
});

/**
 * Opens the catalog and warehouse, retrying while they are unreachable (an
 * object store still starting, a credentials mount not yet there): the WAL
 * keeps every record meanwhile. Null when told to stop first.
 */
async function openWithRetry(): Promise<CompactorSetup | null> {
  const retryMs = Math.min(30_000, data.settings.compactIntervalSecs * 1000);
  for (;;) {
    try {
      return await CompactorSetup.open(data.settings, 'in-process', log, {
        stats: new CompactorStats(data.statsSab),
        boundary: new Map(data.boundary),
        ...testCommitDelay(),
      });
    } catch (e) {
      log.error({ err: (e as Error).message, code: (e as { code?: string }).code, retryMs }, 'the compactor cannot open the catalog or warehouse; retrying');
      // A failed open counts as a failed round, so readiness (compactor.maxFailingSecs) sees it.
      postRound({ failed: true, error: `the compactor cannot open the catalog or warehouse: ${(e as Error).message}` });
    }
    const until = Date.now() + retryMs;
    while (Date.now() < until) {
      if (stopping) return null;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (stopping) return null;
  }
}

/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_COMMIT_DELAY_MS=n holds every
 * commit n ms between writing its metadata file and the catalog swap, so that
 * replicas sharing a table reliably race for it (the compare-and-set path).
 */
function testCommitDelay(): { beforeCommit?: () => Promise<void> } {
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1') return {};
  const ms = Number(process.env['SIGLAKE_TEST_COMMIT_DELAY_MS'] ?? '0');
  return ms > 0 ? { beforeCommit: () => new Promise<void>((r) => setTimeout(r, ms)) } : {};
}

async function main(): Promise<void> {
  const setup = await openWithRetry();
  if (setup === null) {
    parentPort!.postMessage('stopped');
    parentPort!.close();
    return;
  }
  // Labelled counters (src/indexes) go to the parent after each round, with its outcome.
  const afterRound = (outcome: RoundOutcome): void => {
    const deltas = setup.compactor.labelled.take();
    if (deltas.length > 0) parentPort!.postMessage({ type: 'labelled', deltas } satisfies LabelledMessage);
    postRound(outcome);
  };
  const loop = new CompactorLoop(setup.compactor, data.settings.compactIntervalSecs * 1000, log, afterRound);
  // Retention (src/retention) at most hourly, after the compaction rounds of a tick.
  loop.afterRounds = retentionHook(setup, data.settings, log, (lastRunSecs) => {
    parentPort!.postMessage({ type: 'labelled', deltas: setup.compactor.labelled.take(), retentionLastRun: lastRunSecs } satisfies LabelledMessage);
  });
  const stop = () => {
    void loop.stop().then(async () => {
      await setup.close();
      parentPort!.postMessage('stopped');
      parentPort!.close();
    });
  };
  if (stopping) {
    stop();
    return;
  }
  parentPort!.on('message', (m: unknown) => {
    if (m === 'stop') stop();
  });
  parentPort!.postMessage('started');
  await loop.start();
}

main().catch((e: unknown) => {
  log.error({ err: (e as Error).message, code: (e as { code?: string }).code }, 'the compactor thread failed to start');
  postRound({ failed: true, error: `the compactor thread failed to start: ${(e as Error).message}` });
  parentPort!.postMessage('failed');
});
