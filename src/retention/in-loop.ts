// Retention inside the compactor loop (contract §7): after a tick's
// compaction rounds, a retention round over every table when the last one is
// at least an hour old (the first tick runs one). Counters go to the
// compactor's labelled counts; `onDone` reports the finish time.

import type { Logger } from 'pino';
import type { CompactorSettings, CompactorSetup } from '../compactor/compactor-setup.js';
import { Retention } from './retention.js';

const EVERY_MS = 3_600_000;

export function retentionHook(setup: CompactorSetup, s: CompactorSettings, log: Logger, onDone: (lastRunSecs: number) => void): () => Promise<void> {
  const retention = new Retention({
    catalog: setup.catalog,
    storage: setup.storage,
    log,
    logsDays: s.retentionLogsDays ?? 0,
    tracesDays: s.retentionTracesDays ?? 0,
    snapshotMaxAgeHours: s.retentionSnapshotMaxAgeHours ?? 24,
    counts: setup.compactor.labelled,
  });
  let last = -Infinity;
  return async () => {
    if (Date.now() - last < EVERY_MS) return;
    last = Date.now();
    await retention.runOnce();
    onDone(Math.floor(Date.now() / 1000));
  };
}
