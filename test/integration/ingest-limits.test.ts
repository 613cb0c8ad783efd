// Contract §4 steps 6 and 8, §6: the lane cap (503 without Retry-After, the
// fixed message, nothing created) and a full lane queue (503 + Retry-After: 1,
// only that lane), over HTTP (both encodings) and gRPC, against the real process.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { ManualUpload, post } from '../helpers/http.js';
import { until } from '../helpers/wait.js';
import { listFiles, startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import { decodeStatus, jsonBytes, logsJson, logsProto, tracesProto } from '../helpers/otlp-bodies.js';
import { grpcCode, httpCode, ERROR_INFO_URL, grpcStatusOf, httpStatusOf } from '../helpers/rpc-status.js';

const PB = 'application/x-protobuf';
const LANE_CAP_PREFIX = 'Service Unavailable: ingester lane limit reached (2 lanes)';

/** Polls an async condition (a metric) until it holds; fails after 5 s. */
const waitFor = (cond: () => Promise<boolean>): Promise<void> => until(cond, 5000, 'the ingester to reach the expected state', 20);

describe('lane cap (--ingest-max-lanes 2)', () => {
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--ingest-max-lanes', '2'], indexes: { default: ['third'] } });
    rpc = new RawGrpcClient(ing.grpcAddress);
  });
  afterAll(async () => {
    rpc.close();
    expect(await ing.stop()).toBe(0);
  });

  it('logs and traces fill the two lanes', async () => {
    expect((await post(ing.url, '/v1/logs', logsProto(['cap-logs-1']))).status).toBe(200);
    expect((await post(ing.url, '/v1/traces', tracesProto(['cap-span-1']))).status).toBe(200);
    expect(await ing.metric('siglake_ingest_lanes')).toBe(2);
  });

  it('a third lane over HTTP (protobuf) is 503 with no Retry-After and the lane-cap message', async () => {
    const r = await post(ing.url, '/v1/logs', logsProto(['cap-refused']), { headers: { 'x-siglake-index': 'third' } });
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBeNull();
    expect(r.contentType).toBe(PB);
    const st = decodeStatus(r.contentType, r.body);
    expect(st.code).toBe(grpc.status.UNAVAILABLE);
    expect(st.message.startsWith(LANE_CAP_PREFIX)).toBe(true);
    expect(st.message).toContain('--ingest-max-lanes');
    expect(st.message).toMatch(/route .*(another|elsewhere)/);
    // The ErrorInfo and no google.rpc.RetryInfo.
    expect(httpCode(r)).toBe('SIGLAKE_LANE_CAP');
    expect(httpStatusOf(r.contentType, r.body)!.detailTypes).toEqual([ERROR_INFO_URL]);
  });

  it('a third lane over HTTP (JSON) is the same refusal as JSON', async () => {
    const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['cap-refused-json'])), {
      contentType: 'application/json',
      headers: { 'x-siglake-index': 'third' },
    });
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBeNull();
    expect(r.contentType).toMatch(/^application\/json/);
    const st = decodeStatus(r.contentType, r.body);
    expect(st.code).toBe(grpc.status.UNAVAILABLE);
    expect(st.message.startsWith(LANE_CAP_PREFIX)).toBe(true);
    expect(httpCode(r)).toBe('SIGLAKE_LANE_CAP');
    expect(httpStatusOf(r.contentType, r.body)!.detailTypes).toEqual([ERROR_INFO_URL]);
  });

  it('a third lane over gRPC is UNAVAILABLE without retry-after metadata or RetryInfo, with the ErrorInfo', async () => {
    const r = await rpc.export('logs', logsProto(['cap-refused-grpc']), { 'x-siglake-index': 'third' });
    expect(r.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.details.startsWith(LANE_CAP_PREFIX)).toBe(true);
    expect(r.metadata.get('retry-after')).toEqual([]);
    expect(grpcCode(r)).toBe('SIGLAKE_LANE_CAP');
    expect(grpcStatusOf(r.metadata)!.detailTypes).toEqual([ERROR_INFO_URL]);
  });

  it('counts lane_cap, leaves no directory, and the existing lanes still take writes', async () => {
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_rejected_total{reason="lane_cap"}')).toBe(3);
    expect(m.get('siglake_ingest_rejected_total{reason="queue_full"}')).toBe(0);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}')).toBe(3);
    expect(m.get('siglake_ingest_lanes')).toBe(2);
    expect(fs.existsSync(path.join(ing.walDir, 'indexes'))).toBe(false);
    expect(listFiles(ing.walDir).filter((f) => f.includes('third'))).toEqual([]);

    expect((await post(ing.url, '/v1/logs', logsProto(['cap-logs-2']))).status).toBe(200);
    expect((await rpc.export('traces', tracesProto(['cap-span-2']))).code).toBe(grpc.status.OK);
    const texts = walDump(ing.walDir).flatMap((l) => l.texts);
    expect(texts.sort()).toEqual(['cap-logs-1', 'cap-logs-2', 'cap-span-1', 'cap-span-2']);
  });
});

