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

async function main(): Promise<void> {
  const setup = await CompactorSetup.open(data.settings, 'in-process', log, {
    stats: new CompactorStats(data.statsSab),
    boundary: new Map(data.boundary),
  });
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
  parentPort!.on('message', (m: unknown) => {
    if (m === 'stop') {
      void loop.stop().then(async () => {
        await setup.close();
        parentPort!.postMessage('stopped');
        parentPort!.close();
      });
    }
  });
  parentPort!.postMessage('started');
  await loop.start();
}

main().catch((e: unknown) => {
  log.error({ err: (e as Error).message, code: (e as { code?: string }).code }, 'the compactor thread failed to start');
  postRound({ failed: true, error: `the compactor thread failed to start: ${(e as Error).message}` });
  parentPort!.postMessage('failed');
});
