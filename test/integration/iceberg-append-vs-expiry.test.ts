// A compactor commit that races snapshot expiry: the appender read the table
// while snapshot S was current; before it reads S's manifest list, another
// writer commits and `siglake retention --once` (snapshots kept 0 hours)
// expires S and deletes that list. The attempt is a lost race, not a
// failure: the appender reads the table again and commits on the new
// current snapshot, and every row stays readable.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TableBuilder } from '../../src/compactor/table-builder.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import type { ObjectStorage } from '../../src/iceberg/storage.js';
import { TableAppender } from '../../src/iceberg/table-appender.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { runCli } from '../helpers/ingester.js';

let zstd: Compressor;
let restoreFetch: () => void;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-append-expiry-'));
const catalogUrl = `sqlite:${path.join(dir, 'catalog.db')}`;
const warehouse = path.join(dir, 'warehouse');
let catalog: SqlCatalog;
const storage = new FileStorage(warehouse);

beforeAll(async () => {
  zstd = await ZstdCodec.load();
  restoreFetch = installFileFetch();
  catalog = SqlCatalog.open(catalogUrl, 'siglake');
});
afterAll(async () => {
  restoreFetch();
  await catalog.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const NOW_US = BigInt(Date.now()) * 1000n;

async function files(tag: string) {
  const b = new TableBuilder({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: storage.locationOf('main', 'logs'), storage, zstd });
  const row: unknown[] = TableSchema.LOGS.columns.map((c) => (c.type === 'map' ? [] : c.type === 'string' ? null : c.type === 'int' ? 0 : c.required ? 0n : null));
  row[0] = NOW_US;
  row[6] = tag;
  const p = b.add(row, 10);
  if (p) await p;
  return b.finish();
}

async function append(appender: TableAppender, tag: string) {
  return appender.append({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: storage.locationOf('main', 'logs'), files: await files(tag), summary: {} });
}

describe('a commit whose parent snapshot is expired under it', () => {
  it('reads the table again and commits on the new current snapshot (not a failed round)', async () => {
    const plain = new TableAppender({ catalog, storage });
    for (const tag of ['a', 'b']) expect((await append(plain, tag)).status).toBe('committed');
    const loc = (await catalog.metadataLocation('main', 'logs'))!;
    const meta = JSON.parse(fs.readFileSync(fileURLToPath(loc), 'utf8'));
    const parentList = meta.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === meta['current-snapshot-id'])['manifest-list'];
    // The compactor's appender stalls just before it reads the current snapshot's manifest list.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let atGate!: () => void;
    const reached = new Promise<void>((r) => (atGate = r));
    let gated = false;
    const slow: ObjectStorage = {
      rootUri: storage.rootUri,
      locationOf: (...seg) => storage.locationOf(...seg),
      putNew: (l, bytes) => storage.putNew(l, bytes),
      openSink: (l) => storage.openSink(l),
      delete: (l) => storage.delete(l),
      get: async (l) => {
        if (l === parentList && !gated) {
          gated = true;
          atGate();
          await gate;
        }
        return storage.get(l);
      },
    };
    const stalled = append(new TableAppender({ catalog, storage: slow }), 'c');
    await reached;
    expect((await append(plain, 'd')).status).toBe('committed');
    const r = runCli(['retention', '--once', '--catalog-url', catalogUrl, '--warehouse', warehouse, '--retention-snapshot-max-age-hours', '0']);
    expect(r.status, r.stderr).toBe(0);
    expect(fs.existsSync(fileURLToPath(parentList))).toBe(false);
    release();
    // Before, the attempt threw ENOENT reading the deleted list: the compactor's round failed.
    await expect(stalled).resolves.toMatchObject({ status: 'committed' });
    const rows = await icebirdRows((await catalog.metadataLocation('main', 'logs'))!);
    expect(rows.map((x) => x['body']).sort()).toEqual(['a', 'b', 'c', 'd']);
  });
});
