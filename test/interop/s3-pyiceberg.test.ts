// pyiceberg reads what Siglake landed on an S3 warehouse: its SqlCatalog on
// the same catalog file, its pyarrow S3 FileIO on the same SeaweedFS bucket,
// credentials from the same AWS environment variables. The rows it returns
// must be exactly the acknowledged records. Needs the Python venv that
// test/interop/install.sh (the interop suites' installer) builds, with
// pyiceberg and pyarrow, besides SeaweedFS.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { exportLogs, exportSpans, makeLogRecords, makeSpans } from '../helpers/otel.js';
import { SeaweedFs } from '../helpers/seaweedfs.js';

const BUCKET = 'siglake-pyiceberg';
const PYTHON = path.join(process.env['SIGLAKE_INTEROP_CACHE'] ?? path.join(os.homedir(), '.cache', 'siglake-interop'), 'venv', 'bin', 'python');

describe('pyiceberg on an S3 warehouse (SeaweedFS)', () => {
  let sw: SeaweedFs;
  const dataDir = tempDir('siglake-s3-pyiceberg-');
  beforeAll(async () => {
    if (!fs.existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: run test/interop/install.sh (pyiceberg, pyarrow)`);
    sw = await SeaweedFs.start();
    await sw.createBucket(BUCKET);
  });
  afterAll(async () => {
    await sw?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('reads exactly the acknowledged records through its own S3 client', async () => {
    const db = path.join(dataDir, 'catalog.db');
    const lake = ['--catalog-url', `sqlite:${db}`, ...sw.warehouseFlags(BUCKET, 'lake')];
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...lake], env: sw.env });
    const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': 'acme' } };
    const bodies = Array.from({ length: 25 }, (_, i) => `py-log-${i}`);
    expect((await exportLogs(target, 'http', await makeLogRecords(bodies))).ok).toBe(true);
    const names = Array.from({ length: 6 }, (_, i) => `py-span-${i}`);
    expect((await exportSpans(target, 'grpc', await makeSpans(names))).ok).toBe(true);
    expect(await ing.stop()).toBe(0);
    const landed = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', ing.walDir, ...lake], { env: sw.env });
    expect(landed.status, landed.stderr).toBe(0);

    const py = spawnSync(
      'nice',
      ['-n', '5', PYTHON, path.join(REPO, 'test/interop/seaweedfs/pyiceberg_read.py'), db, 'siglake', sw.endpoint, 'tenant_acme.logs', 'tenant_acme.traces'],
      { env: { ...process.env, ...sw.env }, encoding: 'utf8', timeout: 170_000 },
    );
    expect(py.status, py.stderr).toBe(0);
    const got = JSON.parse(py.stdout) as Record<string, { metadata_location: string; rows: string[] }>;
    expect(got['tenant_acme.logs']!.metadata_location).toMatch(new RegExp(`^s3://${BUCKET}/lake/tenant_acme/logs/metadata/`));
    expect(got['tenant_acme.logs']!.rows.sort()).toEqual([...bodies].sort());
    expect(got['tenant_acme.traces']!.rows.sort()).toEqual([...names].sort());
  });
});
