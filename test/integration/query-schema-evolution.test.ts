// An index's mapping evolves (contract §6: an update adds columns with new
// field ids; a removed column leaves the current schema only; a name removed
// and added again is a new column). The files written before each update
// keep their old columns. `siglake query` must read every file against the
// table's current schema by field id, as any Iceberg reader does:
//
//   - a column added since a file was written reads as null for its rows
//     (by name over the files, DuckDB refused the whole query: "column not
//     found in file")
//   - a name removed and added again (a new id, another type) never shows
//     the old column's values
//   - two names differing only in case are one name to SQL: a second index
//     so named is refused, and one made elsewhere does not stop the queries
//
// Against the real processes: siglake index create/update, siglake ingest,
// siglake compact, siglake query; the default tenant, whose namespace is main.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';
import { postSql, startQuery, type RunningQuery } from '../helpers/query.js';

/** One OTLP/JSON log record with string attributes. */
function record(body: string, attrs: Record<string, string>): Uint8Array {
  return jsonBytes({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'pay' } }] },
        scopeLogs: [
          {
            logRecords: [
              {
                timeUnixNano: '1767225600000000000',
                body: { stringValue: body },
                attributes: Object.entries(attrs).map(([key, v]) => ({ key, value: { stringValue: v } })),
              },
            ],
          },
        ],
      },
    ],
  });
}

describe('siglake query over an index whose mapping evolved', () => {
  const lake = useLocalLake('siglake-schema-evolution-');
  const { dir, flags } = lake;
  let q: RunningQuery | undefined;
  afterAll(async () => {
    await q?.stop();
  });

  const define = (verb: 'create' | 'update', mapping: string) => {
    const f = path.join(dir, 'payments.yaml');
    fs.writeFileSync(f, `name: payments\nmapping:\n${mapping}`);
    const r = runCli(['index', verb, '--file', f, ...flags]);
    expect(r.status, r.stderr).toBe(0);
  };
  /** Sends one record to the index and lands it: one data file per call. */
  const land = async (body: string, attrs: Record<string, string>) => {
    const ing = await startIngester({ dataDir: dir, args: ['--compactor=false', ...flags] });
    try {
      const r = await post(ing.url, '/v1/logs', record(body, attrs), { contentType: 'application/json', headers: { 'x-siglake-index': 'payments' } });
      expect(r.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dir, 'wal'), ...flags]);
    expect(c.status, c.stderr).toBe(0);
  };

  it('reads each file by field id: added columns are null in older files, and a re-added name never shows the old values', async () => {
    const status = '  - { column: http_status, from: attributes.status, type: long }\n';
    const user = '  - { column: user_id, from: attributes.user, type: string }\n';
    const code = '  - { column: http_status, from: attributes.code, type: string }\n';
    define('create', status);
    await land('r1', { status: '200', user: 'u1', code: 'c1' });
    define('update', status + user); // user_id added
    await land('r2', { status: '201', user: 'u2', code: 'c2' });
    define('update', user); // http_status removed
    await land('r3', { status: '202', user: 'u3', code: 'c3' });
    define('update', user + code); // http_status again: a new column (new id, another type)
    await land('r4', { status: '203', user: 'u4', code: 'c4' });

    q = await startQuery(dir, flags);
    const a = await postSql(q.url, 'SELECT body, user_id, http_status FROM payments ORDER BY body');
    expect(a.status, a.text).toBe(200);
    expect(a.body['rows']).toEqual([
      ['r1', null, null],
      ['r2', 'u2', null],
      ['r3', 'u3', null],
      ['r4', 'u4', 'c4'],
    ]);
    // The current schema's type, whatever an older file held under that name.
    const t = await postSql(q.url, "SELECT typeof(http_status) AS t FROM payments WHERE body = 'r1'");
    expect(t.body['rows']).toEqual([['VARCHAR']]);
    // Filters still reach the files.
    const f = await postSql(q.url, "SELECT body FROM payments WHERE user_id >= 'u3' ORDER BY body");
    expect(f.body['rows']).toEqual([['r3'], ['r4']]);
  });

  it('names are compared without case: a second index differing only in case is refused, and a catalog row made so elsewhere does not stop the queries', async () => {
    const f = path.join(dir, 'twin.yaml');
    fs.writeFileSync(f, 'name: Payments\n');
    const r = runCli(['index', 'create', '--file', f, ...flags]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('SIGLAKE_INDEX_EXISTS');
    expect(r.stderr).toContain('exists already as "payments"');
    // Made outside Siglake (another engine, or a release before the refusal): the tenant's
    // queries all failed ("View with name payments already exists"); now the first name keeps it.
    const loc = (await lake.catalog.metadataLocation('main', 'payments'))!;
    expect(await lake.catalog.createTable('main', 'PAYMENTS', loc)).toBe(true);
    const logs = await postSql(q!.url, 'SELECT count(*) AS n FROM payments');
    expect(logs.status, logs.text).toBe(200);
    expect(logs.body['rows']).toEqual([['4']]); // BIGINT as a string in JSON
  });
});
