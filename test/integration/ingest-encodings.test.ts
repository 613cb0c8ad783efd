// Contract §3 encodings (OTLP/JSON with hex ids and lowerCamelCase keys, gzip
// for protobuf and JSON, empty export requests) and the x-siglake-index header
// (§3, §5, §7), against the real process: statuses, response bodies in the
// request's content type, and the canonical protobuf bytes in the WAL.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { post } from '../helpers/http.js';
import { listFiles, startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import {
  decodeStatus,
  gzip,
  jsonBytes,
  logsJson,
  logsProto,
  proto,
  tracesJson,
  tracesProto,
  walPayloads,
} from '../helpers/otlp-bodies.js';
import { grpcCode, httpCode } from '../helpers/rpc-status.js';
import { auditEvents } from '../helpers/audit-events.js';
import { sleep, until } from '../helpers/wait.js';

const PB = 'application/x-protobuf';
const JSON_CT = 'application/json';

describe('an empty export request holds no lane and no tenant (--max-tenants 1, --trust-tenant-header, audit on)', () => {
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  let auditFile: string;
  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-empty-export-'));
    auditFile = path.join(dir, 'audit.jsonl');
    ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--max-tenants', '1', '--audit-file', auditFile] });
    rpc = new RawGrpcClient(ing.grpcAddress);
  });
  afterAll(async () => {
    rpc.close();
    expect(await ing.stop()).toBe(0);
  });

  it('regression (empty-export-holds-lane): empty requests of one tenant are 200, and a second tenant is still admitted; no first admission is audited for them', async () => {
    const pb = await post(ing.url, '/v1/logs', new Uint8Array(0), { contentType: PB, headers: { 'x-scope-orgid': 'ghost' } });
    expect(pb.status).toBe(200);
    const js = await post(ing.url, '/v1/traces', jsonBytes({}), { contentType: JSON_CT, headers: { 'x-scope-orgid': 'ghost' } });
    expect(js.status).toBe(200);
    const rpcEmpty = await rpc.export('logs', new Uint8Array(0), { 'x-scope-orgid': 'phantom' });
    expect(rpcEmpty.code).toBe(grpc.status.OK);
    // The only tenant slot is free: a real request of another tenant is stored.
    const real = await post(ing.url, '/v1/logs', logsProto(['after-empty']), { contentType: PB, headers: { 'x-scope-orgid': 'acme' } });
    expect(real.status).toBe(200);
    expect(walDump(path.join(ing.walDir, 'acme', 'logs')).length).toBe(1);
    expect(fs.existsSync(path.join(ing.walDir, 'ghost'))).toBe(false);
    expect(fs.existsSync(path.join(ing.walDir, 'phantom'))).toBe(false);
    // acme holds the slot now: a further tenant is refused at capacity, as --max-tenants 1 says.
    const other = await post(ing.url, '/v1/logs', logsProto(['refused']), { contentType: PB, headers: { 'x-scope-orgid': 'globex' } });
    expect(other.status).toBe(403);
    expect(httpCode(other)).toBe('SIGLAKE_TENANT_DENIED');
    await until(() => auditEvents(auditFile).some((e) => e['event'] === 'lane_first_admission'), 10_000, 'the lane admission event');
    await sleep(200);
    const firsts = auditEvents(auditFile).filter((e) => e['event'] === 'lane_first_admission');
    expect(firsts.map((e) => [e['tenant'], e['signal']])).toEqual([['acme', 'logs']]);
  });
});

