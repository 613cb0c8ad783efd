// Retention (contract §7), end to end against the real processes: data of
// several days lands through `siglake ingest` + `siglake compact`; `siglake
// retention --once` drops the days past each table's cut-off (an index's own
// retentionDays, --retention-logs-days for logs) in one snapshot, expires the
// older snapshots and deletes the files only they referenced. icebird and
// DuckDB must see no row before the cut-off and the files must be gone; kill
// -9 at each step of a round leaves a table every reader opens, and a rerun
// finishes the job.

import avro from 'avsc';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { AvroFile, type AvroRecord } from '../../src/iceberg/avro-file.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { LosslessJson } from '../../src/iceberg/lossless-json.js';
import type { ObjectStorage } from '../../src/iceberg/storage.js';
import { Retention } from '../../src/retention/retention.js';
import { duckParquet, duckQuery, filesUnder, icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';

const DAY_NS = 86_400_000_000_000n;
const today = BigInt(Math.floor(Date.now() / 86_400_000)) * DAY_NS;

/** One OTLP/JSON logs request: a record per (body, days ago) at noon UTC of that day. */
function logsAt(records: [string, number][]): Uint8Array {
  return jsonBytes({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'ret' } }] },
        scopeLogs: [{ logRecords: records.map(([body, ago]) => ({ timeUnixNano: String(today - BigInt(ago) * DAY_NS + DAY_NS / 2n), body: { stringValue: body } })) }],
      },
    ],
  });
}