describe('lane queue full (--ingest-queue-capacity 1)', () => {
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  let held: ManualUpload;
  const heldBody = logsProto(['held-record-1', 'held-record-2']);
  beforeAll(async () => {
    ing = await startIngester({ args: ['--ingest-queue-capacity', '1'] });
    rpc = new RawGrpcClient(ing.grpcAddress);
  });
  afterAll(async () => {
    held?.destroy();
    rpc.close();
    expect(await ing.stop()).toBe(0);
  });

  it('a request whose body is still arriving holds the logs lane slot', async () => {
    held = new ManualUpload(ing.httpPort, '/v1/logs', heldBody.length);
    await held.connected;
    held.write(heldBody.subarray(0, 10));
    await waitFor(async () => (await ing.metric('siglake_ingest_lanes')) === 1);
  });

  it('a second request on the same lane is 503 + Retry-After: 1 (HTTP protobuf and JSON)', async () => {
    const r = await post(ing.url, '/v1/logs', logsProto(['refused-queue-full']));
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('1');
    const st = decodeStatus(r.contentType, r.body);
    expect(st.code).toBe(grpc.status.UNAVAILABLE);
    expect(httpCode(r)).toBe('SIGLAKE_QUEUE_FULL');

    const j = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['refused-queue-full-json'])), { contentType: 'application/json' });
    expect(j.status).toBe(503);
    expect(j.headers.get('retry-after')).toBe('1');
    expect(j.contentType).toMatch(/^application\/json/);
    expect(httpCode(j)).toBe('SIGLAKE_QUEUE_FULL');
  });

  it('over gRPC it is UNAVAILABLE with retry-after: 1 metadata', async () => {
    const r = await rpc.export('logs', logsProto(['refused-queue-full-grpc']));
    expect(r.code).toBe(grpc.status.UNAVAILABLE);
    expect(grpcCode(r)).toBe('SIGLAKE_QUEUE_FULL');
    expect(r.metadata.get('retry-after')).toEqual(['1']);
  });

  it('the traces lane is not affected meanwhile', async () => {
    expect((await post(ing.url, '/v1/traces', tracesProto(['other-lane-http']))).status).toBe(200);
    expect((await rpc.export('traces', tracesProto(['other-lane-grpc']))).code).toBe(grpc.status.OK);
  });

  it('finishing the held body gets it a 200, and the lane takes writes again', async () => {
    held.write(heldBody.subarray(10));
    const r = await held.response;
    expect(r.status).toBe(200);
    expect(r.body.length).toBe(0);
    expect((await post(ing.url, '/v1/logs', logsProto(['after-release']))).status).toBe(200);
    const logs = walDump(path.join(ing.walDir, 'logs')).flatMap((l) => l.texts);
    expect(logs).toEqual(['held-record-1', 'held-record-2', 'after-release']);
  });

  it('counts queue_full once per refusal', async () => {
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_rejected_total{reason="queue_full"}')).toBe(3);
    expect(m.get('siglake_ingest_rejected_total{reason="lane_cap"}')).toBe(0);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}')).toBe(3);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(2);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="200"}')).toBe(2);
  });
});

describe('open WAL files (--wal-max-open-files 8)', () => {
  /** Descriptors of the ingester process that point into its WAL directory (acceptor and workers share one process). */
  function walDescriptors(ing: RunningIngester): number {
    const fdDir = `/proc/${ing.child.pid}/fd`;
    let n = 0;
    for (const fd of fs.readdirSync(fdDir)) {
      let target: string;
      try {
        target = fs.readlinkSync(path.join(fdDir, fd));
      } catch {
        continue; // closed between the listing and the read
      }
      if (target.startsWith(ing.walDir + path.sep)) n++;
    }
    return n;
  }

  it('60 tenants write through at most 8 descriptors across both workers, and every record lands in its own lane', async () => {
    const ing = await startIngester({
      args: ['--trust-tenant-header', '--wal-max-open-files', '8', '--workers', '2', '--compactor=false'],
    });
    try {
      let most = 0;
      for (let round = 0; round < 2; round++) {
        for (let t = 0; t < 60; t++) {
          const r = await post(ing.url, '/v1/logs', logsProto([`fd-${round}-${t}`]), { headers: { 'x-scope-orgid': `t${t}` } });
          expect(r.status).toBe(200);
          most = Math.max(most, walDescriptors(ing));
        }
      }
      expect(most).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(8);
      // Lanes whose descriptor the cache closed left their second record in the
      // commit journal (deferred lane writes): the stop's last checkpoint writes it.
      const m = await ing.metrics();
      let deferred = 0;
      for (const [k, v] of m) if (k.startsWith('siglake_wal_deferred_bytes_total')) deferred += v;
      expect(deferred, 'bytes deferred to the checkpoint').toBeGreaterThan(0);
      expect(await ing.stop()).toBe(0);
      const byTenant = new Map<string, string[]>();
      for (const l of walDump(ing.walDir)) byTenant.set(l.tenant, [...(byTenant.get(l.tenant) ?? []), ...l.texts]);
      expect(byTenant.size).toBe(60);
      for (let t = 0; t < 60; t++) expect(byTenant.get(`t${t}`)).toEqual([`fd-0-${t}`, `fd-1-${t}`]);
    } finally {
      await ing.stop();
    }
  });
});
