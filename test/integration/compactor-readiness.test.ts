// A compactor that can never land anything does not leave the ingester
// "ready" (issue 19): a catalog or warehouse that fails the start-up check
// stops start-up with exit 2 and one line naming the setting and its source;
// a compactor that later fails every round for longer than
// compactor.maxFailingSecs turns /readyz to 503 with the reason (and
// siglake_compactor_not_ready to 1) until a round succeeds again, and then
// the record it held lands.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { post } from '../helpers/http.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { jsonBytes, logsJson } from '../helpers/otlp-bodies.js';
import { untilValue } from '../helpers/wait.js';

describe('start-up check of the catalog and the warehouse', () => {
  const dir = tempDir('siglake-preflight-');
  /** A regular file: nothing can be created under it, even by root. */
  const blocker = path.join(dir, 'not-a-directory');
  fs.writeFileSync(blocker, 'x');

  it('a catalog that cannot be created: exit 2, one line naming catalog.url and the flag', () => {
    const r = runCli(['ingest', '--wal-dir', path.join(dir, 'wal'), '--catalog-url', `sqlite:${blocker}/catalog.db`, '--warehouse', path.join(dir, 'wh')]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^siglake: invalid catalog\.url \(flag --catalog-url\): cannot open or create the Iceberg catalog: .*(ENOTDIR|EEXIST)/);
    // The warehouse checked before the catalog is not left behind.
    expect(fs.existsSync(path.join(dir, 'wh'))).toBe(false);
  });

  it('a PostgreSQL catalog nobody listens on: exit 2 naming catalog.url from the env var, without printing the password', () => {
    const r = runCli(['ingest', '--wal-dir', path.join(dir, 'wal'), '--warehouse', path.join(dir, 'wh')], {
      env: { SIGLAKE_CATALOG_URL: 'postgres://siglake:s3cret-pw@127.0.0.1:1/siglake' },
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^siglake: invalid catalog\.url \(env SIGLAKE_CATALOG_URL\): cannot open or create the Iceberg catalog: /);
    expect(r.stderr).not.toContain('s3cret-pw');
  });

  it('a warehouse that cannot be written: exit 2 naming warehouse.path and the config file key; nothing left behind in it', () => {
    const cfg = path.join(dir, 'siglake.yaml');
    fs.writeFileSync(cfg, `warehouse:\n  path: ${blocker}/warehouse\ncatalog:\n  url: sqlite:${dir}/catalog.db\n`);
    const r = runCli(['ingest', '--config', cfg, '--wal-dir', path.join(dir, 'wal')]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`siglake: invalid warehouse.path (file ${cfg} key warehouse.path): cannot write to the warehouse file://`);
    expect(fs.existsSync(path.join(dir, 'catalog.db'))).toBe(false);
    // `siglake compact` checks the same, with the same exit code (on a WAL root: --once refuses a path that is none).
    fs.mkdirSync(path.join(dir, 'wal'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'wal', '.siglake-wal-root'), 'siglake WAL root\n');
    const c = runCli(['compact', '--once', '--config', cfg, '--wal-dir', path.join(dir, 'wal')]);
    expect(c.status).toBe(2);
    expect(c.stderr).toContain('invalid warehouse.path (file');
  });

  it('a good warehouse keeps no probe object after the check', async () => {
    const wh = path.join(dir, 'good-wh');
    const ing = await startIngester({ args: ['--catalog-url', `sqlite:${dir}/good.db`, '--warehouse', wh] });
    expect(fs.readdirSync(wh)).toEqual([]);
    expect(await ing.stop()).toBe(0);
  });

  it('an s3:// warehouse not reachable yet: the ingester starts, nothing is made in its working directory, and the compactor says why it retries', async () => {
    // Regression: the start-up check wrote its probe to the s3:// URL as a
    // local path, leaving directories `s3:/bucket/…` wherever siglake ran.
    const cwd = tempDir('siglake-preflight-s3-cwd-');
    const ing = await startIngester({
      dataDir: cwd,
      args: ['--catalog-url', `sqlite:${dir}/s3.db`, '--warehouse', 's3://not-there/lake', '--warehouse-s3-endpoint', 'http://127.0.0.1:1', '--warehouse-s3-region', 'us-east-1'],
      env: { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' },
    });
    const retrying = await untilValue('the compactor retrying', () => ing.logs.find((l) => l.msg === 'the compactor cannot open the catalog or warehouse; retrying'), 30_000);
    expect(String(retrying['err'])).toMatch(/s3:\/\/not-there\/lake/);
    expect(fs.readdirSync(cwd).filter((f) => f !== 'wal')).toEqual([]);
    expect(await ing.stop()).toBe(0);
  });

  it('compactor.maxFailingSecs is a setting: a bad value is refused like any other', () => {
    const r = runCli(['ingest', '--compact-max-failing-secs', '-1']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^siglake: invalid compactor\.maxFailingSecs \(flag --compact-max-failing-secs\): /);
  });
});

describe('a compactor failing every round turns /readyz to 503 past compactor.maxFailingSecs', () => {
  const dir = tempDir('siglake-compactor-ready-');
  const warehouse = path.join(dir, 'warehouse');
  const catalogUrl = `sqlite:${path.join(dir, 'catalog.db')}`;
  let ing: RunningIngester | undefined;
  let restoreFetch: () => void;
  beforeAll(() => {
    restoreFetch = installFileFetch();
  });
  afterAll(async () => {
    await ing?.kill9();
    restoreFetch();
  });

  it('503 with the reason while every round fails, 200 again and the record landed once the warehouse is back', async () => {
    ing = await startIngester({
      dataDir: dir,
      args: ['--catalog-url', catalogUrl, '--warehouse', warehouse, '--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1', '--compact-max-failing-secs', '2'],
    });
    expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
    // The warehouse breaks after start-up: its directory becomes a regular file.
    fs.rmSync(warehouse, { recursive: true });
    fs.writeFileSync(warehouse, 'not a directory');
    const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['held-while-the-warehouse-is-broken'])), { contentType: 'application/json' });
    expect(r.status).toBe(200);

    const text = await untilValue('/readyz 503', async () => {
      const res = await fetch(`${ing!.url}/readyz`);
      return res.status === 503 ? res.text() : undefined;
    });
    expect(text).toMatch(/^not ready: compactor: every round has failed for \d+ s \(compactor\.maxFailingSecs 2\): writing data files failed: .*ENOTDIR/);
    const m = await ing.metrics();
    expect(m.get('siglake_compactor_not_ready')).toBe(1);
    expect(m.get('siglake_compactor_failing_seconds')).toBeGreaterThan(2);
    expect(m.get('siglake_compactor_round_errors_total')).toBeGreaterThanOrEqual(2);
    expect(m.get('siglake_compactor_commits_total')).toBe(0);
    // Liveness is unaffected: the process is alive, only not fit for traffic.
    expect((await fetch(`${ing.url}/healthz`)).status).toBe(200);

    fs.rmSync(warehouse);
    await untilValue('/readyz 200', async () => ((await fetch(`${ing!.url}/readyz`)).status === 200 ? true : undefined));
    const after = await ing.metrics();
    expect(after.get('siglake_compactor_not_ready')).toBe(0);
    expect(after.get('siglake_compactor_failing_seconds')).toBe(0);
    const catalog = SqlCatalog.open(catalogUrl, 'siglake');
    const loc = await catalog.metadataLocation('main', 'logs');
    await catalog.close();
    expect(loc).not.toBeNull();
    expect((await icebirdRows(loc!)).map((row) => row['body'])).toEqual(['held-while-the-warehouse-is-broken']);
    expect(await ing.stop()).toBe(0);
    ing = undefined;
  });

  it('with compactor.maxFailingSecs 0 the compactor never affects readiness', async () => {
    const d = tempDir('siglake-compactor-ready0-');
    const wh = path.join(d, 'warehouse');
    ing = await startIngester({
      dataDir: d,
      args: ['--catalog-url', `sqlite:${d}/c.db`, '--warehouse', wh, '--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1', '--compact-max-failing-secs', '0'],
    });
    fs.rmSync(wh, { recursive: true });
    fs.writeFileSync(wh, 'not a directory');
    expect((await post(ing.url, '/v1/logs', jsonBytes(logsJson(['x'])), { contentType: 'application/json' })).status).toBe(200);
    await untilValue('three failed rounds', async () => (((await ing!.metrics()).get('siglake_compactor_round_errors_total') ?? 0) >= 3 ? true : undefined));
    const m = await ing.metrics();
    expect(m.get('siglake_compactor_failing_seconds')).toBeGreaterThan(0);
    expect(m.get('siglake_compactor_not_ready')).toBe(0);
    expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    ing = undefined;
  });
});
