// One value past what the compactor can hold must not poison the lake. With
// --max-request-bytes raised toward its 512 MiB maximum, one log record's
// key-value list body of 100 MB of control characters is 600 million
// characters of JSON, past V8's longest string: `compact` failed its lane
// every round, and the compactor inside the ingester died of it every round
// (no tenant landed again). Now every value of a row is cut at
// --compact-max-value-chars (default 128 Mi characters, which nothing of a
// 16 MiB request reaches) and counted. The real sizes take a minute and GBs;
// this test lowers the bound to 1 MiB through the setting, with values a few
// MB long, and runs the compactor inside the ingester (the one that died).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parquetMetadata } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import { icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes, logsJson, pbField } from '../helpers/otlp-bodies.js';
import { untilValue } from '../helpers/wait.js';

const BOUND = 1024 * 1024;

const str = (s: Buffer | string): Buffer => pbField(0x0a, Buffer.from(s)); // AnyValue.string_value
const kv = (key: string, value: Buffer): Buffer => Buffer.concat([pbField(0x0a, Buffer.from(key)), pbField(0x12, value)]);
/** One ExportLogsServiceRequest of these LogRecords. */
const logs = (...records: Buffer[]): Buffer => pbField(0x0a, pbField(0x12, Buffer.concat(records.map((r) => pbField(0x12, r)))));
/** A LogRecord: event-name (field 12) to find it by, a body (field 5) and attributes (field 6). */
const record = (event: string, body: Buffer | null, attrs: Buffer[] = []): Buffer =>
  Buffer.concat([pbField(0x62, Buffer.from(event)), ...(body === null ? [] : [pbField(0x2a, body)]), ...attrs.map((a) => pbField(0x32, a))]);

