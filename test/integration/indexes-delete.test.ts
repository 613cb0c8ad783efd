// Deleting an index while the WAL still holds records for it (docs/indexes.md
// "Deleting an index"). The delete leaves a mark with its time in the tenant's
// namespace properties; the compactor drops the records written before it,
// and all of them while no table of the name exists, where it used to make
// the table again from them, bare (no mapping, no retention, unregistered),
// and every ingester then took the name as an index again. Real processes:
// siglake index, siglake ingest, siglake compact; icebird reads the table.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester, walDump } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { TableMetadata } from '../../src/iceberg/table-metadata.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { logsProto } from '../helpers/otlp-bodies.js';

describe('an index deleted while its WAL lane holds records', () => {
  const lake = useLocalLake('siglake-index-delete-');
  const { dir, flags } = lake;
  const walDir = path.join(dir, 'wal');
  const index = (verb: 'create' | 'delete' | 'show', yaml?: string) => {
    const args = ['index', verb];
    if (yaml !== undefined) {
      const f = path.join(dir, 'payments.yaml');
      fs.writeFileSync(f, yaml);
      args.push('--file', f);
    } else args.push('payments');
    return runCli([...args, '--tenant', 'acme', ...flags]);
  };
  const definition = 'name: payments\nretentionDays: 7\nmapping:\n  - { column: http_status, from: attributes.status, type: long }\n';
  /**
   * Runs `steps` against an ingester that keeps the index names it read at
   * start (a refresh far away): what every ingester does in the seconds after
   * a delete. Then lands the WAL.
   */
  const withIngester = async (steps: (send: (text: string) => Promise<number>) => Promise<void>) => {
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', '--ingest-indexes-refresh-secs', '3600', ...flags] });
    try {
      await steps(async (text) => (await post(ing.url, '/v1/logs', logsProto([text]), { headers: { 'x-scope-orgid': 'acme', 'x-siglake-index': 'payments' } })).status);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags]);
    expect(c.status, c.stderr).toBe(0);
    return c.stdout + c.stderr;
  };
  const laneRecords = () => walDump(path.join(walDir, 'acme', 'indexes', 'payments')).flatMap((l) => l.texts);

  it('what was written before the delete never lands, and the index is not made again', async () => {
    expect(index('create', definition).status).toBe(0);
    const log = await withIngester(async (send) => {
      expect(await send('before-delete')).toBe(200);
      expect(index('delete').status).toBe(0);
      expect(await send('after-delete')).toBe(200); // this ingester has not refreshed its names yet
    });
    expect(log).toContain('WAL records of an index deleted after they were written: dropped');
    expect(await lake.catalog.metadataLocation('tenant_acme', 'payments')).toBeNull();
    const show = index('show');
    expect(show.status).not.toBe(0);
    expect(show.stderr).toContain('SIGLAKE_UNKNOWN_INDEX');
    expect(laneRecords()).toEqual([]);
  });

  it('an index created again under the name gets only what was written after the delete', async () => {
    expect(index('create', definition).status).toBe(0);
    await withIngester(async (send) => {
      expect(await send('old-incarnation')).toBe(200);
      expect(index('delete').status).toBe(0);
      expect(index('create', 'name: payments\nmapping:\n  - { column: user_id, from: attributes.user, type: string }\n').status).toBe(0);
      expect(await send('new-incarnation')).toBe(200);
    });
    const loc = (await lake.catalog.metadataLocation('tenant_acme', 'payments'))!;
    const rows = await icebirdRows(loc);
    expect(rows.map((r) => r['body'])).toEqual(['new-incarnation']);
    expect(rows[0]).toHaveProperty('user_id');
    expect(rows[0]).not.toHaveProperty('http_status');
    expect(JSON.parse(index('show').stdout)).toMatchObject({ registered: true, mapping: [{ column: 'user_id' }] });
    expect(laneRecords()).toEqual([]);
  });

  it("a table another engine made under an index's name is never written to; its records stay in the WAL", async () => {
    // No siglake.table-kind, but the very columns of a Siglake log table: before stop 45 the
    // compactor appended the tenant's rows into it.
    const location = new FileStorage(lake.warehouse).locationOf('tenant_acme', 'orders');
    const doc = JSON.parse(TableMetadata.create(location, TableSchema.LOGS, Date.now()).toJson()) as { properties: Record<string, string> };
    delete doc.properties['siglake.table-kind'];
    delete doc.properties['siglake.index'];
    const meta = `${location}/metadata/00000-${'f'.repeat(8)}.metadata.json`;
    await new FileStorage(lake.warehouse).putNew(meta, Buffer.from(JSON.stringify(doc)));
    expect(await lake.catalog.createTable('tenant_acme', 'orders', meta)).toBe(true);
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      const r = await post(ing.url, '/v1/logs', logsProto(['for-orders']), { headers: { 'x-scope-orgid': 'acme', 'x-siglake-index': 'orders' } });
      expect(r.status).toBe(200);
      expect((await post(ing.url, '/v1/logs', logsProto(['for-logs']), { headers: { 'x-scope-orgid': 'acme' } })).status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags]);
    expect(c.status, c.stderr).toBe(0);
    expect(c.stdout + c.stderr).toContain('WAL records for a table Siglake did not make');
    expect(await lake.catalog.metadataLocation('tenant_acme', 'orders')).toBe(meta); // no commit
    expect(walDump(path.join(walDir, 'acme', 'indexes', 'orders')).flatMap((l) => l.texts)).toEqual(['for-orders']);
    expect((await icebirdRows((await lake.catalog.metadataLocation('tenant_acme', 'logs'))!)).map((x) => x['body'])).toEqual(['for-logs']);
  });
});
