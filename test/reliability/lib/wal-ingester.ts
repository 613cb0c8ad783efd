// `siglake ingest` for the WAL-level reliability suites: the in-process
// compactor (contract §10) is switched off, because it deletes or empties
// WAL segments once it has landed them in Iceberg, and these suites check
// every acknowledged record in `siglake wal dump`. The compactor's own
// interplay with a live WAL is checked by compactor-live-segment.test.ts.
// (An environment variable rather than `--compactor=false`, so that an
// ingester built without the compactor starts just the same.)

import { expect } from 'vitest';
import { startIngester, type RunningIngester, type StartOptions } from '../../helpers/ingester.js';

export function startWalIngester(opts: StartOptions = {}): Promise<RunningIngester> {
  return startIngester({ ...opts, env: { SIGLAKE_COMPACTOR: 'false', ...opts.env } });
}

/** Restarts on the same data directory: recovery must cut nothing, and the ingester must stop cleanly. */
export async function expectCleanRestart(opts: StartOptions, live: Set<RunningIngester>): Promise<void> {
  const again = await startWalIngester(opts);
  live.add(again);
  expect(await again.metric('siglake_wal_truncated_bytes_total')).toBe(0);
  expect(await again.stop()).toBe(0);
  live.delete(again);
}
