// `siglake migrate [--all-namespaces] [--dry-run]` (contract §1, §8): bring
// table schemas to the current version. Without --all-namespaces only the
// tables of `main`; with it every `tenant_*` namespace too. --dry-run prints
// what it would do and changes nothing. One JSON line per table changed (or
// that would be). Idempotent; safe while ingest and compaction run.
// Exit codes: 0 done; 1 a table refused or failed (each one a JSON line, the
// run going on past it); 2 a bad flag or setting.

import { loadCommandSettings } from '../config/load.js';
import { closeWarehouse, openWarehouse } from '../iceberg/warehouse.js';
import { missingSqliteCatalog, SqlCatalog } from '../iceberg/sql-catalog.js';
import { Migrator } from './migrate.js';

export async function runMigrateCommand(argv: string[]): Promise<number> {
  const allNamespaces = argv.includes('--all-namespaces');
  const dryRun = argv.includes('--dry-run');
  const loaded = loadCommandSettings(argv.filter((a) => a !== '--all-namespaces' && a !== '--dry-run'), { command: 'migrate' });
  if (loaded === undefined) return 2;
  const settings = loaded.settings;
  // Nothing to migrate in a catalog that is not there; opening it would make an empty one.
  const missing = missingSqliteCatalog(settings.catalogUrl);
  if (missing !== null) {
    process.stderr.write(`siglake: ${missing}\n`);
    return 2;
  }
  const catalog = SqlCatalog.open(settings.catalogUrl, settings.catalogName);
  let failed = 0;
  let migrated = 0;
  // Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CRASH_MIGRATE=n kills the process with SIGKILL after its n-th table commit.
  const crashAfter = process.env['SIGLAKE_TEST_HOOKS'] === '1' ? Number(process.env['SIGLAKE_TEST_CRASH_MIGRATE'] ?? '0') : 0;
  let storage: Awaited<ReturnType<typeof openWarehouse>> | undefined;
  try {
    // A local directory or an s3:// bucket (warehouse.path), as the compactor opens it.
    storage = await openWarehouse(settings);
    const m = new Migrator({ catalog, storage });
    await m.run({
      allNamespaces,
      dryRun,
      onTable: (t) => {
        if (t.outcome === 'refused' || t.outcome === 'failed') failed++;
        if (t.outcome !== 'current') process.stdout.write(`${JSON.stringify(t)}\n`);
        if (t.outcome === 'migrated' && crashAfter > 0 && ++migrated >= crashAfter) process.kill(process.pid, 'SIGKILL');
      },
    });
    return failed > 0 ? 1 : 0;
  } catch (e) {
    process.stderr.write(`siglake: ${(e as Error).message}\n`);
    return 1;
  } finally {
    if (storage !== undefined) closeWarehouse(storage);
    await catalog.close();
  }
}
