// Start-up check of what the compactor writes to (issue 19): a compactor
// whose catalog cannot be opened or whose warehouse cannot be written would
// fail every round forever while ingest answers 200 and the WAL fills the
// disk. So `siglake ingest` (with the compactor on) and `siglake compact`
// open, or create, the catalog tables and write and delete one probe object
// in a local warehouse before anything listens (an s3:// warehouse is probed
// by the compactor's open, and retried). A failure is a ConfigError
// "<key>: why", which the CLI turns into exit code 2 with the setting's source.

import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import { FileStorage } from '../iceberg/file-storage.js';
import { SqlCatalog } from '../iceberg/sql-catalog.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { isS3Warehouse } from '../iceberg/warehouse.js';

export interface PreflightSettings {
  readonly catalogUrl: string;
  readonly catalogName: string;
  readonly warehousePath: string;
}

/** Opens (creating when missing) the catalog tables; never prints the URL, which may hold a password. */
export async function checkCatalog(s: PreflightSettings): Promise<void> {
  let catalog: SqlCatalog | undefined;
  try {
    catalog = SqlCatalog.open(s.catalogUrl, s.catalogName);
    await catalog.ready();
  } catch (e) {
    throw ConfigError.ofSetting('catalog.url', `cannot open or create the Iceberg catalog: ${(e as Error).message}`);
  } finally {
    await catalog?.close().catch(() => {});
  }
}

/** Writes one probe object at the warehouse root and deletes it. */
export async function checkWarehouse(s: PreflightSettings, storage: ObjectStorage = new FileStorage(s.warehousePath)): Promise<void> {
  const location = storage.locationOf(`.siglake-write-check-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await storage.putNew(location, new TextEncoder().encode('siglake start-up write check\n'));
  } catch (e) {
    throw ConfigError.ofSetting('warehouse.path', `cannot write to the warehouse ${storage.rootUri}: ${(e as Error).message}`);
  }
  await storage.delete(location).catch(() => {});
}

/**
 * Both checks, the warehouse first. A refused start leaves nothing behind:
 * directories the warehouse check created are removed when either fails.
 */
export async function checkCompactorTargets(s: PreflightSettings): Promise<void> {
  if (isS3Warehouse(s.warehousePath)) {
    // An object store is checked when the compactor opens it (S3Storage.open
    // probes put, get, delete and conditional writes), and retried while it
    // cannot be reached, since it may still be starting; readiness reports a
    // store that keeps failing (compactor.maxFailingSecs). Checking it here as
    // a local path made a directory named `s3:` in the working directory.
    await checkCatalog(s);
    return;
  }
  const created = firstMissingAncestor(resolve(s.warehousePath));
  try {
    await checkWarehouse(s);
    await checkCatalog(s);
  } catch (e) {
    if (created !== undefined) {
      try {
        rmSync(created, { recursive: true, force: true });
      } catch {
        // Not made after all (a parent is not a directory): nothing to remove.
      }
    }
    throw e;
  }
}

/** The outermost directory of `dir` that does not exist yet (undefined when `dir` exists). */
function firstMissingAncestor(dir: string): string | undefined {
  let missing: string | undefined;
  for (let d = dir; !existsSync(d); d = dirname(d)) {
    missing = d;
    if (dirname(d) === d) break;
  }
  return missing;
}
