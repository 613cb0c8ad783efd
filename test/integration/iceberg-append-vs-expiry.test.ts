// Commits that race snapshot expiry, on the SQLite and the PostgreSQL
// catalog. A compactor commit: the appender read the table while snapshot S
// was current; before it reads S's manifest list, another writer commits and
// `siglake retention --once` (snapshots kept 0 hours) expires S and deletes
// that list. The attempt is a lost race, not a failure: the appender reads
// the table again and commits on the new current snapshot, and every row
// stays readable. A retention round that read the same metadata as that
// process: its snapshot to keep was expired under it; it reads again and
// succeeds.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TableBuilder } from '../../src/compactor/table-builder.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import type { ObjectStorage } from '../../src/iceberg/storage.js';
import { TableAppender } from '../../src/iceberg/table-appender.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { Retention } from '../../src/retention/retention.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { runCli } from '../helpers/ingester.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';

let zstd: Compressor;
let restoreFetch: () => void;
let pg: PostgresServer;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-append-expiry-'));
const catalogs: SqlCatalog[] = [];

beforeAll(async () => {
  zstd = await ZstdCodec.load();
  restoreFetch = installFileFetch();
  pg = await startPostgres();
});
afterAll(async () => {
  restoreFetch();
  for (const c of catalogs) await c.close();
  await pg?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** A fresh lake: a catalog of the kind (a new PostgreSQL catalog name per lake) and a warehouse. */
function lake(kind: 'sqlite' | 'postgres') {
  n++;
  const catalogUrl = kind === 'sqlite' ? `sqlite:${path.join(dir, `catalog-${n}.db`)}` : pg.url;
  const name = `lake${n}`;
  const warehouse = path.join(dir, `warehouse-${n}`);
  const catalog = SqlCatalog.open(catalogUrl, name);
  catalogs.push(catalog);
  const flags = ['--catalog-url', catalogUrl, '--catalog-name', name, '--warehouse', warehouse];
  return { catalog, storage: new FileStorage(warehouse), flags };
}

/** The storage, with every read of `stallAt` (the first only) held until the returned release. */
function stalling(storage: FileStorage, stallAt: string) {
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
      if (l === stallAt && !gated) {
        gated = true;
        atGate();
        await gate;
      }
      return storage.get(l);
    },
  };
  return { slow, reached, release };
}

const NOW_US = BigInt(Date.now()) * 1000n;

type Lake = ReturnType<typeof lake>;

async function files(l: Lake, tag: string) {
  const b = new TableBuilder({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: l.storage.locationOf('main', 'logs'), storage: l.storage, zstd });
  const row: unknown[] = TableSchema.LOGS.columns.map((c) => (c.type === 'map' ? [] : c.type === 'string' ? null : c.type === 'int' ? 0 : c.required ? 0n : null));
  row[0] = NOW_US;
  row[6] = tag;
  const p = b.add(row, 10);
  if (p) await p;
  return b.finish();
}

async function append(l: Lake, appender: TableAppender, tag: string) {
  return appender.append({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: l.storage.locationOf('main', 'logs'), files: await files(l, tag), summary: {} });
}

/** The current snapshot's manifest list. */
async function currentList(l: Lake): Promise<string> {
  const loc = (await l.catalog.metadataLocation('main', 'logs'))!;
  const meta = JSON.parse(fs.readFileSync(fileURLToPath(loc), 'utf8'));
  return meta.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === meta['current-snapshot-id'])['manifest-list'];
}

describe.each(['sqlite', 'postgres'] as const)('commits racing snapshot expiry on the %s catalog', (kind) => {
  it('an append whose parent snapshot is expired under it reads the table again and commits on the new current snapshot (not a failed round)', async () => {
    const l = lake(kind);
    const plain = new TableAppender({ catalog: l.catalog, storage: l.storage });
    for (const tag of ['a', 'b']) expect((await append(l, plain, tag)).status).toBe('committed');
    const parentList = await currentList(l);
    // The compactor's appender stalls just before it reads the current snapshot's manifest list.
    const { slow, reached, release } = stalling(l.storage, parentList);
    const stalled = append(l, new TableAppender({ catalog: l.catalog, storage: slow }), 'c');
    await reached;
    expect((await append(l, plain, 'd')).status).toBe('committed');
    const r = runCli(['retention', '--once', ...l.flags, '--retention-snapshot-max-age-hours', '0']);
    expect(r.status, r.stderr).toBe(0);
    expect(fs.existsSync(fileURLToPath(parentList))).toBe(false);
    release();
    // Before, the attempt threw ENOENT reading the deleted list: the compactor's round failed.
    await expect(stalled).resolves.toMatchObject({ status: 'committed' });
    const rows = await icebirdRows((await l.catalog.metadataLocation('main', 'logs'))!);
    expect(rows.map((x) => x['body']).sort()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a retention round whose snapshot to keep another round expired under it reads again and succeeds (no error, nothing failed)', async () => {
    const l = lake(kind);
    const plain = new TableAppender({ catalog: l.catalog, storage: l.storage });
    for (const tag of ['a', 'b']) expect((await append(l, plain, tag)).status).toBe('committed');
    const keep = await currentList(l);
    const { slow, reached, release } = stalling(l.storage, keep);
    const logged: string[] = [];
    const log = pino({ level: 'info' }, { write: (x: string) => void logged.push(x) });
    const b = new Retention({ catalog: l.catalog, storage: slow, log, logsDays: 0, tracesDays: 0, snapshotMaxAgeHours: 0 }).runOnce();
    await reached;
    expect((await append(l, plain, 'c')).status).toBe('committed');
    const a = runCli(['retention', '--once', ...l.flags, '--retention-snapshot-max-age-hours', '0']);
    expect(a.status, a.stderr).toBe(0);
    expect(fs.existsSync(fileURLToPath(keep))).toBe(false);
    release();
    const r = await b;
    // Before: "snapshot expiry stopped: the manifest list … of a kept snapshot could not be read", failed 1.
    expect(logged.join('')).not.toMatch(/retention failed/);
    expect(logged.join('')).toMatch(/another round expired these snapshots first/);
    expect(r.failed).toBe(0);
    const meta = JSON.parse(fs.readFileSync(fileURLToPath((await l.catalog.metadataLocation('main', 'logs'))!), 'utf8'));
    expect(meta.snapshots).toHaveLength(1);
    const rows = await icebirdRows((await l.catalog.metadataLocation('main', 'logs'))!);
    expect(rows.map((x) => x['body']).sort()).toEqual(['a', 'b', 'c']);
  });
});
