// A writer worker thread that dies is replaced (src/shard); what it wrote
// must still land. Outside batch mode a quiet lane's last segment, written by
// the dead worker, stayed the lane's highest with no sealed marker: the
// compactor takes neither, so it landed only when the lane wrote again or the
// ingester restarted. The replacement worker now marks what it recovered.
// Real `siglake ingest` with its in-process compactor; icebird reads the rows.

import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { startIngester, tempDir } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { until } from '../helpers/wait.js';

let restoreFetch: () => void;
beforeAll(() => {
  restoreFetch = installFileFetch();
});
afterAll(() => restoreFetch());

describe.each(['interval', 'never'])('a worker restart under --wal-fsync %s', (mode) => {
  it("a quiet lane's records written before the restart land", async () => {
    const dir = tempDir('siglake-worker-restart-');
    const catalogUrl = `sqlite:${path.join(dir, 'catalog.db')}`;
    const ing = await startIngester({
      dataDir: dir,
      args: ['--wal-fsync', mode, '--wal-segment-max-age-secs', '2', '--compact-interval-secs', '1', '--compactor-placement', 'thread', '--catalog-url', catalogUrl, '--warehouse', path.join(dir, 'warehouse'), '--trust-tenant-header'],
    });
    const catalog = SqlCatalog.open(catalogUrl, 'siglake');
    const rows = async (ns: string) => {
      const loc = await catalog.metadataLocation(ns, 'logs');
      return loc === null ? 0 : (await icebirdRows(loc)).length;
    };
    try {
      const send = async (tenant: string, n: number) => {
        for (let i = 0; i < n; i++) {
          const r = await fetch(`${ing.url}/v1/logs`, { method: 'POST', body: logsProto([`${tenant}-${i}`]), headers: { 'content-type': 'application/x-protobuf', 'x-scope-orgid': tenant } });
          expect(r.status).toBe(200);
          await r.arrayBuffer();
        }
      };
      await send('quiet', 5);
      expect((await fetch(`${ing.url}/-/test/kill-worker?shard=0`, { method: 'POST' })).status).toBe(200);
      // The shard serves again once its worker is replaced (a request in between may be refused).
      let stored = 0;
      await until(async () => {
        const r = await fetch(`${ing.url}/v1/logs`, { method: 'POST', body: logsProto([`other-${stored}`]), headers: { 'content-type': 'application/x-protobuf', 'x-scope-orgid': 'other' } });
        await r.arrayBuffer();
        if (r.status === 200) stored++;
        return stored === 3;
      }, 20_000, 'the replaced worker to store three requests');
      await until(async () => (await rows('tenant_other')) >= 3, 30_000, "the other tenant's rows to land");
      await until(async () => (await rows('tenant_quiet')) === 5, 30_000, "the quiet lane's rows to land");
    } finally {
      await catalog.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});
