// reliability.md "tenant isolation", contract §4 step 8 and §6, docs/limits.md
// "Lane queue": with `--ingest-queue-capacity 1` in trusted-header mode, tenant
// A's logs lane is held full by one upload whose body is still arriving (it
// holds the lane's one queue slot, as in ingest-limits.test.ts). A's next
// requests on that lane get 503 + Retry-After: 1 (UNAVAILABLE + retry-after: 1),
// while tenant B's requests, on the same signal and on both transports, succeed
// and land in B's directory only.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { ManualUpload, post } from '../helpers/http.js';
import { until } from '../helpers/wait.js';
import { listFiles, startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import { decodeStatus, jsonBytes, logsJson, logsProto, tracesProto } from '../helpers/otlp-bodies.js';
import { grpcCode, httpCode } from '../helpers/rpc-status.js';

const A = 'tenant-a';
const B = 'tenant-b';

/** Polls an async condition (a metric) until it holds; fails after 5 s. */
const waitFor = (cond: () => Promise<boolean>): Promise<void> => until(cond, 5000, 'the ingester to reach the expected state', 20);

describe('tenant isolation: A floods its lane (--ingest-queue-capacity 1, --trust-tenant-header)', () => {
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  let held: ManualUpload;
  const heldBody = logsProto(['a-held-1', 'a-held-2']);
  beforeAll(async () => {
    ing = await startIngester({ args: ['--trust-tenant-header', '--ingest-queue-capacity', '1'] });
    rpc = new RawGrpcClient(ing.grpcAddress);
  });
  afterAll(async () => {
    held?.destroy();
    rpc.close();
    expect(await ing.stop()).toBe(0);
  });

  it("an upload of A whose body is still arriving holds A's logs lane", async () => {
    held = new ManualUpload(ing.httpPort, '/v1/logs', heldBody.length, { 'X-Scope-OrgID': A });
    await held.connected;
    held.write(heldBody.subarray(0, 10));
    await waitFor(async () => (await ing.metric('siglake_ingest_lanes')) === 1);
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(1);
  });

  it("A's next requests on that lane are 503 + Retry-After: 1 (HTTP protobuf, JSON) and UNAVAILABLE + retry-after: 1 (gRPC)", async () => {
    const r = await post(ing.url, '/v1/logs', logsProto(['a-refused-1']), { headers: { 'x-scope-orgid': A } });
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('1');
    const st = decodeStatus(r.contentType, r.body);
    expect(st.code).toBe(grpc.status.UNAVAILABLE);
    expect(httpCode(r)).toBe('SIGLAKE_QUEUE_FULL');

    const j = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['a-refused-2'])), {
      contentType: 'application/json',
      headers: { 'x-scope-orgid': A },
    });
    expect(j.status).toBe(503);
    expect(j.headers.get('retry-after')).toBe('1');
    expect(httpCode(j)).toBe('SIGLAKE_QUEUE_FULL');

    const g = await rpc.export('logs', logsProto(['a-refused-3']), { 'x-scope-orgid': A });
    expect(g.code).toBe(grpc.status.UNAVAILABLE);
    expect(grpcCode(g)).toBe('SIGLAKE_QUEUE_FULL');
    expect(g.metadata.get('retry-after')).toEqual(['1']);
  });

  it("B's requests meanwhile succeed on both transports, logs and traces", async () => {
    for (let i = 0; i < 3; i++) {
      expect((await post(ing.url, '/v1/logs', logsProto([`b-http-${i}`]), { headers: { 'x-scope-orgid': B } })).status).toBe(200);
      expect((await rpc.export('logs', logsProto([`b-grpc-${i}`]), { 'x-scope-orgid': B })).code).toBe(grpc.status.OK);
    }
    expect((await rpc.export('traces', tracesProto(['b-span']), { 'x-scope-orgid': B })).code).toBe(grpc.status.OK);
    // A is still held: still refused, and only A.
    const again = await post(ing.url, '/v1/logs', logsProto(['a-refused-4']), { headers: { 'x-scope-orgid': A } });
    expect(again.status).toBe(503);
    expect(again.headers.get('retry-after')).toBe('1');
    expect(httpCode(again)).toBe('SIGLAKE_QUEUE_FULL');
  });

  it("B's records are in B's directory only; A's refused ones nowhere", async () => {
    // Dumped from the WAL root, each record names the tenant whose directory holds it.
    const lines = walDump(ing.walDir);
    const bTexts = lines.filter((l) => l.tenant === B).flatMap((l) => l.texts);
    expect(bTexts.sort()).toEqual(['b-grpc-0', 'b-grpc-1', 'b-grpc-2', 'b-http-0', 'b-http-1', 'b-http-2', 'b-span']);
    expect(lines.filter((l) => l.tenant !== B)).toEqual([]);
    // B's directory alone holds them; nothing under A (not even A's held request yet) or the default tenant's tables.
    expect(walDump(path.join(ing.walDir, B)).flatMap((l) => l.texts).sort()).toEqual(bTexts);
    expect(walDump(path.join(ing.walDir, A))).toEqual([]);
    expect(fs.existsSync(path.join(ing.walDir, 'logs'))).toBe(false);
    expect(fs.existsSync(path.join(ing.walDir, 'traces'))).toBe(false);
    // Besides the two tenants' directories only the writer's commit journal (`.journal`, every lane's rounds until a checkpoint).
    const others = listFiles(ing.walDir).filter((f) => !f.startsWith(`${A}/`) && !f.startsWith(`${B}/`) && f !== `${A}/` && f !== `${B}/`);
    expect(others.filter((f) => !f.startsWith('.journal/'))).toEqual([]);
  });

  it('counts queue_full once per refusal of A, and the 200s of B', async () => {
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_rejected_total{reason="queue_full"}')).toBe(4);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}')).toBe(4);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(6);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="200"}')).toBe(1);
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(2);
  });

  it("finishing A's held body gets it a 200, into A's directory only, and A's lane takes writes again", async () => {
    held.write(heldBody.subarray(10));
    const r = await held.response;
    expect(r.status).toBe(200);
    expect((await post(ing.url, '/v1/logs', logsProto(['a-after']), { headers: { 'x-scope-orgid': A } })).status).toBe(200);
    const lines = walDump(ing.walDir);
    expect(lines.filter((l) => l.tenant === A).flatMap((l) => l.texts)).toEqual(['a-held-1', 'a-held-2', 'a-after']);
    expect(lines.filter((l) => l.tenant === B).flatMap((l) => l.texts).some((t) => t.startsWith('a-'))).toBe(false);
    expect(lines.every((l) => l.tenant === A || l.tenant === B)).toBe(true);
    expect(walDump(path.join(ing.walDir, A)).flatMap((l) => l.texts)).toEqual(['a-held-1', 'a-held-2', 'a-after']);
  });
});
