// The compactor on real WAL segments (written by the real LaneWriter), a real
// SQLite catalog and a file warehouse; what it lands is read back by icebird
// and DuckDB, which share no code with it.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Compactor, RECORD_BUFFER_ROWS, type CompactorOptions } from '../../src/compactor/compactor.js';
import { CompactorLoop } from '../../src/compactor/compactor-loop.js';
import { SealRule } from '../../src/compactor/seal-rule.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { createLogger } from '../../src/log.js';
import { readSealedMarker, SEALED_MARKER, writeSealedMarker } from '../../src/wal/sealed-marker.js';
import { indexTable, laneDir, LOGS_TABLE, TRACES_TABLE } from '../../src/wal/layout.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { RECORD_HEADER_SIZE, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import {
  duckParquet,
  duckQuery,
  icebirdDataFiles,
  icebirdRows,
  installFileFetch,
  logsRequest,
  tracesRequest,
  writeLane,
} from '../helpers/iceberg.js';
import { until } from '../helpers/wait.js';

const log = createLogger('warn');
let restoreFetch: () => void;
const cleanup: (() => Promise<void> | void)[] = [];

beforeAll(() => {
  restoreFetch = installFileFetch();
});
afterAll(() => restoreFetch());
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

interface Env {
  dir: string;
  walDir: string;
  catalog: SqlCatalog;
  compactor(opts?: Partial<CompactorOptions>): Promise<Compactor>;
  rows(ns: string, table: string): Promise<Record<string, unknown>[]>;
  location(ns: string, table: string): Promise<string | null>;
}