describe('encodings: OTLP/JSON, gzip, empty requests', () => {
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  let logsDir: string;
  let tracesDir: string;
  beforeAll(async () => {
    ing = await startIngester();
    rpc = new RawGrpcClient(ing.grpcAddress);
    logsDir = path.join(ing.walDir, 'logs');
    tracesDir = path.join(ing.walDir, 'traces');
  });
  afterAll(async () => {
    rpc.close();
    expect(await ing.stop()).toBe(0);
  });

  it('empty export requests (zero protobuf bytes, `{}` JSON, empty gRPC message) are 200 and write nothing', async () => {
    for (const p of ['/v1/logs', '/v1/traces']) {
      const pb = await post(ing.url, p, new Uint8Array(0), { contentType: PB });
      expect(pb.status).toBe(200);
      expect(pb.contentType).toBe(PB);
      expect(pb.body.length).toBe(0);
      const js = await post(ing.url, p, jsonBytes({}), { contentType: JSON_CT });
      expect(js.status).toBe(200);
      expect(js.contentType).toMatch(/^application\/json/);
      expect(Buffer.from(js.body).toString()).toBe('{}');
      const gz = await post(ing.url, p, gzip(new Uint8Array(0)), { contentType: PB, headers: { 'content-encoding': 'gzip' } });
      expect(gz.status).toBe(200);
    }
    for (const signal of ['logs', 'traces'] as const) {
      const r = await rpc.export(signal, new Uint8Array(0));
      expect(r.code).toBe(grpc.status.OK);
      expect(r.response!.length).toBe(0);
    }
    expect(listFiles(ing.walDir).filter((f) => !f.endsWith('/'))).toEqual([]);
    expect(walDump(ing.walDir)).toEqual([]);
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(4);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="200"}')).toBe(4);
    expect(m.get('siglake_ingest_records_total{endpoint="otlp"}')).toBe(0);
    expect(m.get('siglake_wal_bytes_written_total')).toBe(0);
  });

  it('OTLP/JSON logs (hex ids, lowerCamelCase) → 200 `{}` and the canonical protobuf in the WAL', async () => {
    const bodies = ['json-log-1', 'json-log-2 café 東京', 'json-log-3'];
    const before = walPayloads(logsDir).length;
    const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(bodies)), { contentType: 'application/json; charset=utf-8' });
    expect(r.status).toBe(200);
    expect(r.contentType).toMatch(/^application\/json/);
    expect(Buffer.from(r.body).toString()).toBe('{}');
    const after = walPayloads(logsDir);
    expect(after.length).toBe(before + 1);
    expect(after[before]!.equals(Buffer.from(logsProto(bodies)))).toBe(true);
    // The ids came through as bytes, not as the hex text.
    const decoded = proto.decodeLogsRequest(after[before]!) as {
      resourceLogs: { scopeLogs: { logRecords: { traceId: Buffer; spanId: Buffer }[] }[] }[];
    };
    const rec = decoded.resourceLogs[0]!.scopeLogs[0]!.logRecords[0]!;
    expect(Buffer.from(rec.traceId).toString('hex')).toBe('5b8efff798038103d269b633813fc60c');
    expect(Buffer.from(rec.spanId).toString('hex')).toBe('eee19b7ec3c1b174');
    const texts = walDump(ing.walDir).filter((l) => l.type === 'logs').flatMap((l) => l.texts);
    expect(texts.slice(-3)).toEqual(bodies);
  });

  it('OTLP/JSON traces → 200 `{}` and the canonical protobuf in the WAL', async () => {
    const names = ['GET /json-a', 'GET /json-b'];
    const before = walPayloads(tracesDir).length;
    const r = await post(ing.url, '/v1/traces', jsonBytes(tracesJson(names)), { contentType: JSON_CT });
    expect(r.status).toBe(200);
    expect(Buffer.from(r.body).toString()).toBe('{}');
    const after = walPayloads(tracesDir);
    expect(after.length).toBe(before + 1);
    expect(after[before]!.equals(Buffer.from(tracesProto(names)))).toBe(true);
    const lines = walDump(ing.walDir).filter((l) => l.type === 'traces');
    expect(lines.at(-1)!.texts).toEqual(names);
    expect(lines.at(-1)!.records).toBe(2);
  });

  it('realistic OTLP/JSON with every AnyValue kind converts to the same bytes protobufjs encodes', async () => {
    const gen = new FixtureGenerator(7, proto);
    for (const signal of ['logs', 'traces'] as const) {
      const f = gen.request(signal, { targetBytes: 4096, allValueKinds: true });
      const dir = signal === 'logs' ? logsDir : tracesDir;
      const before = walPayloads(dir).length;
      const r = await post(ing.url, signal === 'logs' ? '/v1/logs' : '/v1/traces', f.json, { contentType: JSON_CT });
      expect(r.status).toBe(200);
      const after = walPayloads(dir);
      expect(after.length).toBe(before + 1);
      expect(after[before]!.equals(Buffer.from(f.protobuf))).toBe(true);
    }
  });

  it('gzip protobuf → 200 with an empty protobuf response; the WAL holds the inflated bytes', async () => {
    const bodies = ['gz-pb-1', 'gz-pb-2'];
    const plain = logsProto(bodies);
    const before = walPayloads(logsDir).length;
    const r = await post(ing.url, '/v1/logs', gzip(plain), { contentType: PB, headers: { 'content-encoding': 'gzip' } });
    expect(r.status).toBe(200);
    expect(r.contentType).toBe(PB);
    expect(r.body.length).toBe(0);
    const after = walPayloads(logsDir);
    expect(after.length).toBe(before + 1);
    expect(after[before]!.equals(Buffer.from(plain))).toBe(true);
    expect(walDump(ing.walDir).filter((l) => l.type === 'logs').at(-1)!.texts).toEqual(bodies);
  });

  it('gzip OTLP/JSON → 200 `{}`; the WAL holds the canonical protobuf', async () => {
    const names = ['gz-json-span-1', 'gz-json-span-2', 'gz-json-span-3'];
    const before = walPayloads(tracesDir).length;
    const r = await post(ing.url, '/v1/traces', gzip(jsonBytes(tracesJson(names))), {
      contentType: JSON_CT,
      headers: { 'content-encoding': 'gzip' },
    });
    expect(r.status).toBe(200);
    expect(Buffer.from(r.body).toString()).toBe('{}');
    const after = walPayloads(tracesDir);
    expect(after.length).toBe(before + 1);
    expect(after[before]!.equals(Buffer.from(tracesProto(names)))).toBe(true);
  });

  it('gRPC with grpc-encoding gzip is accepted and stored inflated', async () => {
    const gz = new RawGrpcClient(ing.grpcAddress, { 'grpc.default_compression_algorithm': 2 });
    try {
      const bodies = ['grpc-gz-1', 'x'.repeat(2000)];
      const before = walPayloads(logsDir).length;
      const r = await gz.export('logs', logsProto(bodies));
      expect(r.code).toBe(grpc.status.OK);
      const after = walPayloads(logsDir);
      expect(after.length).toBe(before + 1);
      expect(after[before]!.equals(Buffer.from(logsProto(bodies)))).toBe(true);
    } finally {
      gz.close();
    }
  });

  it('application/protobuf (accepted as protobuf) is answered as application/protobuf, a refusal too', async () => {
    // OTLP/HTTP: the response has the request's Content-Type. It came back as application/x-protobuf.
    const ok = await post(ing.url, '/v1/logs', new Uint8Array(0), { contentType: 'application/protobuf' });
    expect([ok.status, ok.contentType, ok.body.length]).toEqual([200, 'application/protobuf', 0]);
    const bad = await post(ing.url, '/v1/logs', new Uint8Array([0xff, 0xff]), { contentType: 'application/protobuf' });
    expect([bad.status, bad.contentType]).toEqual([400, 'application/protobuf']);
    expect(httpCode(bad)).toBe('SIGLAKE_BAD_BODY');
    expect(decodeStatus(bad.contentType, bad.body).code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('counts the records it wrote', async () => {
    const m = await ing.metrics();
    // records_total matches the log records and spans the WAL holds.
    const walLogs = walDump(path.join(ing.walDir, 'logs')).reduce((a, l) => a + l.records, 0);
    const walSpans = walDump(path.join(ing.walDir, 'traces')).reduce((a, l) => a + l.records, 0);
    expect(walLogs).toBeGreaterThan(0);
    expect(m.get('siglake_ingest_records_total{endpoint="otlp"}')).toBe(walLogs);
    expect(m.get('siglake_ingest_records_total{endpoint="otlp_traces"}')).toBe(walSpans);
  });
});

describe('x-siglake-index', () => {
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  let atStart: string[] = [];
  beforeAll(async () => {
    // x-siglake-index must name an index the tenant has (contract §6).
    ing = await startIngester({ indexes: { default: ['App_errors-1'] } });
    rpc = new RawGrpcClient(ing.grpcAddress);
    // The catalog and the index's table exist from the start; requests must add nothing beside them.
    atStart = listFiles(ing.dataDir).filter((f) => f !== 'wal/');
  });
  afterAll(async () => {
    rpc.close();
    expect(await ing.stop()).toBe(0);
  });

  const bad = ['../x', 'a/b', 'i'.repeat(129), 'logs', 'LOGS', 'Logs', 'traces', 'Indexes', 'lost+found', '.hidden', ''];

  it('an invalid index is a 400 (HTTP, both encodings) and creates nothing', async () => {
    for (const index of bad) {
      const r = await post(ing.url, '/v1/logs', logsProto([`bad-index-${index}`]), { headers: { 'x-siglake-index': index } });
      expect(r.status, `index ${JSON.stringify(index)}`).toBe(400);
      expect(r.contentType).toBe(PB);
      const st = decodeStatus(r.contentType, r.body);
      expect(st.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(httpCode(r)).toBe('SIGLAKE_BAD_HEADER');
      const j = await post(ing.url, '/v1/traces', jsonBytes(tracesJson(['s'])), {
        contentType: JSON_CT,
        headers: { 'x-siglake-index': index },
      });
      expect(j.status).toBe(400);
      expect(j.contentType).toMatch(/^application\/json/);
      expect(httpCode(j)).toBe('SIGLAKE_BAD_HEADER');
    }
    expect(listFiles(ing.dataDir).filter((f) => f !== 'wal/')).toEqual(atStart);
    expect(await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="400"}')).toBe(bad.length);
    expect(await ing.metric('siglake_ingest_lanes')).toBe(0);
  });

  it('an invalid index over gRPC is INVALID_ARGUMENT and creates nothing', async () => {
    for (const index of ['../x', 'a/b', 'i'.repeat(129), 'logs', 'TRACES']) {
      const r = await rpc.export('logs', logsProto(['g']), { 'x-siglake-index': index });
      expect(r.code, index).toBe(grpc.status.INVALID_ARGUMENT);
      expect(grpcCode(r)).toBe('SIGLAKE_BAD_HEADER');
    }
    expect(listFiles(ing.dataDir).filter((f) => f !== 'wal/')).toEqual(atStart);
  });

  it('a valid index lands under <wal>/indexes/<index>/ over HTTP and gRPC', async () => {
    const index = 'App_errors-1';
    const r = await post(ing.url, '/v1/logs', logsProto(['indexed-http-1', 'indexed-http-2']), { headers: { 'x-siglake-index': index } });
    expect(r.status).toBe(200);
    const g = await rpc.export('logs', logsProto(['indexed-grpc-1']), { 'x-siglake-index': index });
    expect(g.code).toBe(grpc.status.OK);
    const files = listFiles(ing.walDir);
    expect(files).toContain(`indexes/${index}/`);
    expect(files.some((f) => f.startsWith(`indexes/${index}/`) && f.endsWith('.seg'))).toBe(true);
    // Nothing in the default logs lane.
    expect(fs.existsSync(path.join(ing.walDir, 'logs'))).toBe(false);
    const lines = walDump(ing.walDir);
    expect(lines.every((l) => l.tenant === 'default' && l.index === index)).toBe(true);
    expect(lines.flatMap((l) => l.texts)).toEqual(['indexed-http-1', 'indexed-http-2', 'indexed-grpc-1']);
    // An index named like a reserved name in another case is still refused after lanes exist.
    const again = await post(ing.url, '/v1/logs', logsProto(['x']), { headers: { 'x-siglake-index': 'INDEXES' } });
    expect(again.status).toBe(400);
    expect(await ing.metric('siglake_ingest_lanes')).toBe(1);
  });
});