describe('siglake retention on a catalog that is not there', () => {
  it('refuses with exit 2 and makes nothing (a typo in the path no longer passes as done)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-retention-typo-'));
    try {
      const r = runCli(['retention', '--once', '--catalog-url', `sqlite:${path.join(dir, 'typo.db')}`, '--warehouse', path.join(dir, 'warehouse')]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain('no catalog there');
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an unreachable PostgreSQL catalog: one line naming the failure, no stack, no password', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-retention-pg-'));
    try {
      const r = runCli(['retention', '--once', '--catalog-url', 'postgres://admin:s3cretpw@127.0.0.1:1/lake', '--warehouse', path.join(dir, 'warehouse')]);
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^siglake: retention round failed: PostgreSQL catalog: .*ECONNREFUSED/m);
      expect(r.stderr).not.toMatch(/^\s+at /m);
      expect(r.stderr + r.stdout).not.toContain('s3cretpw');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('siglake retention', () => {
  const lake = useLocalLake('siglake-retention-');
  const { dir, warehouse, flags } = lake;
  const walDir = path.join(dir, 'wal');
  const retentionFlags = [...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '0'];

  /** Sends the records through a real ingester, then lands them with siglake compact. */
  async function land(sends: { tenant: string; index?: string; records: [string, number][] }[]): Promise<void> {
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      for (const s of sends) {
        const headers: Record<string, string> = { 'x-scope-orgid': s.tenant, ...(s.index ? { 'x-siglake-index': s.index } : {}) };
        expect((await post(ing.url, '/v1/logs', logsAt(s.records), { contentType: 'application/json', headers })).status).toBe(200);
      }
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags]);
    expect(r.status, r.stderr).toBe(0);
  }
  const bodies = async (ns: string, table: string) =>
    (await icebirdRows((await lake.catalog.metadataLocation(ns, table))!)).map((r) => r['body'] as string).sort();
  const parquetFiles = (ns: string, table: string) => {
    const base = path.join(warehouse, ns, table, 'data');
    return filesUnder(base)
      .filter((f) => f.endsWith('.parquet'))
      .map((f) => path.join(base, f));
  };


  it('drops the days past each table\'s cut-off from every reader, and their files from the warehouse', async () => {
    const f = path.join(dir, 'payments.yaml');
    fs.writeFileSync(f, 'name: payments\nretentionDays: 3\n');
    expect(runCli(['index', 'create', '--file', f, '--tenant', 'acme', ...flags]).status).toBe(0);
    await land([
      { tenant: 'acme', index: 'payments', records: [['p-10', 10], ['p-5', 5], ['p-2', 2], ['p-0', 0]] },
      { tenant: 'default', records: [['l-30', 30], ['l-8', 8], ['l-7', 7], ['l-0', 0]] },
      { tenant: 'acme', records: [['a-400', 400]] }, // acme's logs: --retention-logs-days applies
    ]);
    await land([{ tenant: 'acme', index: 'payments', records: [['p-10b', 10], ['p-1', 1]] }]); // a second snapshot, two more files
    expect(parquetFiles('tenant_acme', 'payments').length).toBe(6);
    const r = runCli(['retention', '--once', ...retentionFlags]);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    // stdout is the result, one line per table changed; log lines go to stderr (before stop 47 each
    // table's pino line came on stdout beside its result line).
    expect(lines.every((l) => l.msg === undefined && typeof l.namespace === 'string')).toBe(true);
    expect(new Set(lines.map((l) => `${l.namespace}.${l.table}`)).size).toBe(lines.length);
    expect(lines.find((l) => l.namespace === 'tenant_acme' && l.table === 'payments')).toMatchObject({ days: 3, filesDropped: 3, filesDeleted: 3 });

    // The cut-off is today − days (UTC): day −3 is gone for a 3-day index, day −7 kept for 7 days of logs.
    expect(await bodies('tenant_acme', 'payments')).toEqual(['p-0', 'p-1', 'p-2']);
    expect(await bodies('main', 'logs')).toEqual(['l-0', 'l-7']);
    // acme's logs lost their only day: the current snapshot lists no file (icebird refuses to read such a table, so count files).
    expect(parquetFiles('tenant_acme', 'logs')).toEqual([]);
    const acmeLogs = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_acme', 'logs'))!), 'utf8'));
    const cur = acmeLogs.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === acmeLogs['current-snapshot-id']);
    expect(cur.summary).toMatchObject({ operation: 'delete', 'total-data-files': '0', 'total-records': '0' });
    const loc = (await lake.catalog.metadataLocation('tenant_acme', 'payments'))!;
    const live = (await icebirdDataFiles(loc)).map((x) => x.path);
    const duck = await duckQuery(`SELECT body FROM ${duckParquet(live)} ORDER BY body`);
    expect(duck.map((x) => x['body'])).toEqual(['p-0', 'p-1', 'p-2']);
    // Files of the dropped days are gone; only the live ones remain.
    expect(parquetFiles('tenant_acme', 'payments').sort()).toEqual(live.map((p) => fileURLToPath(p)).sort());
    expect(parquetFiles('main', 'logs').length).toBe(2);
    // A second round has nothing to do.
    const again = runCli(['retention', '--once', ...retentionFlags]);
    expect(again.status).toBe(0);
    expect(again.stdout).toBe('');
  });

  it('a kept snapshot whose manifest list cannot be read stops the expiry: no live file deleted, exit 1, and the next round expires once it reads again', async () => {
    for (const round of ['k1', 'k2', 'k3']) await land([{ tenant: 'keep', records: [[`${round}-0`, 0]] }]);
    const loc = (await lake.catalog.metadataLocation('tenant_keep', 'logs'))!;
    const meta = JSON.parse(fs.readFileSync(fileURLToPath(loc), 'utf8'));
    expect(meta.snapshots).toHaveLength(3);
    const current = meta.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === meta['current-snapshot-id']);
    const list = fileURLToPath(current['manifest-list']);
    const live = parquetFiles('tenant_keep', 'logs').sort();
    expect(live).toHaveLength(3);
    // A read that fails (an object store's 5xx after its retries, EIO): the list is not where it should be for this run.
    fs.renameSync(list, `${list}.away`);
    // No day to drop (logs kept forever): the round goes straight to expiring snapshots.
    const expiryOnly = [...flags, '--retention-snapshot-max-age-hours', '0'];
    const r = runCli(['retention', '--once', ...expiryOnly]);
    fs.renameSync(`${list}.away`, list);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stdout + r.stderr).toMatch(/retention failed for a table; next round retries/);
    expect(r.stdout + r.stderr).toMatch(/snapshot expiry stopped: the manifest list .* of a kept snapshot could not be read/);
    expect(parquetFiles('tenant_keep', 'logs').sort()).toEqual(live);
    expect(await bodies('tenant_keep', 'logs')).toEqual(['k1-0', 'k2-0', 'k3-0']);
    // Readable again: the two older snapshots expire, and every file the current one lists stays.
    const again = runCli(['retention', '--once', ...expiryOnly]);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_keep', 'logs'))!), 'utf8')).snapshots).toHaveLength(1);
    expect(parquetFiles('tenant_keep', 'logs').sort()).toEqual(live);
    expect(await bodies('tenant_keep', 'logs')).toEqual(['k1-0', 'k2-0', 'k3-0']);
  });

  it("an expired snapshot's manifest list that fails to read (not missing) stops the expiry: the snapshot stays, and the next round deletes its files", async () => {
    await land([{ tenant: 'flaky', records: [['x-10', 10], ['x-0', 0]] }]);
    const metaOf = async () => JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_flaky', 'logs'))!), 'utf8'));
    const first = (await metaOf()).snapshots[0];
    // The drop only (snapshots kept a day): x-10's file stays, referenced by the first snapshot.
    const drop = runCli(['retention', '--once', ...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '24']);
    expect(drop.status, drop.stderr).toBe(0);
    expect(await bodies('tenant_flaky', 'logs')).toEqual(['x-0']);
    expect(parquetFiles('tenant_flaky', 'logs')).toHaveLength(2);
    // A read that fails without saying "not found" (an object store's 503 after its retries; here
    // EISDIR): the first snapshot's list is a directory for this run.
    const list = fileURLToPath(first['manifest-list']);
    fs.renameSync(list, `${list}.away`);
    fs.mkdirSync(list);
    const expiryOnly = [...flags, '--retention-snapshot-max-age-hours', '0'];
    const r = runCli(['retention', '--once', ...expiryOnly]);
    fs.rmdirSync(list);
    fs.renameSync(`${list}.away`, list);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/snapshot expiry stopped: the manifest list .* of an expired snapshot could not be read/);
    // Before, the read was skipped and the snapshot removed anyway: x-10's file stayed for ever,
    // referenced by nothing any later round could find.
    expect((await metaOf()).snapshots.map((x: { 'snapshot-id': number }) => String(x['snapshot-id']))).toContain(String(first['snapshot-id']));
    expect(parquetFiles('tenant_flaky', 'logs')).toHaveLength(2);
    const again = runCli(['retention', '--once', ...expiryOnly]);
    expect(again.status, again.stderr).toBe(0);
    expect((await metaOf()).snapshots).toHaveLength(1);
    const live = (await icebirdDataFiles((await lake.catalog.metadataLocation('tenant_flaky', 'logs'))!)).map((x) => fileURLToPath(x.path));
    expect(parquetFiles('tenant_flaky', 'logs')).toEqual(live);
    expect(await bodies('tenant_flaky', 'logs')).toEqual(['x-0']);
  });

  it('a snapshot counts its age from when it was replaced: the drop on a table quiet for two days deletes nothing a query planned a moment before still reads', async () => {
    await land([{ tenant: 'quiet', records: [['q-10', 10], ['q-0', 0]] }]);
    const loc = (await lake.catalog.metadataLocation('tenant_quiet', 'logs'))!;
    const files = parquetFiles('tenant_quiet', 'logs').sort();
    expect(files).toHaveLength(2);
    // The table's one snapshot was made two days ago (the file edited in place; the text, so
    // that 64-bit snapshot ids keep every digit).
    const twoDaysAgo = (t: string) => String(Number(t) - 48 * 3_600_000);
    const text = fs.readFileSync(fileURLToPath(loc), 'utf8');
    fs.writeFileSync(fileURLToPath(loc), text.replace(/("timestamp-ms"\s*:\s*)(\d+)/g, (_m, k: string, t: string) => k + twoDaysAgo(t)));
    const keepADay = [...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '24'];
    const r = runCli(['retention', '--once', ...keepADay]);
    expect(r.status, r.stderr).toBe(0);
    expect(await bodies('tenant_quiet', 'logs')).toEqual(['q-0']);
    // The snapshot the drop replaced stays a day more, and so does the file only it lists.
    const meta = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_quiet', 'logs'))!), 'utf8'));
    expect(meta.snapshots).toHaveLength(2);
    expect(parquetFiles('tenant_quiet', 'logs').sort()).toEqual(files);
    // Once it has been replaced for longer than the bound, it goes, with the file.
    const r0 = runCli(['retention', '--once', ...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '0']);
    expect(r0.status, r0.stderr).toBe(0);
    expect(parquetFiles('tenant_quiet', 'logs')).toHaveLength(1);
    expect(await bodies('tenant_quiet', 'logs')).toEqual(['q-0']);
  });

  it("rewrites another engine's deflate manifest readably, and records the dropped files as DELETED entries of its snapshot", async () => {
    await land([{ tenant: 'mixed', records: [['m-10', 10], ['m-0', 0]] }]);
    const metaOf = async () => JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_mixed', 'logs'))!), 'utf8'));
    const currentOf = (meta: { snapshots: { 'snapshot-id': number; 'manifest-list': string }[]; 'current-snapshot-id': number }) =>
      meta.snapshots.find((x) => x['snapshot-id'] === meta['current-snapshot-id'])!;
    const readList = (list: string): AvroRecord[] => AvroFile.decode(fs.readFileSync(fileURLToPath(list))).records;
    const manifestsOf = async (list: string) => (readList(list)).map((m) => String(m['manifest_path']));
    // The manifest as Iceberg Java or pyiceberg writes it: the same entries, deflate-compressed blocks.
    const [manifest] = await manifestsOf(currentOf(await metaOf())['manifest-list']);
    const orig = AvroFile.decode(fs.readFileSync(fileURLToPath(manifest!)));
    const metadata: Record<string, Buffer> = {};
    for (const [k, v] of orig.metadata) if (!k.startsWith('avro.')) metadata[k] = Buffer.from(v, 'utf8');
    const deflated: Buffer[] = [];
    const enc = new avro.streams.BlockEncoder(AvroFile.typeOf(orig.schema), {
      codec: 'deflate',
      codecs: { deflate: zlib.deflateRaw },
      metadata, // avsc writes these header keys (its typings omit the option)
    } as unknown as ConstructorParameters<typeof avro.streams.BlockEncoder>[1]);
    enc.on('data', (b: Buffer) => deflated.push(b));
    const done = new Promise((r) => enc.on('end', r));
    for (const rec of orig.records) enc.write(rec);
    enc.end();
    await done;
    fs.writeFileSync(fileURLToPath(manifest!), Buffer.concat(deflated));
    const reencoded = AvroFile.decode(fs.readFileSync(fileURLToPath(manifest!)));
    expect([reencoded.metadata.get('avro.codec'), reencoded.metadata.get('partition-spec-id'), reencoded.records.length]).toEqual(['deflate', '0', 2]);
    expect(await bodies('tenant_mixed', 'logs')).toEqual(['m-0', 'm-10']);

    const r = runCli(['retention', '--once', ...[...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '24']]);
    expect(r.status, r.stderr).toBe(0);
    // Every reader still opens it (the header named deflate over uncompressed blocks: "invalid stored block lengths").
    expect(await bodies('tenant_mixed', 'logs')).toEqual(['m-0']);
    const meta = await metaOf();
    const cur = currentOf(meta);
    const [rewritten, ...more] = await manifestsOf(cur['manifest-list']);
    expect(more).toEqual([]);
    const file = AvroFile.decode(fs.readFileSync(fileURLToPath(rewritten!)));
    expect(file.metadata.get('avro.codec')).toBe('null');
    expect(file.metadata.get('content')).toBe('data');
    const raw = fs.readFileSync(fileURLToPath(rewritten!)).toString('latin1');
    expect(raw.split('avro.codec').length - 1).toBe(1);
    const entries = file.records.map((e) => ({ status: e['status'], snapshot: String(e['snapshot_id']), day: Number(((e['data_file'] as Record<string, unknown>)['partition'] as Record<string, unknown>)['time_day']) }));
    const todayDay = Math.floor(Date.now() / 86_400_000);
    expect(entries.sort((a, b) => a.day - b.day)).toEqual([
      { status: 2, snapshot: String(cur['snapshot-id']), day: todayDay - 10 },
      { status: 0, snapshot: String(meta.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] !== cur['snapshot-id'])['snapshot-id']), day: todayDay },
    ]);
    const listed = readList(cur['manifest-list'])[0]!;
    expect([listed['existing_files_count'], listed['deleted_files_count'], String(listed['added_snapshot_id'])]).toEqual([1, 1, String(cur['snapshot-id'])]);
    // The next append does not carry a manifest of deletes only; expiry still finds the dropped file.
    await land([{ tenant: 'mixed', records: [['m-0b', 0]] }]);
    expect(await bodies('tenant_mixed', 'logs')).toEqual(['m-0', 'm-0b']);
    expect(parquetFiles('tenant_mixed', 'logs')).toHaveLength(3);
    const r0 = runCli(['retention', '--once', ...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '0']);
    expect(r0.status, r0.stderr).toBe(0);
    expect(parquetFiles('tenant_mixed', 'logs')).toHaveLength(2);
    expect(await bodies('tenant_mixed', 'logs')).toEqual(['m-0', 'm-0b']);
  });

  it("keeps another engine's manifest fields when it drops a day: nan_value_counts, and an equality delete's equality_ids", async () => {
    await land([{ tenant: 'foreign', records: [['f-10', 10], ['f-0', 0]] }]);
    const metaOf = async () => JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_foreign', 'logs'))!), 'utf8'));
    const listOf = (meta: { snapshots: { 'snapshot-id': number; 'manifest-list': string }[]; 'current-snapshot-id': number }) =>
      meta.snapshots.find((x) => x['snapshot-id'] === meta['current-snapshot-id'])!['manifest-list'];
    const listPath = fileURLToPath(listOf(await metaOf()));
    const list = AvroFile.decode(fs.readFileSync(listPath)).records;
    expect(list).toHaveLength(1);
    const manifest = String(list[0]!['manifest_path']);
    const src = AvroFile.decode(fs.readFileSync(fileURLToPath(manifest)));
    // The writer schema of Iceberg Java or pyiceberg: data_file also has nan_value_counts and equality_ids.
    const foreign = structuredClone(src.schema) as { fields: { name: string; type: { fields: unknown[] } }[] };
    const df = foreign.fields.find((f) => f.name === 'data_file')!.type.fields;
    df.push({ name: 'nan_value_counts', type: ['null', { type: 'array', logicalType: 'map', items: { type: 'record', name: 'k138_v139', fields: [{ name: 'key', type: 'int', 'field-id': 138 }, { name: 'value', type: 'long', 'field-id': 139 }] } }], default: null, 'field-id': 137 });
    df.push({ name: 'equality_ids', type: ['null', { type: 'array', items: 'int', 'element-id': 136 }], default: null, 'field-id': 135 });
    const header: Record<string, string> = {};
    for (const [k, v] of src.metadata) if (!k.startsWith('avro.')) header[k] = v;
    const withFields = (e: AvroRecord, extra: Record<string, unknown>) => ({ ...e, data_file: { ...(e['data_file'] as AvroRecord), nan_value_counts: [{ key: 2, value: 0n }], equality_ids: null, ...extra } });
    fs.writeFileSync(fileURLToPath(manifest), AvroFile.encode(foreign, src.records.map((e) => withFields(e, {})), header));
    // An equality-delete manifest (as Flink or Iceberg Java write one): a delete file per day.
    const deletes = manifest.replace(/[^/]*$/, 'foreign-deletes-m0.avro');
    const drecs = src.records.map((e, i) => withFields(e, { content: 2, file_path: `${String((e['data_file'] as AvroRecord)['file_path'])}-eqdel-${i}.parquet`, equality_ids: [1] }));
    fs.writeFileSync(fileURLToPath(deletes), AvroFile.encode(foreign, drecs, { ...header, content: 'deletes' }));
    fs.writeFileSync(listPath, AvroFile.encode(JSON.parse(AvroFile.decode(fs.readFileSync(listPath)).metadata.get('avro.schema')!), [list[0]!, { ...list[0]!, content: 1, manifest_path: deletes }], {}));

    const r = runCli(['retention', '--once', ...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '24']);
    expect(r.status, r.stderr).toBe(0);
    const after = AvroFile.decode(fs.readFileSync(fileURLToPath(listOf(await metaOf())))).records;
    const byContent = new Map(after.map((m) => [Number(m['content']), AvroFile.decode(fs.readFileSync(fileURLToPath(String(m['manifest_path']))))]));
    expect([...byContent.keys()].sort()).toEqual([0, 1]);
    const todayDay = Math.floor(Date.now() / 86_400_000);
    const view = (e: AvroRecord) => {
      const f = e['data_file'] as AvroRecord;
      return { status: e['status'], day: Number((f['partition'] as AvroRecord)['time_day']), content: f['content'], nan: f['nan_value_counts'], eq: f['equality_ids'] };
    };
    const nan = [{ key: 2, value: 0n }];
    // Before, both manifests came back in Siglake's entry schema: no nan_value_counts, and
    // equality-delete files without the equality_ids the spec requires of them.
    expect(byContent.get(0)!.records.map(view).sort((a, b) => a.day - b.day)).toEqual([
      { status: 2, day: todayDay - 10, content: 0, nan, eq: null },
      { status: 0, day: todayDay, content: 0, nan, eq: null },
    ]);
    expect(byContent.get(1)!.records.map(view).sort((a, b) => a.day - b.day)).toEqual([
      { status: 2, day: todayDay - 10, content: 2, nan, eq: [1] },
      { status: 0, day: todayDay, content: 2, nan, eq: [1] },
    ]);
    expect(byContent.get(1)!.metadata.get('content')).toBe('deletes');
  });

  it("a manifest left with deleted entries only is in the drop's snapshot, and the next append does not carry it", async () => {
    await land([{ tenant: 'alldrop', records: [['d-10', 10]] }]);
    const listOf = async () => {
      const meta = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_alldrop', 'logs'))!), 'utf8'));
      const cur = meta.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === meta['current-snapshot-id']);
      return AvroFile.decode(fs.readFileSync(fileURLToPath(cur['manifest-list']))).records.map((m) => [m['added_files_count'], m['existing_files_count'], m['deleted_files_count']]);
    };
    const r = runCli(['retention', '--once', ...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '24']);
    expect(r.status, r.stderr).toBe(0);
    expect(await listOf()).toEqual([[0, 0, 1]]); // the drop, recorded
    await land([{ tenant: 'alldrop', records: [['d-0', 0]] }]);
    expect(await listOf()).toEqual([[1, 0, 0]]); // only the new manifest
    expect(await bodies('tenant_alldrop', 'logs')).toEqual(['d-0']);
  });

  for (const step of ['dropped', 'expired', 'deleting'] as const) {
    it(`kill -9 at "${step}" leaves a table every reader opens; a rerun finishes the job`, async () => {
      await land([{ tenant: 'default', records: [[`old-${step}`, 20], [`new-${step}`, 0]] }]);
      const killed = runCli(['retention', '--once', ...retentionFlags], { env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_RETENTION: step } });
      expect(killed.status).toBeNull();
      const after = await bodies('main', 'logs');
      expect(after).toContain(`new-${step}`);
      // After the drop commit the old day is invisible even before the files go.
      expect(after).not.toContain(`old-${step}`);
      const live = (await icebirdDataFiles((await lake.catalog.metadataLocation('main', 'logs'))!)).map((x) => fileURLToPath(x.path));
      for (const p of live) expect(fs.existsSync(p)).toBe(true);
      const rerun = runCli(['retention', '--once', ...retentionFlags]);
      expect(rerun.status, rerun.stderr).toBe(0);
      const final = (await icebirdDataFiles((await lake.catalog.metadataLocation('main', 'logs'))!)).map((x) => fileURLToPath(x.path));
      expect(parquetFiles('main', 'logs').sort()).toEqual(final.sort());
      expect((await bodies('main', 'logs')).filter((b) => b.startsWith('old-'))).toEqual([]);
    });
  }

  it('a pending delete list that is gone (an orphan-file cleanup removed it) is cleared with a warning, and that round drops and expires as usual', async () => {
    await land([{ tenant: 'default', records: [['g-20', 20], ['g-0', 0]] }]);
    const metaOf = async () => JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('main', 'logs'))!), 'utf8'));
    // main.logs, the first table a round visits: the crash hook fires there.
    // kill -9 right after the expiry commit: the property names a list nothing in Iceberg references.
    const killed = runCli(['retention', '--once', ...retentionFlags], { env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_RETENTION: 'expired' } });
    expect(killed.status).toBeNull();
    const pending = (await metaOf()).properties['siglake.retention.pending-delete'];
    expect(pending).toMatch(/\/metadata\/retention-.*\.json$/);
    fs.rmSync(fileURLToPath(pending));
    await land([{ tenant: 'default', records: [['g-15', 15], ['g-0b', 0]] }]);
    // Before, every round failed the table reading the list (ENOENT), skipping its drop: g-15 stayed visible for ever.
    const r = runCli(['retention', '--once', ...retentionFlags]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/the pending delete list is gone; clearing it/);
    expect((await bodies('main', 'logs')).filter((b) => b.startsWith('g-'))).toEqual(['g-0', 'g-0b']);
    const meta = await metaOf();
    expect(meta.properties['siglake.retention.pending-delete']).toBeUndefined();
    expect(meta.snapshots).toHaveLength(1);
    // The file of g-15 went with this round's expiry; g-20's (named by the lost list) is the one
    // orphan the warning is about.
    const live = (await icebirdDataFiles((await lake.catalog.metadataLocation('main', 'logs'))!)).map((x) => fileURLToPath(x.path));
    const orphans = parquetFiles('main', 'logs').filter((f) => !live.includes(f));
    expect(orphans).toHaveLength(1);
    for (const f of orphans) fs.rmSync(f); // the next orphan-file cleanup's work
    const again = runCli(['retention', '--once', ...retentionFlags]);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toBe('');
  });

  it('two rounds at once on a table with a pending list: the one whose list read comes after the other finished it goes on, not fails', async () => {
    await land([{ tenant: 'race', records: [['r-10', 10], ['r-0', 0]] }]);
    await land([{ tenant: 'race', records: [['r-9', 9], ['r-0b', 0]] }]);
    const storage = new FileStorage(warehouse);
    const logged: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void logged.push(l) });
    const opts = { catalog: lake.catalog, log, logsDays: 7, tracesDays: 0, snapshotMaxAgeHours: 0 };
    // Round A stops right after its expiry commit (a kill -9 there, or a round just slower than B and C).
    const a = new Retention({ ...opts, storage, step: (n) => { if (n === 'expired') throw new Error('A stops after its expiry commit'); } });
    await expect(a.table('tenant_race', 'logs')).rejects.toThrow(/A stops/);
    const metaOf = async () => JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_race', 'logs'))!), 'utf8'));
    const pending = (await metaOf()).properties['siglake.retention.pending-delete'];
    expect(typeof pending).toBe('string');
    // Round B has loaded the table naming the list; its read of the list waits until round C finished it.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let atGate!: () => void;
    const reached = new Promise<void>((r) => (atGate = r));
    const slow: ObjectStorage = {
      rootUri: storage.rootUri,
      locationOf: (...seg) => storage.locationOf(...seg),
      putNew: (loc, bytes) => storage.putNew(loc, bytes),
      openSink: (loc) => storage.openSink(loc),
      delete: (loc) => storage.delete(loc),
      get: async (loc) => {
        if (loc === pending) {
          atGate();
          await gate;
        }
        return storage.get(loc);
      },
    };
    const b = new Retention({ ...opts, storage: slow }).table('tenant_race', 'logs');
    await reached;
    await new Retention({ ...opts, storage }).table('tenant_race', 'logs');
    expect(fs.existsSync(fileURLToPath(pending))).toBe(false);
    release();
    // Before, B failed the table reading the list C had removed (ENOENT).
    await expect(b).resolves.toMatchObject({ namespace: 'tenant_race', table: 'logs' });
    expect(logged.join('')).not.toMatch(/pending delete list is gone/);
    expect((await metaOf()).properties['siglake.retention.pending-delete']).toBeUndefined();
    expect(await bodies('tenant_race', 'logs')).toEqual(['r-0', 'r-0b']);
    const live = (await icebirdDataFiles((await lake.catalog.metadataLocation('tenant_race', 'logs'))!)).map((x) => fileURLToPath(x.path));
    expect(parquetFiles('tenant_race', 'logs').sort()).toEqual(live.sort());
  });

  it("expiry removes the statistics and partition-statistics entries of the snapshots it expires, and deletes their files (another engine's, as Spark's compute_table_stats writes them)", async () => {
    await land([{ tenant: 'stats', records: [['st-1', 0]] }]);
    await land([{ tenant: 'stats', records: [['st-2', 0]] }]);
    const loc = (await lake.catalog.metadataLocation('tenant_stats', 'logs'))!;
    const doc = LosslessJson.parse(fs.readFileSync(fileURLToPath(loc), 'utf8')) as Record<string, unknown>;
    const snaps = doc['snapshots'] as { 'snapshot-id': number | bigint }[];
    expect(snaps).toHaveLength(2);
    const current = String(doc['current-snapshot-id']);
    const old = String(snaps.find((x) => String(x['snapshot-id']) !== current)!['snapshot-id']);
    const idOf = (id: string) => snaps.find((x) => String(x['snapshot-id']) === id)!['snapshot-id'];
    const metaDir = path.join(path.dirname(fileURLToPath(loc)));
    // Puffin files and partition-statistics files in metadata/, as Iceberg Java names them; one
    // partition-statistics file named by both snapshots' entries (it must stay).
    const file = (name: string) => {
      fs.writeFileSync(path.join(metaDir, name), 'PFA1');
      return pathToFileURL(path.join(metaDir, name)).href;
    };
    const statsOld = file(`${old}-a.stats`);
    const statsCur = file(`${current}-b.stats`);
    const partOld = file(`partition-stats-${old}-c.parquet`);
    const partShared = file('partition-stats-shared-d.parquet');
    const stat = (id: string, p: string) => ({ 'snapshot-id': idOf(id), 'statistics-path': p, 'file-size-in-bytes': 4, 'file-footer-size-in-bytes': 0, 'blob-metadata': [] });
    doc['statistics'] = [stat(old, statsOld), stat(current, statsCur)];
    doc['partition-statistics'] = [
      { 'snapshot-id': idOf(old), 'statistics-path': partOld, 'file-size-in-bytes': 4 },
      { 'snapshot-id': idOf(old), 'statistics-path': partShared, 'file-size-in-bytes': 4 },
      { 'snapshot-id': idOf(current), 'statistics-path': partShared, 'file-size-in-bytes': 4 },
    ];
    fs.writeFileSync(fileURLToPath(loc), LosslessJson.stringify(doc as never));

    const r = runCli(['retention', '--once', ...flags, '--retention-snapshot-max-age-hours', '0']);
    expect(r.status, r.stderr).toBe(0);
    // No data file went (the current snapshot lists both), so none is counted.
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.namespace === 'tenant_stats')).toMatchObject({ snapshotsExpired: 1, filesDeleted: 0 });
    const after = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_stats', 'logs'))!), 'utf8'));
    const ids = after.snapshots.map((x: { 'snapshot-id': number }) => String(x['snapshot-id']));
    expect(ids).toEqual([current]);
    // Before, both lists kept the expired snapshot's entries (naming a snapshot no longer in
    // `snapshots`), and their files stayed for ever.
    const named = (k: string) => after[k].map((e: { 'snapshot-id': number; 'statistics-path': string }) => [String(e['snapshot-id']), e['statistics-path']]);
    expect(named('statistics')).toEqual([[current, statsCur]]);
    expect(named('partition-statistics')).toEqual([[current, partShared]]);
    expect([statsOld, statsCur, partOld, partShared].map((p) => fs.existsSync(fileURLToPath(p)))).toEqual([false, true, false, true]);
    expect(await bodies('tenant_stats', 'logs')).toEqual(['st-1', 'st-2']);
  });

  it("a writer's clock behind (or this host's ahead): the current snapshot, a tag's and the newest min-snapshots-to-keep stay; a clock ahead is warned about", async () => {
    for (const n of ['c-0', 'c-1', 'c-2', 'c-3']) await land([{ tenant: 'clock', records: [[n, 0]] }]);
    const locNow = async () => fileURLToPath((await lake.catalog.metadataLocation('tenant_clock', 'logs'))!);
    const edit = async (shiftMs: number, change: (doc: Record<string, unknown>) => void = () => undefined) => {
      const file = await locNow();
      // Every commit time shifted (the compactor's clock behind or ahead of this host's by that
      // much), edited in place; LosslessJson keeps the 64-bit snapshot ids.
      const text = fs.readFileSync(file, 'utf8').replace(/("timestamp-ms"\s*:\s*)(\d+)/g, (_m, k: string, t: string) => k + String(Number(t) + shiftMs));
      const doc = LosslessJson.parse(text) as Record<string, unknown>;
      doc['last-updated-ms'] = Number(doc['last-updated-ms']) + shiftMs;
      change(doc);
      fs.writeFileSync(file, LosslessJson.stringify(doc as never));
    };
    const meta = () => locNow().then((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
    const m0 = await meta();
    // Oldest first: c-0's snapshot .. c-3's (current).
    const ids = (m0['snapshot-log'] as { 'snapshot-id': number }[]).map((e) => String(e['snapshot-id']));
    expect(ids).toHaveLength(4);
    const idOf = (id: string, doc: Record<string, unknown>) => (doc['snapshots'] as { 'snapshot-id': unknown }[]).find((x) => String(x['snapshot-id']) === id)!['snapshot-id'];
    // As Spark sets them: ALTER TABLE … SET TBLPROPERTIES ('history.expire.min-snapshots-to-keep'='2'),
    // and a tag on the first snapshot.
    await edit(-48 * 3_600_000, (doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'history.expire.min-snapshots-to-keep': '2' };
      doc['refs'] = { ...(doc['refs'] as object), audit: { 'snapshot-id': idOf(ids[0]!, doc), type: 'tag' } };
    });
    // Snapshots kept a day, and every commit looks two days old to this host: only c-1's snapshot,
    // neither current, tagged nor among the newest two of main, goes. (Before, min-snapshots-to-keep
    // was not read: c-2's went too, replaced a moment ago in the writer's time.)
    const r = runCli(['retention', '--once', ...flags, '--retention-snapshot-max-age-hours', '24']);
    expect(r.status, r.stderr).toBe(0);
    const m1 = await meta();
    expect(m1.snapshots.map((x: { 'snapshot-id': number }) => String(x['snapshot-id'])).sort()).toEqual([ids[0], ids[2], ids[3]].sort());
    expect(String(m1['current-snapshot-id'])).toBe(ids[3]);
    expect(await bodies('tenant_clock', 'logs')).toEqual(['c-0', 'c-1', 'c-2', 'c-3']);
    const live = (await icebirdDataFiles((await lake.catalog.metadataLocation('tenant_clock', 'logs'))!)).map((x) => fileURLToPath(x.path));
    for (const f of live) expect(fs.existsSync(f)).toBe(true);

    // A writer's clock ahead (here by two hours, past the two days above): nothing is old enough
    // to go even with snapshots kept 0 hours, and the round says why.
    await edit(50 * 3_600_000);
    const ahead = runCli(['retention', '--once', ...flags, '--retention-snapshot-max-age-hours', '0']);
    expect(ahead.status, ahead.stderr).toBe(0);
    expect(ahead.stderr).toMatch(/tenant_clock\.logs.*timestamped ahead of this host's clock/);
    expect((await meta()).snapshots).toHaveLength(3);
  });

  it('regression (expiry-ignored-max-snapshot-age): a table or branch asking to keep snapshots longer is heeded, never shorter than the setting', async () => {
    // Before stop 50 expiry read only retention.snapshotMaxAgeHours: a table owner's
    // history.expire.max-snapshot-age-ms (Spark's ALTER TABLE … SET TBLPROPERTIES) or a branch's
    // max-snapshot-age-ms asking for a week of time travel got Siglake's day.
    for (const n of ['a-0', 'a-1', 'a-2', 'a-3']) await land([{ tenant: 'maxage', records: [[n, 0]] }]);
    const locNow = async () => fileURLToPath((await lake.catalog.metadataLocation('tenant_maxage', 'logs'))!);
    const meta = () => locNow().then((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
    // Every commit two days old (edited in place; LosslessJson keeps the 64-bit ids), with the given properties and refs.
    const edit = async (change: (doc: Record<string, unknown>) => void) => {
      const file = await locNow();
      const text = fs.readFileSync(file, 'utf8').replace(/("timestamp-ms"\s*:\s*)(\d+)/g, (_m, k: string, t: string) => k + String(Number(t) - 48 * 3_600_000));
      const doc = LosslessJson.parse(text) as Record<string, unknown>;
      doc['last-updated-ms'] = Number(doc['last-updated-ms']) - 48 * 3_600_000;
      change(doc);
      fs.writeFileSync(file, LosslessJson.stringify(doc as never));
    };
    const ids = ((await meta())['snapshot-log'] as { 'snapshot-id': number }[]).map((e) => String(e['snapshot-id']));
    expect(ids).toHaveLength(4);
    const idOf = (id: string, doc: Record<string, unknown>) => (doc['snapshots'] as { 'snapshot-id': unknown }[]).find((x) => String(x['snapshot-id']) === id)!['snapshot-id'];
    const week = String(7 * 24 * 3_600_000);
    const expire = () => runCli(['retention', '--once', ...flags, '--retention-snapshot-max-age-hours', '24']);
    // Long.MAX_VALUE ("for ever") is past 2^53: it was read as unset, and the day of the setting expired three.
    await edit((doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'history.expire.max-snapshot-age-ms': '9223372036854775807' };
    });
    let r = expire();
    expect(r.status, r.stderr).toBe(0);
    expect((await meta()).snapshots).toHaveLength(4);
    await edit((doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'history.expire.max-snapshot-age-ms': week };
    });
    r = expire();
    expect(r.status, r.stderr).toBe(0);
    expect((await meta()).snapshots).toHaveLength(4);
    // A property shorter than the setting (an hour) does not shorten it: snapshots two days old go
    // with the day of the setting, except a branch's ancestry that asks for a week.
    await edit((doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'history.expire.max-snapshot-age-ms': '3600000' };
      doc['refs'] = { ...(doc['refs'] as object), audit: { 'snapshot-id': idOf(ids[1]!, doc), type: 'branch', 'max-snapshot-age-ms': Number(week) } };
    });
    r = expire();
    expect(r.status, r.stderr).toBe(0);
    const kept = (await meta()).snapshots.map((x: { 'snapshot-id': number }) => String(x['snapshot-id'])).sort();
    // a-0 and a-1 (the audit branch's ancestry) and a-3 (current) stay; a-2 goes.
    expect(kept).toEqual([ids[0], ids[1], ids[3]].sort());
    expect(await bodies('tenant_maxage', 'logs')).toEqual(['a-0', 'a-1', 'a-2', 'a-3']);
  });

  it("regression (expiry-ignored-max-ref-age): a branch or tag older than its max-ref-age-ms is removed (never main) and the files only it kept are deleted; the ref's own value beats the table property", async () => {
    // Before, max-ref-age-ms was not read: a tag an operator set to age out (Spark's ALTER TABLE …
    // CREATE TAG … RETAIN 1 HOURS, or the table property history.expire.max-ref-age-ms) kept its
    // snapshot, and the files of the days dropped since, for ever.
    const hour = 3_600_000;
    const tenants = ['refgone', 'refkept', 'refprop'] as const;
    // One snapshot per table, two files: day -10 (past the 7 days of logs) and today.
    await land(tenants.map((t) => ({ tenant: t, records: [[`${t}-10`, 10], [`${t}-0`, 0]] as [string, number][] })));
    const locOf = async (t: string) => fileURLToPath((await lake.catalog.metadataLocation(`tenant_${t}`, 'logs'))!);
    const meta = async (t: string) => JSON.parse(fs.readFileSync(await locOf(t), 'utf8'));
    const edit = async (t: string, shiftMs: number, change: (doc: Record<string, unknown>) => void) => {
      // Edited in place; LosslessJson keeps the 64-bit ids. Every commit time shifted by shiftMs.
      const file = await locOf(t);
      const text = fs.readFileSync(file, 'utf8').replace(/("timestamp-ms"\s*:\s*)(\d+)/g, (_m, k: string, v: string) => k + String(Number(v) + shiftMs));
      const doc = LosslessJson.parse(text) as Record<string, unknown>;
      doc['last-updated-ms'] = Number(doc['last-updated-ms']) + shiftMs;
      change(doc);
      fs.writeFileSync(file, LosslessJson.stringify(doc as never));
    };
    const refs = (doc: Record<string, unknown>) => doc['refs'] as Record<string, Record<string, unknown>>;
    // A tag `release` and a branch `dev` on that first snapshot (refgone: the tag only), no ages yet.
    for (const t of tenants) {
      await edit(t, 0, (doc) => {
        const first = { 'snapshot-id': refs(doc)['main']!['snapshot-id'] };
        doc['refs'] = { ...refs(doc), release: { ...first, type: 'tag' }, ...(t === 'refgone' ? {} : { dev: { ...first, type: 'branch' } }) };
      });
    }
    const round = () => {
      const r = runCli(['retention', '--once', ...flags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '24']);
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    };
    // Round 1 drops day -10 from every reader; the refs keep the first snapshot, and its file.
    round();
    const old = new Map<string, string>();
    for (const t of tenants) {
      expect(await bodies(`tenant_${t}`, 'logs')).toEqual([`${t}-0`]);
      const live = (await icebirdDataFiles((await lake.catalog.metadataLocation(`tenant_${t}`, 'logs'))!)).map((x) => fileURLToPath(x.path));
      const gone = parquetFiles(`tenant_${t}`, 'logs').filter((f) => !live.includes(f));
      expect(gone).toHaveLength(1);
      old.set(t, gone[0]!);
    }
    // Two days later (every commit two days old), with the ages set:
    // refgone: the tag says an hour (its snapshot is two days old): it goes, and with it the snapshot and its file.
    await edit('refgone', -48 * hour, (doc) => {
      refs(doc)['release']!['max-ref-age-ms'] = hour;
    });
    // refkept: no max-ref-age-ms anywhere: every ref stays, for ever, as before.
    await edit('refkept', -48 * hour, () => undefined);
    // refprop: the table says an hour; the tag says a week (the ref's own value wins: it stays);
    // the branch has no value of its own (the table's applies: it goes); main never goes. A tag
    // with Long.MAX_VALUE (past 2^53: read as a bigint) stays too, not taken as unset.
    await edit('refprop', -48 * hour, (doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'history.expire.max-ref-age-ms': String(hour) };
      refs(doc)['release']!['max-ref-age-ms'] = 7 * 24 * hour;
      refs(doc)['forever'] = { ...refs(doc)['release']!, 'max-ref-age-ms': 9223372036854775807n };
    });
    const lines = round();
    expect(lines.find((l) => l.namespace === 'tenant_refgone')).toMatchObject({ refsRemoved: 1, snapshotsExpired: 1, filesDeleted: 1 });
    expect(lines.find((l) => l.namespace === 'tenant_refprop')).toMatchObject({ refsRemoved: 1, snapshotsExpired: 0, filesDeleted: 0 });
    expect(lines.find((l) => l.namespace === 'tenant_refkept')).toBeUndefined();
    const after = Object.fromEntries(await Promise.all(tenants.map(async (t) => [t, await meta(t)] as const)));
    expect(Object.keys(after.refgone.refs).sort()).toEqual(['main']);
    expect(after.refgone.snapshots).toHaveLength(1);
    expect(fs.existsSync(old.get('refgone')!)).toBe(false);
    expect(Object.keys(after.refkept.refs).sort()).toEqual(['dev', 'main', 'release']);
    expect(after.refkept.snapshots).toHaveLength(2);
    expect(fs.existsSync(old.get('refkept')!)).toBe(true);
    expect(Object.keys(after.refprop.refs).sort()).toEqual(['forever', 'main', 'release']);
    expect(after.refprop.snapshots).toHaveLength(2);
    expect(fs.existsSync(old.get('refprop')!)).toBe(true);
    for (const t of tenants) {
      // Readers still see today's rows; every data file left on disk is live or kept by a ref.
      expect(await bodies(`tenant_${t}`, 'logs')).toEqual([`${t}-0`]);
      expect(parquetFiles(`tenant_${t}`, 'logs')).toHaveLength(t === 'refgone' ? 1 : 2);
    }
    // The next round has nothing to do.
    expect(round()).toEqual([]);
  });

  for (const step of ['commit', 'expiry', 'drop'] as const) {
    it(`two rounds from the same metadata (a stale loser at its ${step}): the one whose snapshots another round expired first re-reads and succeeds, nothing reported failed`, async () => {
      const tenant = `stale${step}`;
      const ns = `tenant_${tenant}`;
      // For the drop: an old day, which B is about to drop when it stalls; else none.
      await land([{ tenant, records: step === 'drop' ? [['s-1', 0], ['s-old', 10]] : [['s-1', 0]] }]);
      await land([{ tenant, records: [['s-2', 0]] }]);
      const days = step === 'drop' ? 7 : 0;
      const metaOf = async () => JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation(ns, 'logs'))!), 'utf8'));
      const before = await metaOf();
      expect(before.snapshots).toHaveLength(2);
      const currentList = before.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === before['current-snapshot-id'])['manifest-list'];
      const storage = new FileStorage(warehouse);
      const logged: string[] = [];
      const log = pino({ level: 'info' }, { write: (l: string) => void logged.push(l) });
      // Round B (a second pod's, or the compactor loop's beside `siglake retention`) has read the
      // metadata and stalls (a GC pause, a slow store): at "commit" just before its expiry commit,
      // which then loses the compare-and-set; else about to read the current snapshot's manifest
      // list (to drop from it, or as the snapshot its expiry keeps).
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let atGate!: () => void;
      const reached = new Promise<void>((r) => (atGate = r));
      let gated = false;
      const stall = async (here: boolean) => {
        if (!here || gated) return;
        gated = true;
        atGate();
        await gate;
      };
      const slow: ObjectStorage = {
        rootUri: storage.rootUri,
        locationOf: (...seg) => storage.locationOf(...seg),
        putNew: async (loc, bytes) => {
          await stall(step === 'commit' && /\/metadata\/retention-[^/]*\.json$/.test(loc));
          return storage.putNew(loc, bytes);
        },
        openSink: (loc) => storage.openSink(loc),
        delete: (loc) => storage.delete(loc),
        get: async (loc) => {
          await stall(step !== 'commit' && loc === currentList);
          return storage.get(loc);
        },
      };
      const b = new Retention({ catalog: lake.catalog, storage: slow, log, logsDays: days, tracesDays: 0, snapshotMaxAgeHours: 0 }).runOnce();
      await reached;
      // Meanwhile the compactor lands another snapshot, and `siglake retention --once` (another
      // process) drops the old day, expires every older snapshot and deletes their files: B's
      // snapshot (to keep, or to drop from) among them.
      if (step !== 'commit') await land([{ tenant, records: [['s-3', 0]] }]);
      const a = runCli(['retention', '--once', ...flags, '--retention-logs-days', String(days), '--retention-snapshot-max-age-hours', '0']);
      expect(a.status, a.stderr).toBe(0);
      expect((await metaOf()).snapshots).toHaveLength(1);
      expect(fs.existsSync(fileURLToPath(currentList))).toBe(step === 'commit');
      release();
      // Before, B failed the table (the drop: ENOENT reading the list A had deleted; the expiry:
      // "snapshot expiry stopped: the manifest list … of a kept snapshot could not be read"): an
      // error log and, for `siglake retention --once`, exit 1, though the work was done as wanted.
      const r = await b;
      expect(logged.join('')).not.toMatch(/retention failed/);
      if (step !== 'drop') expect(logged.join('')).toMatch(/another round expired these snapshots first/);
      expect(r.failed).toBe(0);
      expect(r.tables.find((t) => t.namespace === ns)).toMatchObject({ filesDropped: 0, snapshotsExpired: 0, filesDeleted: 0 });
      expect((await metaOf()).snapshots).toHaveLength(1);
      expect(await bodies(ns, 'logs')).toEqual(step === 'commit' ? ['s-1', 's-2'] : ['s-1', 's-2', 's-3']);
      const live = (await icebirdDataFiles((await lake.catalog.metadataLocation(ns, 'logs'))!)).map((x) => fileURLToPath(x.path));
      expect(parquetFiles(ns, 'logs').sort()).toEqual(live.sort());
    });
  }

  /** Edits the current metadata file of `<ns>.logs` in place (as another engine's commit would have written it). */
  const editMeta = async (ns: string, change: (doc: Record<string, unknown>, metaDir: string) => void) => {
    const file = fileURLToPath((await lake.catalog.metadataLocation(ns, 'logs'))!);
    const doc = LosslessJson.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    change(doc, path.dirname(file));
    fs.writeFileSync(file, LosslessJson.stringify(doc as never));
  };
  /** Victim's one data file (URI and path), and its rows as icebird reads them. */
  const victimFile = async (ns: string) => {
    const uri = (await icebirdDataFiles((await lake.catalog.metadataLocation(ns, 'logs'))!))[0]!.path;
    return { uri, file: fileURLToPath(uri) };
  };

  it("regression (retention-deletes-outside-table): a statistics entry of thief's expired snapshot naming victim's data file deletes nothing of victim's", async () => {
    await land([{ tenant: 'victim1', records: [['v1-0', 0]] }]);
    for (const n of ['t1-1', 't1-2']) await land([{ tenant: 'thief1', records: [[n, 0]] }]);
    const v = await victimFile('tenant_victim1');
    // Iceberg lets a writer name any path: here a Puffin entry of thief1's older snapshot names
    // victim1's data file (another engine's commit with thief1's credentials).
    await editMeta('tenant_thief1', (doc) => {
      const old = (doc['snapshots'] as { 'snapshot-id': unknown }[]).find((x) => String(x['snapshot-id']) !== String(doc['current-snapshot-id']))!;
      doc['statistics'] = [{ 'snapshot-id': old['snapshot-id'], 'statistics-path': v.uri, 'file-size-in-bytes': 4, 'file-footer-size-in-bytes': 0, 'blob-metadata': [] }];
    });
    const r = runCli(['retention', '--once', ...flags, '--retention-snapshot-max-age-hours', '0']);
    expect(r.status, r.stderr).toBe(0);
    // Before, the expiry listed and deleted victim1's only data file: its table was left naming a file gone.
    expect(fs.existsSync(v.file)).toBe(true);
    expect(await bodies('tenant_victim1', 'logs')).toEqual(['v1-0']);
    expect(r.stderr).toMatch(/tenant_thief1\.logs.*files outside the table's location are named by its metadata; left alone/);
    // thief1's own expiry went on: its older snapshot and its entry are gone, its rows stay.
    const line = r.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.namespace === 'tenant_thief1');
    expect(line).toMatchObject({ snapshotsExpired: 1 });
    const after = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_thief1', 'logs'))!), 'utf8'));
    expect(after.snapshots).toHaveLength(1);
    expect(after.statistics).toEqual([]);
    expect(await bodies('tenant_thief1', 'logs')).toEqual(['t1-1', 't1-2']);
  });

  it("regression (retention-deletes-outside-table): a pending delete list of thief's naming victim's data file deletes only thief's own files", async () => {
    await land([{ tenant: 'victim2', records: [['v2-0', 0]] }]);
    await land([{ tenant: 'thief2', records: [['t2-0', 0]] }]);
    const v = await victimFile('tenant_victim2');
    // A stray file of thief2's own, listed beside victim2's: the list is honoured for what is thief2's.
    const ownStray = path.join(warehouse, 'tenant_thief2', 'logs', 'data', 'stray.parquet');
    fs.writeFileSync(ownStray, 'PAR1');
    await editMeta('tenant_thief2', (doc, metaDir) => {
      const list = path.join(metaDir, 'retention-planted.json');
      fs.writeFileSync(list, JSON.stringify([v.uri, pathToFileURL(ownStray).href]));
      doc['properties'] = { ...(doc['properties'] as object), 'siglake.retention.pending-delete': pathToFileURL(list).href };
    });
    const r = runCli(['retention', '--once', ...flags]);
    expect(r.status, r.stderr).toBe(0);
    // Before, the list's every path was deleted: victim2's only data file with it.
    expect(fs.existsSync(v.file)).toBe(true);
    expect(await bodies('tenant_victim2', 'logs')).toEqual(['v2-0']);
    expect(fs.existsSync(ownStray)).toBe(false);
    expect(r.stderr).toMatch(/tenant_thief2\.logs.*files outside the table's location/);
    const after = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_thief2', 'logs'))!), 'utf8'));
    expect(after.properties['siglake.retention.pending-delete']).toBeUndefined();
    expect(await bodies('tenant_thief2', 'logs')).toEqual(['t2-0']);
  });

  it('regression (retention-deletes-outside-table): a pending delete list that is not a list of strings is cleared, not a failure every round', async () => {
    await land([{ tenant: 'badlist', records: [['b-0', 0]] }]);
    await editMeta('tenant_badlist', (doc, metaDir) => {
      const list = path.join(metaDir, 'retention-not-a-list.json');
      fs.writeFileSync(list, JSON.stringify({ files: ['x'] }));
      doc['properties'] = { ...(doc['properties'] as object), 'siglake.retention.pending-delete': pathToFileURL(list).href };
    });
    // Before, every round failed the table (the list was iterated as an array): exit 1, its retention stopped for ever.
    const r = runCli(['retention', '--once', ...flags]);
    expect(r.status, r.stderr).toBe(0);
    const after = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_badlist', 'logs'))!), 'utf8'));
    expect(after.properties['siglake.retention.pending-delete']).toBeUndefined();
    expect(await bodies('tenant_badlist', 'logs')).toEqual(['b-0']);
    // Nor is a "list" outside the table's location read or deleted: here another tenant's current
    // metadata file (JSON, not a list), which deleting after the commit would break that table.
    await land([{ tenant: 'victim3', records: [['v3-0', 0]] }]);
    const victimMeta = (await lake.catalog.metadataLocation('tenant_victim3', 'logs'))!;
    await editMeta('tenant_badlist', (doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'siglake.retention.pending-delete': victimMeta };
    });
    const r2 = runCli(['retention', '--once', ...flags]);
    expect(r2.status, r2.stderr).toBe(0);
    expect(fs.existsSync(fileURLToPath(victimMeta))).toBe(true);
    expect(await bodies('tenant_victim3', 'logs')).toEqual(['v3-0']);
    const after2 = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_badlist', 'logs'))!), 'utf8'));
    expect(after2.properties['siglake.retention.pending-delete']).toBeUndefined();
  });

  it('regression (retention-ignores-gc-enabled): a table with gc.enabled=false has its old days dropped, but no snapshot expired and no file deleted', async () => {
    await land([{ tenant: 'gcoff', records: [['gc-20', 20], ['gc-0', 0]] }]);
    await land([{ tenant: 'gcoff', records: [['gc-0b', 0]] }]);
    // As Spark's snapshot procedure leaves a table whose files are another table's too.
    await editMeta('tenant_gcoff', (doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'gc.enabled': 'false' };
    });
    const filesBefore = filesUnder(path.join(warehouse, 'tenant_gcoff')).sort();
    const r = runCli(['retention', '--once', ...retentionFlags]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.namespace === 'tenant_gcoff')).toMatchObject({ filesDropped: 1, snapshotsExpired: 0, filesDeleted: 0 });
    expect(await bodies('tenant_gcoff', 'logs')).toEqual(['gc-0', 'gc-0b']);
    const meta = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_gcoff', 'logs'))!), 'utf8'));
    // Before, the two replaced snapshots were expired and gc-20's file deleted, as with gc on.
    expect(meta.snapshots).toHaveLength(3);
    expect(meta.properties['siglake.retention.pending-delete']).toBeUndefined();
    const filesAfter = filesUnder(path.join(warehouse, 'tenant_gcoff'));
    for (const f of filesBefore) expect(filesAfter).toContain(f);
    // Turned back on, the next round expires and deletes as usual.
    await editMeta('tenant_gcoff', (doc) => {
      doc['properties'] = { ...(doc['properties'] as object), 'gc.enabled': 'true' };
    });
    const on = runCli(['retention', '--once', ...retentionFlags]);
    expect(on.status, on.stderr).toBe(0);
    expect(on.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.namespace === 'tenant_gcoff')).toMatchObject({ snapshotsExpired: 2, filesDeleted: 1 });
  });

  it('regression (retention-failures-uncounted): a table whose retention fails inside the compactor loop is counted per table', async () => {
    // Before stop 50 the loop's failures were only logged: a table failing every hour raised no metric to alert on.
    for (const round of ['f1', 'f2']) await land([{ tenant: 'failing', records: [[`${round}-0`, 0]] }]);
    const meta = JSON.parse(fs.readFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_failing', 'logs'))!), 'utf8'));
    const current = meta.snapshots.find((x: { 'snapshot-id': number }) => x['snapshot-id'] === meta['current-snapshot-id']);
    const list = fileURLToPath(current['manifest-list']);
    fs.renameSync(list, `${list}.away`);
    const ing = await startIngester({ dataDir: dir, args: ['--compact-interval-secs', '1', '--retention-snapshot-max-age-hours', '0', ...flags] });
    try {
      const deadline = Date.now() + 60_000;
      let m = await ing.metrics();
      while ((m.get('siglake_retention_last_run_timestamp_seconds') ?? 0) === 0) {
        if (Date.now() > deadline) throw new Error('no retention round in time');
        await new Promise((r) => setTimeout(r, 200));
        m = await ing.metrics();
      }
      expect(m.get('siglake_retention_table_failures_total{table="logs"}')).toBeGreaterThanOrEqual(1);
    } finally {
      expect(await ing.stop()).toBe(0);
      fs.renameSync(`${list}.away`, list);
    }
    expect(ing.logs.some((l) => l.msg === 'retention failed for a table; next round retries' && l['table'] === 'tenant_failing.logs')).toBe(true);
  });

  it('runs inside the compactor loop of siglake ingest, with its metrics', async () => {
    let ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    expect((await post(ing.url, '/v1/logs', logsAt([['loop-old', 40], ['loop-new', 0]]), { contentType: 'application/json' })).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    ing = await startIngester({
      dataDir: dir,
      args: ['--trust-tenant-header', '--compact-interval-secs', '1', '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '0', ...flags],
    });
    try {
      const deadline = Date.now() + 60_000;
      let m = await ing.metrics();
      while ((m.get('siglake_retention_last_run_timestamp_seconds') ?? 0) === 0 || (m.get('siglake_compactor_commits_total') ?? 0) === 0) {
        if (Date.now() > deadline) throw new Error('no retention round in time');
        await new Promise((r) => setTimeout(r, 200));
        m = await ing.metrics();
      }
      expect(m.get('siglake_retention_last_run_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 600);
      expect(m.get('siglake_retention_files_deleted_total{table="logs"}')).toBeGreaterThanOrEqual(1);
      const b = await bodies('main', 'logs');
      expect(b).toContain('loop-new');
      expect(b).not.toContain('loop-old');
      const final = (await icebirdDataFiles((await lake.catalog.metadataLocation('main', 'logs'))!)).map((x) => fileURLToPath(x.path));
      expect(parquetFiles('main', 'logs').sort()).toEqual(final.sort());
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});