describe('a value past --compact-max-value-chars', () => {
  const lake = useLocalLake('siglake-value-bound-');
  const { dir, flags } = lake;

  it('is cut at the bound and counted, at a whole UTF-8 character; every other record and tenant lands as sent', async () => {
    const ing = await startIngester({
      dataDir: dir,
      args: ['--trust-tenant-header', '--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1', '--compact-max-value-chars', String(BOUND), ...flags],
    });
    try {
      // A string body whose byte at the bound is inside a 2-byte character: cut before it.
      const longBody = 'a'.repeat(BOUND - 1) + 'é' + 'z'.repeat(2_000_000);
      // A key-value list body of 400,000 control characters: 2.4 million characters of JSON.
      const controls = Buffer.alloc(400_000, 1);
      const kvlistBody = pbField(0x32, pbField(0x0a, kv('k', str(controls))));
      // Bytes of 3 MB: base64 of at most 3/4 of the bound's bytes.
      const bytesBody = pbField(0x3a, Buffer.alloc(3_000_000, 0xff));
      // An attribute whose value and another whose key pass the bound.
      const attrs = [kv('long', str('v'.repeat(BOUND + 5))), kv('k'.repeat(BOUND + 7), str('x'))];
      // A key-value list within the bound, a digit key first: written as ever (keys in the order sent).
      const smallKv = pbField(0x32, Buffer.concat([pbField(0x0a, kv('b', str('1'))), pbField(0x0a, kv('0', str('zero')))]));
      const r = await post(
        ing.url,
        '/v1/logs',
        logs(record('string', str(longBody)), record('kvlist', kvlistBody), record('bytes', bytesBody), record('attrs', str('small'), attrs), record('small', smallKv)),
        { headers: { 'x-scope-orgid': 'cut' } },
      );
      expect(r.status).toBe(200);
      const span = Buffer.concat([pbField(0x0a, Buffer.alloc(16, 1)), pbField(0x12, Buffer.alloc(8, 2)), pbField(0x2a, Buffer.from('n'.repeat(BOUND * 2)))]);
      expect((await post(ing.url, '/v1/traces', pbField(0x0a, pbField(0x12, pbField(0x12, span))), { headers: { 'x-scope-orgid': 'cut' } })).status).toBe(200);
      const other = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['beside'])), { contentType: 'application/json', headers: { 'x-scope-orgid': 'other' } });
      expect(other.status).toBe(200);

      const landed = await untilValue(
        'every table landed',
        async () => {
          const l = await lake.catalog.metadataLocation('tenant_cut', 'logs');
          const t = await lake.catalog.metadataLocation('tenant_cut', 'traces');
          const o = await lake.catalog.metadataLocation('tenant_other', 'logs');
          return l === null || t === null || o === null ? undefined : { l, t, o };
        },
        60_000,
      );
      const rows = new Map((await icebirdRows(landed.l)).map((x) => [x['event_name'] as string, x]));
      expect(rows.get('string')!['body']).toBe('a'.repeat(BOUND - 1));
      const kvText = rows.get('kvlist')!['body'] as string;
      expect(kvText).toHaveLength(BOUND);
      expect(kvText).toBe(('{"k":"' + '\\u0001'.repeat(BOUND)).slice(0, BOUND));
      // A bytes body is its base64 as a JSON string, cut at the bound like any other.
      expect(rows.get('bytes')!['body']).toBe(('"' + Buffer.alloc((BOUND / 4) * 3, 0xff).toString('base64')).slice(0, BOUND));
      expect(rows.get('attrs')!['attributes']).toEqual({ long: 'v'.repeat(BOUND), ['k'.repeat(BOUND)]: 'x' });
      expect(rows.get('small')!['body']).toBe('{"b":"1","0":"zero"}');
      const [s] = await icebirdRows(landed.t);
      expect(s!['name']).toBe('n'.repeat(BOUND));
      expect((await icebirdRows(landed.o)).map((x) => x['body'])).toEqual(['beside']);
      const counted = await untilValue('the cut values counted', async () => {
        const m = await ing.metrics();
        const n = (m.get('siglake_compactor_truncated_values_total{table="logs"}') ?? 0) + (m.get('siglake_compactor_truncated_values_total{table="traces"}') ?? 0);
        return n >= 6 ? n : undefined;
      });
      expect(counted).toBe(6);
      expect(ing.logs.filter((l) => l.level >= 50)).toEqual([]);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  }, 120_000);

  it('an impossible bound is refused at start with exit 2 and one line', async () => {
    for (const [v, why] of [
      ['1023', 'must be at least 1024, got 1023'],
      [String(128 * 1024 * 1024 + 1), 'got 134217729'],
    ]) {
      const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', `${dir}/none`, '--compact-max-value-chars', v!, ...flags]);
      expect(r.status).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain('invalid compactor.maxValueChars (flag --compact-max-value-chars)');
      expect(r.stderr).toContain(why);
    }
  });

  it('a row group holds at most about 1 Mi map entries: records under a resource of many attributes land in several', async () => {
    // 2,000 log records under one resource of 2,000 attributes: 4 million
    // entries, 30 KB. At 100,000 attributes (1 MB) one row group passed V8's
    // longest array and the table failed every round (measured by hand: see
    // the findings); here the split itself is checked.
    const kvs: Buffer[] = [];
    for (let i = 0; i < 2000; i++) kvs.push(pbField(0x0a, kv(`k${i}`, str('v'))));
    const records = Buffer.alloc(2000 * 2);
    for (let i = 0; i < records.length; i += 2) records[i] = (2 << 3) | 2; // ScopeLogs.log_records, empty
    const req = pbField(0x0a, Buffer.concat([pbField(0x0a, Buffer.concat(kvs)), pbField(0x12, records)]));
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      expect((await post(ing.url, '/v1/logs', req, { headers: { 'x-scope-orgid': 'wide' } })).status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dir, 'wal'), '--compact-max-round-rows', '20000', ...flags]);
    expect(c.status, c.stderr).toBe(0);
    // A round's row budget is charged 1 + entries / 64 a row (32 here): 64,000 in rounds of 20,000.
    // (Charged 1 a row, 200 million entries held one round, and every other tenant, for minutes.)
    const rounds = c.stdout
      .split('\n')
      .filter((l) => l.includes('"msg":"compaction round"'))
      .map((l) => (JSON.parse(l) as { rows: number }).rows)
      .filter((n) => n > 0);
    expect(rounds).toEqual([625, 625, 625, 125]);
    const files = await icebirdDataFiles((await lake.catalog.metadataLocation('tenant_wide', 'logs'))!);
    expect(files.map((f) => f.records).reduce((a, b) => a + b, 0)).toBe(2000);
    const groups = files.map((f) => {
      const bytes = fs.readFileSync(fileURLToPath(f.path));
      return parquetMetadata(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)).row_groups.map((g) => Number(g.num_rows));
    });
    // 1,048,576 entries of 2,000 a row: a group every 525 rows.
    expect(groups.flat().sort((a, b) => b - a)).toEqual([525, 525, 525, 125, 100, 100, 100]);
  }, 120_000);
});
