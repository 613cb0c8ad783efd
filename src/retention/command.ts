// `siglake retention [--once]` (contract §1, §7): enforce per-table retention
// over every namespace of the catalog. --once runs one round and exits; without
// it a round runs every hour until SIGTERM/SIGINT. Every other flag is a
// setting (--catalog-url, --warehouse, --retention-*).
//
// Prints one JSON line per table changed (namespace, table, days, files
// dropped, snapshots expired, files deleted). Exit codes: 0 done; 1 a table
// failed (the next round retries it); 2 a bad flag or setting.

import { loadCommandSettings } from '../config/load.js';
import { closeWarehouse, openWarehouse } from '../iceberg/warehouse.js';
import { missingSqliteCatalog, SqlCatalog } from '../iceberg/sql-catalog.js';
import { createLogger } from '../log.js';
import { Retention } from './retention.js';

const ROUND_MS = 3_600_000;

export async function runRetentionCommand(argv: string[]): Promise<number> {
  const once = argv.includes('--once');
  const loaded = loadCommandSettings(argv.filter((a) => a !== '--once'), { command: 'retention' });
  if (loaded === undefined) return 2;
  const settings = loaded.settings;
  // Log lines to stderr: stdout holds the result, one JSON line per table changed.
  const log = createLogger(settings.logLevel, 'siglake-retention', { stderr: true });
  // Nothing to keep in a catalog that is not there; opening it would make an empty one (a typo'd
  // path then passed with exit 0).
  const missing = missingSqliteCatalog(settings.catalogUrl);
  if (missing !== null) {
    process.stderr.write(`siglake: ${missing}\n`);
    return 2;
  }
  const catalog = SqlCatalog.open(settings.catalogUrl, settings.catalogName);
  // A local directory or an s3:// bucket (warehouse.path), as the compactor opens it.
  const storage = await openWarehouse(settings).catch(async (e: unknown) => {
    await catalog.close();
    throw e;
  });
  const retention = new Retention({
    catalog,
    storage,
    log,
    logsDays: settings.retentionLogsDays,
    tracesDays: settings.retentionTracesDays,
    snapshotMaxAgeHours: settings.retentionSnapshotMaxAgeHours,
    ...crashHook(),
  });
  let stop = false;
  let wake: (() => void) | null = null;
  const onSignal = () => {
    stop = true;
    wake?.();
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    for (;;) {
      let r: Awaited<ReturnType<Retention['runOnce']>>;
      try {
        r = await retention.runOnce();
      } catch (e) {
        // The catalog or the store could not be listed at all (a table's failure is counted in
        // runOnce): one line, as the other commands say it, not a stack.
        process.stderr.write(`siglake: retention round failed: ${(e as Error).message}\n`);
        if (once) return 1;
        log.error({ err: (e as Error).message }, 'retention round failed; retrying at the next');
        r = { tables: [], failed: 1 };
      }
      for (const t of r.tables) {
        if (t.filesDropped > 0 || t.snapshotsExpired > 0 || t.refsRemoved > 0 || t.filesDeleted > 0) process.stdout.write(`${JSON.stringify(t)}\n`);
      }
      if (once) return r.failed > 0 ? 1 : 0;
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, ROUND_MS).unref();
      });
      if (stop) return 0;
    }
  } finally {
    closeWarehouse(storage);
    await catalog.close();
  }
}

/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CRASH_RETENTION=<step>
 * (dropped | expired | deleting) kills the process with SIGKILL at that step
 * of the first table that reaches it.
 */
function crashHook(): { step?: (name: string) => void } {
  const at = process.env['SIGLAKE_TEST_CRASH_RETENTION'];
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1' || at === undefined) return {};
  return {
    step: (name) => {
      if (name === at) process.kill(process.pid, 'SIGKILL');
    },
  };
}
