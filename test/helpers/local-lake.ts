// A lake on local disk for one describe block: a SQLite catalog and a file
// warehouse in a temporary directory, the catalog opened (for reading back
// what was landed) and the global fetch able to read `file:` URLs for the
// independent readers (icebird, hyparquet) while the block runs.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { installFileFetch } from './iceberg.js';
import { tempDir } from './ingester.js';

export interface LocalLake {
  /** The temporary directory holding catalog.db and warehouse/ (removed after the block). */
  readonly dir: string;
  readonly catalogUrl: string;
  readonly warehouse: string;
  /** `--catalog-url … --warehouse …` for `siglake` commands. */
  readonly flags: string[];
  /** The catalog, open while the block's tests run. */
  readonly catalog: SqlCatalog;
}

/**
 * Registers the block's beforeAll/afterAll. Call it before the block's own
 * hooks: its afterAll then runs after theirs (vitest runs afterAll hooks in
 * reverse order), so a process the block started is stopped before the
 * directory goes.
 */
export function useLocalLake(prefix: string): LocalLake {
  const dir = tempDir(prefix);
  const catalogUrl = `sqlite:${path.join(dir, 'catalog.db')}`;
  const warehouse = path.join(dir, 'warehouse');
  let catalog: SqlCatalog | undefined;
  let restoreFetch: (() => void) | undefined;
  beforeAll(() => {
    restoreFetch = installFileFetch();
    catalog = SqlCatalog.open(catalogUrl, 'siglake');
  });
  afterAll(async () => {
    restoreFetch?.();
    await catalog?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    catalogUrl,
    warehouse,
    flags: ['--catalog-url', catalogUrl, '--warehouse', warehouse],
    get catalog(): SqlCatalog {
      if (catalog === undefined) throw new Error('the local lake is open only while its describe block runs');
      return catalog;
    },
  };
}
