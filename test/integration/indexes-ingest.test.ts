// Ingest knows the index registry (contract §6): x-siglake-index naming an
// index the tenant does not have is 400 SIGLAKE_UNKNOWN_INDEX over HTTP
// (gRPC INVALID_ARGUMENT), counted, before any lane or WAL directory exists;
// an index created while the ingester runs is accepted within
// --ingest-indexes-refresh-secs, one deleted is refused again. Real process,
// real catalog, the index made with the real `siglake index` command.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { post } from '../helpers/http.js';
import { sleep } from '../helpers/wait.js';
import { listFiles, runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { decodeStatus, logsProto } from '../helpers/otlp-bodies.js';

const PB = 'application/x-protobuf';

describe('ingest refuses indexes the tenant does not have', () => {
  const dataDir = tempDir('siglake-index-ingest-');
  const catalogUrl = `sqlite:${path.join(dataDir, 'catalog.db')}`;
  const flags = ['--catalog-url', catalogUrl, '--warehouse', path.join(dataDir, 'warehouse')];
  let ing: RunningIngester;
  let rpc: RawGrpcClient;

  const send = (tenant: string, index: string, text: string) =>
    post(ing.url, '/v1/logs', logsProto([text]), { headers: { 'x-scope-orgid': tenant, 'x-siglake-index': index } });
  const rejected = async () => (await ing.metric('siglake_ingest_rejected_total{reason="unknown_index"}')) ?? -1;

  beforeAll(async () => {
    ing = await startIngester({
      dataDir,
      args: ['--trust-tenant-header', '--compactor=false', '--ingest-indexes-refresh-secs', '1', ...flags],
      indexes: { acme: ['audit'] },
    });
    rpc = new RawGrpcClient(ing.grpcAddress);
  });
  afterAll(async () => {
    rpc.close();
    expect(await ing.stop()).toBe(0);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('an index the tenant has is taken; a typo, or another tenant\'s index, is 400 SIGLAKE_UNKNOWN_INDEX and creates nothing', async () => {
    expect(await rejected()).toBe(0);
    expect((await send('acme', 'audit', 'ok-1')).status).toBe(200);
    const lanesBefore = await ing.metric('siglake_ingest_lanes');
    const typo = await send('acme', 'audti', 'typo-1');
    expect(typo.status).toBe(400);
    const st = decodeStatus(typo.contentType, typo.body);
    expect(st.message).toContain('unknown index');
    const other = await send('globex', 'audit', 'other-1');
    expect(other.status).toBe(400);
    const g = await rpc.export('logs', logsProto(['typo-grpc']), { 'x-scope-orgid': 'acme', 'x-siglake-index': 'Audit' });
    expect(g.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(g.details).toContain('unknown index');
    expect(await rejected()).toBe(3);
    expect(await ing.metric('siglake_ingest_lanes')).toBe(lanesBefore);
    const files = listFiles(ing.walDir);
    expect(files.some((f) => /audti|Audit|globex/.test(f))).toBe(false);
    expect(walDump(ing.walDir).map((l) => l.texts).flat()).toEqual(['ok-1']);
  });

  it('an index created while the ingester runs is accepted within the refresh interval; a deleted one is refused again', async () => {
    const f = path.join(dataDir, 'globex-audit.yaml');
    fs.writeFileSync(f, 'name: audit\n');
    const made = runCli(['index', 'create', '--file', f, '--tenant', 'globex', ...flags]);
    expect(made.status, made.stderr).toBe(0);
    const deadline = Date.now() + 30_000;
    let status = 0;
    while ((status = (await send('globex', 'audit', 'late-1')).status) !== 200) {
      expect(status).toBe(400);
      if (Date.now() > deadline) throw new Error('the new index was not accepted in time');
      await sleep(100);
    }
    expect(runCli(['index', 'delete', 'audit', '--tenant', 'acme', ...flags]).status).toBe(0);
    const end = Date.now() + 30_000;
    while ((status = (await send('acme', 'audit', 'after-delete')).status) !== 400) {
      if (Date.now() > end) throw new Error('the deleted index was still accepted');
      await sleep(100);
    }
    expect((await send('globex', 'audit', 'still-ok')).status).toBe(200);
  });
});