function env(): Env {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-compactor-'));
  const walDir = path.join(dir, 'wal');
  const url = `sqlite:${path.join(dir, 'catalog.db')}`;
  const catalog = SqlCatalog.open(url, 'siglake');
  const catalogs: SqlCatalog[] = [catalog];
  cleanup.push(async () => {
    for (const c of catalogs) await c.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    walDir,
    catalog,
    async compactor(opts = {}) {
      const c = SqlCatalog.open(url, 'siglake');
      catalogs.push(c);
      return Compactor.create({ walDir, catalog: c, storage: new FileStorage(path.join(dir, 'warehouse')), sealRule: new SealRule('stopped'), log, ...opts });
    },
    async rows(ns, table) {
      const loc = await catalog.metadataLocation(ns, table);
      if (loc === null) throw new Error(`no table ${ns}.${table}`);
      return icebirdRows(loc);
    },
    location: (ns, table) => catalog.metadataLocation(ns, table),
  };
}

const bodies = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

describe('compaction round', () => {
  it('lands each lane in its tenant namespace and table, then retires the segments', async () => {
    const e = env();
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('main-log', 4)) }]);
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('acme-log', 3)) }]);
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('acme-log2', 2)) }]);
    await writeLane(e.walDir, 'acme', TRACES_TABLE, [{ type: 'traces', request: tracesRequest(bodies('acme-span', 5)) }]);
    await writeLane(e.walDir, 'acme', indexTable('audit'), [{ type: 'logs', request: logsRequest(bodies('acme-audit', 2)) }]);
    await writeLane(e.walDir, 'globex', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('globex-log', 6)) }]);

    const c = await e.compactor();
    const r = await c.runRound();
    expect(r).toMatchObject({ segmentsRead: 6, rows: 22, commits: 5, failedTables: 0, retired: 6, backlog: false });

    expect((await e.rows('main', 'logs')).map((x) => x['body'])).toEqual(bodies('main-log', 4));
    expect((await e.rows('tenant_acme', 'logs')).map((x) => x['body']).sort()).toEqual([...bodies('acme-log', 3), ...bodies('acme-log2', 2)].sort());
    expect((await e.rows('tenant_acme', 'traces')).map((x) => x['name'])).toEqual(bodies('acme-span', 5));
    expect((await e.rows('tenant_acme', 'audit')).map((x) => x['body'])).toEqual(bodies('acme-audit', 2));
    expect((await e.rows('tenant_globex', 'logs')).map((x) => x['body'])).toEqual(bodies('globex-log', 6));
    expect(await e.location('tenant_globex', 'traces')).toBeNull();
    expect(await e.catalog.namespaces()).toEqual(['main', 'tenant_acme', 'tenant_globex']);

    // Retired: the lower segment of acme's logs lane is gone; every lane's highest is kept, empty, for its number.
    const acmeLogs = listLaneFiles(laneDir(e.walDir, 'acme', LOGS_TABLE));
    expect(acmeLogs.segments.map((s) => s.name)).toEqual(['00000002.seg']);
    expect(fs.statSync(acmeLogs.segments[0]!.path).size).toBe(0);
    expect(fs.readFileSync(path.join(e.walDir, '.siglake-wal-id'), 'utf8')).toMatch(/^[0-9a-f]{32}\n$/);

    // DuckDB, over the files icebird finds in the manifests, agrees.
    const files = await icebirdDataFiles((await e.location('tenant_acme', 'logs'))!);
    const duck = await duckQuery(`SELECT count(*)::INTEGER AS n, min(body) AS lo FROM ${duckParquet(files.map((f) => f.path))}`);
    expect(duck).toEqual([{ n: 5, lo: 'acme-log-0' }]);

    // A second round finds nothing new.
    expect(await c.runRound()).toMatchObject({ segmentsRead: 0, commits: 0 });
    expect(c.stats.commits).toBe(5);
    expect(c.stats.rows).toBe(22);
    expect(c.stats.segmentsRetired).toBe(6);
  });

  it('maps OTLP fields faithfully', async () => {
    const e = env();
    const ingestMs = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    await writeLane(e.walDir, 'default', LOGS_TABLE, [
      {
        type: 'logs',
        timeMs: ingestMs,
        request: {
          resourceLogs: [
            {
              resource: {
                attributes: [
                  { key: 'service.name', value: { stringValue: 'checkout' } },
                  { key: 'host.cpus', value: { intValue: '9007199254740993' } },
                ],
                droppedAttributesCount: 2,
              },
              schemaUrl: 'https://opentelemetry.io/schemas/1.24.0',
              scopeLogs: [
                {
                  scope: { name: 'lib', version: '2.1', attributes: [{ key: 's', value: { boolValue: true } }] },
                  logRecords: [
                    {
                      observedTimeUnixNano: '1767312245678901234',
                      severityNumber: 17,
                      severityText: 'ERROR',
                      body: { kvlistValue: { values: [{ key: 'msg', value: { stringValue: 'boom' } }, { key: 'n', value: { doubleValue: 1.5 } }] } },
                      attributes: [
                        { key: 'dup', value: { stringValue: 'first' } },
                        { key: 'arr', value: { arrayValue: { values: [{ intValue: '1' }, { stringValue: 'two' }] } } },
                        { key: 'raw', value: { bytesValue: Buffer.from([0xde, 0xad]) } },
                        { key: 'dup', value: { stringValue: 'last' } },
                        { key: 'unset' },
                      ],
                      droppedAttributesCount: 1,
                      flags: 1,
                      traceId: Buffer.from('0102030405060708090a0b0c0d0e0f10', 'hex'),
                      spanId: Buffer.from('a1a2a3a4a5a6a7a8', 'hex'),
                      eventName: 'checkout.failed',
                    },
                    { timeUnixNano: '1767312245000000001', body: { stringValue: 'plain' } },
                    {},
                  ],
                },
              ],
            },
          ],
        },
      },
    ]);
    await (await e.compactor()).runRound();
    const rows = await e.rows('main', 'logs');
    expect(rows).toHaveLength(3);
    const [a, b, empty] = rows as Record<string, unknown>[];
    expect(a).toMatchObject({
      time_unix_nano: null,
      observed_time_unix_nano: 1767312245678901234n,
      ingest_time: new Date(ingestMs),
      severity_number: 17,
      severity_text: 'ERROR',
      body: '{"msg":"boom","n":1.5}',
      body_type: 'kvlist',
      trace_id: '0102030405060708090a0b0c0d0e0f10',
      span_id: 'a1a2a3a4a5a6a7a8',
      flags: 1n,
      event_name: 'checkout.failed',
      service_name: 'checkout',
      resource_attributes: { 'service.name': 'checkout', 'host.cpus': '9007199254740993' },
      resource_dropped_attributes_count: 2,
      resource_schema_url: 'https://opentelemetry.io/schemas/1.24.0',
      scope_name: 'lib',
      scope_version: '2.1',
      scope_attributes: { s: 'true' },
      attributes: { dup: 'last', arr: '[1,"two"]', raw: '3q0=', unset: null },
      dropped_attributes_count: 1,
    });
    // Event time falls back to the observed time, truncated to µs; the exact ns stay in their own column.
    expect((a!['time'] as Date).toISOString()).toBe('2026-01-02T00:04:05.678Z');
    expect(b).toMatchObject({ time_unix_nano: 1767312245000000001n, observed_time_unix_nano: null, body: 'plain', body_type: 'string', trace_id: null });
    // A record with nothing set takes the WAL ingest time as its event time.
    expect(empty).toMatchObject({ body: null, body_type: null, time_unix_nano: null, severity_number: 0, attributes: {} });
    expect((empty!['time'] as Date).getTime()).toBe(ingestMs);

    // DuckDB reads the µs timestamps and the maps the same way.
    const files = await icebirdDataFiles((await e.location('main', 'logs'))!);
    const duck = await duckQuery(
      `SELECT epoch_us(time)::VARCHAR AS us, attributes['dup'] AS dup, resource_attributes['service.name'] AS svc FROM ${duckParquet(files.map((f) => f.path))} ORDER BY us`,
    );
    expect(duck[0]).toEqual({ us: '1767312245000000', dup: null, svc: 'checkout' });
    expect(duck[1]).toEqual({ us: '1767312245678901', dup: 'last', svc: 'checkout' });
  });

  it('maps spans, with events and links as JSON', async () => {
    const e = env();
    await writeLane(e.walDir, 'default', TRACES_TABLE, [
      {
        type: 'traces',
        request: {
          resourceSpans: [
            {
              resource: { attributes: [{ key: 'service.name', value: { stringValue: 'api' } }] },
              scopeSpans: [
                {
                  scope: { name: 'http' },
                  spans: [
                    {
                      traceId: Buffer.alloc(16, 0xab),
                      spanId: Buffer.alloc(8, 0xcd),
                      parentSpanId: Buffer.alloc(8, 0xef),
                      traceState: 'k=v',
                      name: 'GET /',
                      kind: 2,
                      startTimeUnixNano: '1767225600000000999',
                      endTimeUnixNano: '1767225600250000999',
                      status: { code: 2, message: 'bad' },
                      events: [{ timeUnixNano: '1767225600100000000', name: 'retry', attributes: [{ key: 'n', value: { intValue: '2' } }] }],
                      links: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), flags: 1 }],
                      droppedEventsCount: 3,
                    },
                  ],
                },
              ],
            },
          ],
        },
      },
    ]);
    await (await e.compactor()).runRound();
    const [s] = await e.rows('main', 'traces');
    expect(s).toMatchObject({
      start_time_unix_nano: 1767225600000000999n,
      end_time_unix_nano: 1767225600250000999n,
      duration_nanos: 250000000n,
      trace_id: 'ab'.repeat(16),
      span_id: 'cd'.repeat(8),
      parent_span_id: 'ef'.repeat(8),
      trace_state: 'k=v',
      name: 'GET /',
      kind: 2,
      status_code: 2,
      status_message: 'bad',
      service_name: 'api',
      dropped_events_count: 3,
    });
    expect(JSON.parse(s!['events'] as string)).toEqual([
      { time_unix_nano: '1767225600100000000', name: 'retry', attributes: { n: '2' }, dropped_attributes_count: 0 },
    ]);
    expect(JSON.parse(s!['links'] as string)).toEqual([
      { trace_id: '01'.repeat(16), span_id: '02'.repeat(8), trace_state: null, flags: 1, attributes: {}, dropped_attributes_count: 0 },
    ]);
  });

  it('survives a crash between the catalog commit and the retirement: no row lost, none twice', async () => {
    const e = env();
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('a', 3)) }]);
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('b', 3)) }]);
    await writeLane(e.walDir, 'acme', TRACES_TABLE, [{ type: 'traces', request: tracesRequest(bodies('s', 2)) }]);
    const crashing = await e.compactor({
      afterCommit: () => {
        throw new Error('killed between commit and retire');
      },
    });
    await expect(crashing.runRound()).rejects.toThrow('killed between commit and retire');
    // The first table's commit is visible, and no segment was retired.
    const committed = (await e.location('tenant_acme', 'logs')) !== null ? 'logs' : 'traces';
    expect(await e.location('tenant_acme', committed === 'logs' ? 'traces' : 'logs')).toBeNull();
    expect(listLaneFiles(laneDir(e.walDir, 'acme', LOGS_TABLE)).segments.map((s) => fs.statSync(s.path).size > 0)).toEqual([true, true]);
    expect(listLaneFiles(laneDir(e.walDir, 'acme', TRACES_TABLE)).segments.map((s) => fs.statSync(s.path).size > 0)).toEqual([true]);

    const restarted = await e.compactor();
    const r = await restarted.runRound();
    expect(r.commits).toBe(1); // only the table the crash left uncommitted
    expect(r.retired).toBe(3);
    expect((await e.rows('tenant_acme', 'logs')).map((x) => x['body']).sort()).toEqual([...bodies('a', 3), ...bodies('b', 3)].sort());
    expect((await e.rows('tenant_acme', 'traces')).map((x) => x['name'])).toEqual(bodies('s', 2));
    // The table committed before the crash was not appended to again.
    expect(await icebirdDataFiles((await e.location('tenant_acme', committed))!)).toHaveLength(1);
    expect(await restarted.runRound()).toMatchObject({ segmentsRead: 0, commits: 0 });
  });

  it('sends spans of an index lane to the traces table, exactly once across a crash between the two commits', async () => {
    const e = env();
    const idx = indexTable('payments');
    await writeLane(e.walDir, 'acme', idx, [
      { type: 'logs', request: logsRequest(bodies('pay-log', 3)) },
      { type: 'traces', request: tracesRequest(bodies('pay-span', 2)) },
    ]);
    let commits = 0;
    const crashing = await e.compactor({
      afterCommit: () => {
        if (++commits === 1) throw new Error('crash after the first table');
      },
    });
    await expect(crashing.runRound()).rejects.toThrow('crash after the first table');
    const again = await e.compactor();
    expect(await again.runRound()).toMatchObject({ commits: 1, retired: 1 });
    expect((await e.rows('tenant_acme', 'payments')).map((x) => x['body'])).toEqual(bodies('pay-log', 3));
    expect((await e.rows('tenant_acme', 'traces')).map((x) => x['name'])).toEqual(bodies('pay-span', 2));
    expect(await again.runRound()).toMatchObject({ segmentsRead: 0, commits: 0 });
  });

  it("takes a lane's highest segment beside a live ingester once the writer sealed it (.sealed marker)", async () => {
    const e = env();
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('quiet', 2)) }]);
    const dir = laneDir(e.walDir, 'default', LOGS_TABLE);
    // The writer sealed segment 1 (by age or at shutdown) and the lane went quiet.
    expect(readSealedMarker(dir)).toBe(1);
    const running = await e.compactor({ sealRule: new SealRule('running') });
    expect(await running.runRound()).toMatchObject({ segmentsRead: 1, rows: 2 });
    expect((await e.rows('main', 'logs')).map((x) => x['body'])).toEqual(bodies('quiet', 2));
    // Without the marker the same segment would have waited.
    writeSealedMarker(dir, 0);
    expect(new SealRule('running').isSealed(dir, 1, 1, readSealedMarker(dir))).toBe(false);
  });

  it('takes only sealed segments: all but the highest beside a live ingester', async () => {
    const e = env();
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('one', 1)) }]);
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('two', 1)) }]);
    const dir = laneDir(e.walDir, 'default', LOGS_TABLE);
    // As a live writer that has not sealed anything: no .sealed marker.
    fs.rmSync(path.join(dir, SEALED_MARKER), { force: true });
    const running = await e.compactor({ sealRule: new SealRule('running') });
    expect(await running.runRound()).toMatchObject({ segmentsRead: 1, rows: 1, retired: 1 });
    expect(listLaneFiles(dir).segments.map((s) => s.name)).toEqual(['00000002.seg']);
    expect(await running.runRound()).toMatchObject({ segmentsRead: 0 });
    // In process, segments of an earlier life (at or below the boundary seen at start) are sealed too.
    const inProcess = await e.compactor({ sealRule: new SealRule('in-process', new Map([[dir, 2]])) });
    expect(await inProcess.runRound()).toMatchObject({ segmentsRead: 1, rows: 1, retired: 1 });
    expect((await e.rows('main', 'logs')).map((x) => x['body']).sort()).toEqual(['one-0', 'two-0']);
    // A new segment of this life stays until a newer one exists.
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('three', 1)) }]);
    fs.rmSync(path.join(dir, SEALED_MARKER), { force: true }); // still live: not sealed by its writer
    expect(await inProcess.runRound()).toMatchObject({ segmentsRead: 0 });
    expect(listLaneFiles(dir).segments.map((s) => s.name)).toEqual(['00000002.seg', '00000003.seg']);
  });

  it('keeps a corrupt segment, landing the records before the damage', async () => {
    const e = env();
    await writeLane(e.walDir, 'default', LOGS_TABLE, [
      { type: 'logs', request: logsRequest(['good']) },
      { type: 'logs', request: logsRequest(['lost']) },
    ]);
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['later']) }]);
    const seg = listLaneFiles(laneDir(e.walDir, 'default', LOGS_TABLE)).segments[0]!;
    const bytes = fs.readFileSync(seg.path);
    bytes[bytes.length - 3] ^= 0xff; // inside the second record's payload: its CRC fails
    fs.writeFileSync(seg.path, bytes);
    const c = await e.compactor();
    expect(await c.runRound()).toMatchObject({ rows: 2, commits: 1, retired: 1 });
    expect(c.stats.corruptSegments).toBe(1);
    expect(fs.existsSync(seg.path)).toBe(true);
    expect((await e.rows('main', 'logs')).map((x) => x['body'])).toEqual(['good', 'later']);
    // Later rounds do not land its prefix again.
    expect(await c.runRound()).toMatchObject({ rows: 0, commits: 0 });
  });

  it('keeps a segment that is not the lane\'s last and ends torn (a record running past its end is damage there, not a crash\'s tail)', async () => {
    const e = env();
    await writeLane(e.walDir, 'default', LOGS_TABLE, [
      { type: 'logs', request: logsRequest(['good']) },
      { type: 'logs', request: logsRequest(['lost']) },
      { type: 'logs', request: logsRequest(['lost too']) },
    ]);
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['later']) }]);
    const seg = listLaneFiles(laneDir(e.walDir, 'default', LOGS_TABLE)).segments[0]!;
    const bytes = fs.readFileSync(seg.path);
    // The second record's length (header bytes [4, 8)) now runs past the end of the file: the reader stops `torn`.
    const second = SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + bytes.readUInt32LE(SEGMENT_HEADER_SIZE + 4);
    bytes.writeUInt32LE(1 << 20, second + 4);
    fs.writeFileSync(seg.path, bytes);
    const c = await e.compactor();
    expect(await c.runRound()).toMatchObject({ rows: 2, commits: 1, retired: 1 });
    expect(c.stats.corruptSegments).toBe(1);
    expect(fs.existsSync(seg.path)).toBe(true);
    expect(fs.readFileSync(seg.path).equals(bytes)).toBe(true);
    expect((await e.rows('main', 'logs')).map((x) => x['body'])).toEqual(['good', 'later']);
    expect(await c.runRound()).toMatchObject({ rows: 0, commits: 0 });
  });

  it('writes one file per day partition for many small segments, and rolls files at the target size', async () => {
    const e = env();
    const day = 86_400_000_000_000n;
    const t0 = 1_767_225_600_000_000_000n; // 2026-01-01
    for (let s = 0; s < 4; s++) {
      await writeLane(e.walDir, 'default', LOGS_TABLE, [
        { type: 'logs', request: logsRequest(bodies(`d0-s${s}`, 5), { timeUnixNano: (i) => String(t0 + BigInt(s * 5 + i)) }) },
        { type: 'logs', request: logsRequest(bodies(`d1-s${s}`, 5), { timeUnixNano: (i) => String(t0 + day + BigInt(i)) }) },
      ]);
    }
    const c = await e.compactor();
    expect(await c.runRound()).toMatchObject({ segmentsRead: 4, rows: 40, files: 2, commits: 1 });
    const files = await icebirdDataFiles((await e.location('main', 'logs'))!);
    expect(files.map((f) => [f.records, (f.partition as Record<string, Date>)['time_day']!.toISOString().slice(0, 10)]).sort()).toEqual([
      [20, '2026-01-01'],
      [20, '2026-01-02'],
    ]);
    expect(files.every((f) => f.path.includes('/data/time_day=2026-01-0'))).toBe(true);

    // A tiny target and row group: several files, each whole and readable.
    const e2 = env();
    for (let s = 0; s < 3; s++) await writeLane(e2.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies(`x${s}`, 40)) }]);
    const small = await e2.compactor({ limits: { targetFileBytes: 1, rowGroupRows: 25 } });
    const r = await small.runRound();
    expect(r.rows).toBe(120);
    expect(r.files).toBe(5);
    const files2 = await icebirdDataFiles((await e2.location('main', 'logs'))!);
    expect(files2.map((f) => f.records)).toEqual([25, 25, 25, 25, 20]);
    const duck = await duckQuery(`SELECT count(DISTINCT body)::INTEGER AS n FROM ${duckParquet(files2.map((f) => f.path))}`);
    expect(duck).toEqual([{ n: 120 }]);
  });

  it('leaves a backlog past its byte budget for the next round, and reports its lag', async () => {
    const e = env();
    for (let s = 0; s < 3; s++) await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies(`s${s}`, 2)) }]);
    const c = await e.compactor({ maxRoundWalBytes: 1, now: () => Date.now() + 120_000 });
    expect(await c.runRound()).toMatchObject({ segmentsRead: 1, backlog: true, retired: 1 });
    expect(c.stats.lagSeconds).toBeGreaterThanOrEqual(119);
    expect(await c.runRound()).toMatchObject({ segmentsRead: 1, backlog: true });
    expect(await c.runRound()).toMatchObject({ segmentsRead: 1, backlog: false });
    expect(c.stats.lagSeconds).toBe(0);
    expect((await e.rows('main', 'logs')).map((x) => x['body']).sort()).toEqual(['s0-0', 's0-1', 's1-0', 's1-1', 's2-0', 's2-1']);
  });

  it('on a catalog failure retires nothing and leaves no data file behind', async () => {
    const e = env();
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('kept', 3)) }]);
    const blocker = path.join(e.dir, 'not-a-dir');
    fs.writeFileSync(blocker, '');
    const broken = await e.compactor({ catalog: SqlCatalog.open(`sqlite:${path.join(blocker, 'catalog.db')}`, 'siglake') });
    await expect(broken.runRound()).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_CATALOG' });
    expect(broken.stats.roundErrors).toBe(1);
    const seg = listLaneFiles(laneDir(e.walDir, 'default', LOGS_TABLE)).segments;
    expect(seg.map((s) => fs.statSync(s.path).size > 0)).toEqual([true]);
    expect(fs.existsSync(path.join(e.dir, 'warehouse'))).toBe(false);
    // The next round with a working catalog lands it.
    expect(await (await e.compactor()).runRound()).toMatchObject({ rows: 3, commits: 1, retired: 1 });
  });

  it('a record that does not decode keeps its segment, and every other record, of that lane and the others, lands', async () => {
    // Its checksum holds but its payload is no OTLP (a LEN field past the end): the decoder's
    // error threw out of the round, and no tenant landed anything again.
    const e = env();
    const w = new LaneWriter({ dir: laneDir(e.walDir, 'aaa', LOGS_TABLE), segmentBytes: 1 << 20 });
    const root = ProtoRoot.load();
    w.stage(RecordType.LOGS, 1, Date.now(), root.encodeLogsRequest(logsRequest(['a-before'])));
    w.stage(RecordType.LOGS, 1, Date.now(), Uint8Array.from([0x0a, 0x05, 0x0a, 0x10, 0x00]));
    w.stage(RecordType.LOGS, 1, Date.now(), root.encodeLogsRequest(logsRequest(['a-after'])));
    w.flush();
    await w.sync();
    await w.close();
    await writeLane(e.walDir, 'zzz', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['z1']) }]);
    await writeLane(e.walDir, 'default', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['d1']) }]);
    const c = await e.compactor();
    expect(await c.runRound()).toMatchObject({ failedTables: 0, rows: 4 });
    expect((await e.rows('tenant_aaa', 'logs')).map((x) => x['body']).sort()).toEqual(['a-after', 'a-before']);
    expect((await e.rows('tenant_zzz', 'logs')).map((x) => x['body'])).toEqual(['z1']);
    expect((await e.rows('main', 'logs')).map((x) => x['body'])).toEqual(['d1']);
    expect(c.stats.corruptSegments).toBe(1);
    expect(listLaneFiles(laneDir(e.walDir, 'aaa', LOGS_TABLE)).segments.map((x) => fs.statSync(x.path).size > SEGMENT_HEADER_SIZE)).toEqual([true]);
    // Read again, it lands nothing twice, and the segment is kept again: every record was landed
    // before, but one does not decode (it was retired as landed, and the record gone, before stop 48).
    const seg = listLaneFiles(laneDir(e.walDir, 'aaa', LOGS_TABLE)).segments[0]!;
    const bytes = fs.readFileSync(seg.path);
    for (const again of [c, await e.compactor()]) {
      expect(await again.runRound()).toMatchObject({ rows: 0, retired: 0 });
      expect(fs.readFileSync(seg.path).equals(bytes)).toBe(true);
      expect(again.stats.corruptSegments, 'counted once per process, not once per round').toBe(1);
    }
    expect(await e.rows('tenant_aaa', 'logs')).toHaveLength(2);
  });

  it("a lane whose table cannot be read sits out; the other tenants land from the next round on", async () => {
    const e = env();
    await writeLane(e.walDir, 'aaa', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['a1']) }]);
    await (await e.compactor()).runRound();
    // aaa's current metadata file gone (an object store that lost it, an operator's slip).
    fs.rmSync(new URL((await e.location('tenant_aaa', 'logs'))!));
    await writeLane(e.walDir, 'aaa', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['a2']) }]);
    await writeLane(e.walDir, 'zzz', LOGS_TABLE, [{ type: 'logs', request: logsRequest(['z1']) }]);
    const c = await e.compactor();
    await expect(c.runRound()).rejects.toThrow();
    expect(await c.runRound()).toMatchObject({ failedTables: 0, commits: 1 });
    expect((await e.rows('tenant_zzz', 'logs')).map((x) => x['body'])).toEqual(['z1']);
    // aaa's segment waits for its table, kept.
    expect(listLaneFiles(laneDir(e.walDir, 'aaa', LOGS_TABLE)).segments.filter((x) => fs.statSync(x.path).size > SEGMENT_HEADER_SIZE)).toHaveLength(1);
  });

  it("one tenant's backlog does not starve the lanes after it: each round starts where the last ran out of budget", async () => {
    const e = env();
    const add = (tenant: string, tag: string) => writeLane(e.walDir, tenant, LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies(tag, 20)) }]);
    for (let i = 0; i < 3; i++) await add('aaa', `a${i}`);
    await add('zzz', 'z');
    const c = await e.compactor({ maxRoundWalBytes: 1 }); // one segment a round
    let zzz = 0;
    for (let r = 0; r < 6 && zzz === 0; r++) {
      await add('aaa', `a-new-${r}`); // aaa writes a segment every round
      await c.runRound();
      zzz = (await e.location('tenant_zzz', 'logs')) === null ? 0 : (await e.rows('tenant_zzz', 'logs')).length;
    }
    expect(zzz).toBe(20);
  });

  // A backlog over one round's budget made the loop run the next round at once, also when the
  // round committed nothing because every table failed (a revoked S3 key, a read-only catalog):
  // back-to-back rounds re-read the WAL, hammered the store and left files behind, and retention
  // never ran.
  it('a backlog whose every commit fails waits for the next tick instead of looping at once', async () => {
    const e = env();
    for (let i = 0; i < 6; i++) await writeLane(e.walDir, `t${i}`, LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies(`t${i}`, 20)) }]);
    // A warehouse under a regular file: every write fails at once (ENOTDIR), for good.
    fs.writeFileSync(path.join(e.dir, 'blocked'), 'not a directory');
    const c = await e.compactor({ maxRoundWalBytes: 1, storage: new FileStorage(path.join(e.dir, 'blocked', 'warehouse')) });
    const outcomes: boolean[] = [];
    let afterRounds = 0;
    const loop = new CompactorLoop(c, 250, createLogger('silent'), (o) => outcomes.push(o.failed));
    loop.afterRounds = async () => {
      afterRounds++;
    };
    const done = loop.start();
    await new Promise((r) => setTimeout(r, 2_000));
    await loop.stop();
    await done;
    // About one round a 250 ms tick (the old loop ran hundreds), every one failed, and the tick's
    // after-round work (retention) ran after each.
    expect(outcomes.length).toBeGreaterThanOrEqual(2);
    expect(outcomes.length).toBeLessThanOrEqual(9);
    expect(outcomes.every((f) => f)).toBe(true);
    expect(afterRounds).toBeGreaterThanOrEqual(outcomes.length - 1);
    // The lanes are all still there: nothing retired, nothing lost.
    for (let i = 0; i < 6; i++) expect(listLaneFiles(laneDir(e.walDir, `t${i}`, LOGS_TABLE)).segments.length).toBeGreaterThan(0);
  });

  it('a backlog that commits is landed within one tick, round after round', async () => {
    const e = env();
    for (let i = 0; i < 6; i++) await writeLane(e.walDir, `t${i}`, LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies(`t${i}`, 20)) }]);
    const c = await e.compactor({ maxRoundWalBytes: 1 }); // one segment a round
    let rounds = 0;
    let roundsInFirstTick = -1;
    const loop = new CompactorLoop(c, 200, createLogger('silent'), () => rounds++);
    loop.afterRounds = async () => {
      if (roundsInFirstTick < 0) roundsInFirstTick = rounds;
    };
    const done = loop.start();
    await until(() => roundsInFirstTick >= 0, 20_000, 'the first tick to end');
    await loop.stop();
    await done;
    // Six lanes, one segment a round: six rounds back to back, the last with no backlog left.
    expect(roundsInFirstTick).toBe(6);
    for (let i = 0; i < 6; i++) expect(await e.rows(`tenant_t${i}`, 'logs')).toHaveLength(20);
  });

  // A round is bounded by rows as well as bytes (one request of millions of tiny records held a
  // round, and every other tenant's landing, over a minute): it stops inside a segment, even inside
  // a record, and the next round goes on from there.
  it('a round stops at its row budget inside a segment or a record; the next goes on from there, every row once, across a restart', async () => {
    const e = env();
    // acme: segment 1 holds two records of 5 rows, segment 2 one of 4; zzz: one record of 3.
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [
      { type: 'logs', request: logsRequest(bodies('a', 5)) },
      { type: 'logs', request: logsRequest(bodies('b', 5)) },
    ]);
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('c', 4)) }]);
    await writeLane(e.walDir, 'zzz', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('z', 3)) }]);
    const first = await e.compactor({ maxRoundRows: 7 });
    // Round 1: a-0…a-4 and b-0, b-1, then it stops inside record b; segment 1 stays.
    expect(await first.runRound()).toMatchObject({ rows: 7, backlog: true, retired: 0 });
    expect((await e.rows('tenant_acme', 'logs')).map((x) => x['body'])).toEqual([...bodies('a', 5), 'b-0', 'b-1']);
    // Round 2 starts at the next lane: zzz lands before acme goes on (b-2…b-4, segment 1 retired,
    // then c-0, and it stops inside segment 2).
    expect(await first.runRound()).toMatchObject({ rows: 7, backlog: true, retired: 2 });
    expect((await e.rows('tenant_zzz', 'logs')).map((x) => x['body'])).toEqual(bodies('z', 3));
    expect((await e.rows('tenant_acme', 'logs')).map((x) => x['body']).sort()).toEqual([...bodies('a', 5), ...bodies('b', 5), 'c-0'].sort());
    // A new compactor (nothing in memory) goes on from what the table records: c-1…c-3, its budget exactly.
    const next = await e.compactor({ maxRoundRows: 3 });
    expect(await next.runRound()).toMatchObject({ rows: 3, backlog: false, retired: 1 });
    expect((await e.rows('tenant_acme', 'logs')).map((x) => x['body']).sort()).toEqual([...bodies('a', 5), ...bodies('b', 5), ...bodies('c', 4)].sort());
    for (const t of ['acme', 'zzz']) expect(listLaneFiles(laneDir(e.walDir, t, LOGS_TABLE)).segments.filter((f) => fs.statSync(f.path).size > 0)).toEqual([]);
    expect(await next.runRound()).toMatchObject({ segmentsRead: 0, commits: 0 });
  });

  it('a span weighs 1 + its events + its links against the row budget, in a record of more spans than are buffered too', async () => {
    const e = env();
    // Past RECORD_BUFFER_ROWS spans: the record is streamed, and the streaming decoder weighs each span.
    const n = RECORD_BUFFER_ROWS + 3_616;
    await writeLane(e.walDir, 'acme', TRACES_TABLE, [{ type: 'traces', request: tracesRequest(bodies('s', n)) }]);
    // Each span has one event: it weighs 2, so a budget of 16,000 lands 8,000 spans (it counted 16,000).
    const c = await e.compactor({ maxRoundRows: 16_000 });
    const rounds = [];
    for (let r = await c.runRound(); ; r = await c.runRound()) {
      rounds.push(r);
      if (!r.backlog) break;
    }
    expect(rounds.map((r) => r.rows)).toEqual([8_000, 8_000, n - 16_000]);
    const names = (await e.rows('tenant_acme', 'traces')).map((x) => x['name']);
    expect(names).toHaveLength(n);
    expect(new Set(names).size).toBe(n);
    expect(listLaneFiles(laneDir(e.walDir, 'acme', TRACES_TABLE)).segments.filter((f) => fs.statSync(f.path).size > 0)).toEqual([]);
  });

  it('a commit is abandoned when another compactor on the WAL went on inside the segment it started in', async () => {
    const e = env();
    await writeLane(e.walDir, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies('a', 10)) }]);
    const other = await e.compactor({ maxRoundRows: 4 });
    let raced = false;
    const c = await e.compactor({
      maxRoundRows: 4,
      // Files written, before the swap: the other compactor lands the same first rows meanwhile.
      beforeCommit: async () => {
        if (raced) return;
        raced = true;
        expect(await other.runRound()).toMatchObject({ rows: 4, commits: 1 });
      },
    });
    expect(await c.runRound()).toMatchObject({ rows: 4, commits: 0, failedTables: 1 });
    for (let r = 0; r < 3; r++) await other.runRound();
    expect((await e.rows('tenant_acme', 'logs')).map((x) => x['body']).sort()).toEqual(bodies('a', 10).sort());
  });
});
