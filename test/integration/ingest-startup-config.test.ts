// Start-up (contract §8: every series that exists at zero; /healthz, /readyz)
// and configuration errors (contract §2: exit code 2 and one line naming the
// setting and its source), against the real `siglake` executable.

import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTINGS, envName, settingNames } from '../../src/config/settings.js';
import { get, post } from '../helpers/http.js';
import { CLI, REPO, listFiles, runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';

describe('start-up', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester();
  });
  afterAll(async () => {
    expect(await ing.stop()).toBe(0);
  });

  it('/healthz and /readyz answer 200 once ready', async () => {
    const h = await get(ing.url, '/healthz');
    expect(h.status).toBe(200);
    const r = await get(ing.url, '/readyz');
    expect(r.status).toBe(200);
    expect(r.text).toBe('ready\n');
  });

  it('every series of contract §8 exists at zero before any request', async () => {
    const m = await ing.metrics();
    const zero = [
      ...['header_not_trusted', 'claim_missing', 'claim_invalid', 'header_mismatch', 'not_allowed', 'at_capacity'].map(
        (r) => `siglake_ingest_tenant_denied_total{reason="${r}"}`,
      ),
      ...['queue_full', 'lane_cap', 'mem_breaker', 'rate_limited'].map((r) => `siglake_ingest_rejected_total{reason="${r}"}`),
      'siglake_ingest_mem_breaker_rejected_total',
      'siglake_rate_budget_backend_errors_total',
      'siglake_ingest_requests_total{endpoint="otlp",status="200"}',
      'siglake_ingest_requests_total{endpoint="otlp_traces",status="200"}',
      'siglake_ingest_records_total{endpoint="otlp"}',
      'siglake_ingest_records_total{endpoint="otlp_traces"}',
      'siglake_ingest_lanes',
      'siglake_ingest_tenants_admitted',
      'siglake_ingest_lane_queue_depth_count',
      'siglake_wal_bytes_written_total',
      'siglake_wal_fsync_seconds_count',
      'siglake_wal_fsync_seconds_sum',
      'siglake_wal_fsync_seconds_bucket{le="+Inf"}',
      'siglake_wal_truncated_bytes_total',
    ];
    const missing = zero.filter((s) => !m.has(s));
    expect(missing).toEqual([]);
    const nonZero = zero.filter((s) => m.get(s) !== 0).map((s) => `${s}=${m.get(s)}`);
    expect(nonZero).toEqual([]);
    expect(m.get('siglake_process_rss_bytes')).toBeGreaterThan(1024 * 1024);
    // Nothing was written: the WAL directory holds no file.
    expect(listFiles(ing.walDir).filter((f) => !f.endsWith('/'))).toEqual([]);
  });
});

/** `siglake ingest ...` that must fail at once; a 20 s timeout stands for "it started instead". */
function ingestMustFail(args: string[], env: Record<string, string> = {}) {
  const dir = tempDir('siglake-config-');
  const r = spawnSync(
    process.execPath,
    [CLI, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), ...args],
    { encoding: 'utf8', env: { ...process.env, ...env }, cwd: dir, timeout: 20_000 },
  );
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, dir };
}

function oneLine(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l !== '');
  expect(lines, `stderr: ${stderr}`).toHaveLength(1);
  return lines[0]!;
}

describe('configuration errors stop start-up with exit code 2 and one line', () => {
  it('a bad flag value names the setting and the flag', () => {
    const r = ingestMustFail(['--max-tenants', '-1']);
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('ingester.maxTenants');
    expect(line).toContain('flag --max-tenants');
    expect(line).toMatch(/negative|-1/);
    expect(listFiles(r.dir)).toEqual([]);
  });

  it('a bad environment value names the setting and the env var', () => {
    const r = ingestMustFail([], { SIGLAKE_WAL_FSYNC: 'sometimes' });
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('ingester.wal.fsync');
    expect(line).toContain('env SIGLAKE_WAL_FSYNC');
    expect(line).toContain('sometimes');
  });

  it('a YAML file with an unknown key names the key and the file', () => {
    const dir = tempDir('siglake-yaml-');
    const file = path.join(dir, 'siglake.yaml');
    fs.writeFileSync(file, 'ingester:\n  maxTenants: 3\n  maxTenantz: 4\n');
    const r = ingestMustFail(['--config', file]);
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('ingester.maxTenantz');
    expect(line).toContain(file);
    expect(line).toMatch(/unknown key/);
  });

  it('an unknown key that holds only a map, even an empty one, is refused too', () => {
    // `flatten` descended into any map: `foo: {bar: {}}` or a typo'd section with nested maps was accepted.
    const dir = tempDir('siglake-yaml-');
    for (const [text, key] of [
      ['foo:\n  bar: {}\n', 'foo'],
      ['server:\n  budget:\n    nope: {}\n', 'server.budget.nope'],
    ] as const) {
      const file = path.join(dir, 'siglake.yaml');
      fs.writeFileSync(file, text);
      const r = ingestMustFail(['--config', file]);
      expect(r.status).toBe(2);
      expect(oneLine(r.stderr)).toContain(`unknown key ${key} `);
    }
  });

  it('a YAML value of the wrong type names the setting and the file', () => {
    const dir = tempDir('siglake-yaml-');
    const file = path.join(dir, 'siglake.yaml');
    fs.writeFileSync(file, 'ingester:\n  maxTenants: many\n');
    const r = ingestMustFail(['--config', file]);
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('ingester.maxTenants');
    expect(line).toContain(`file ${file}`);
    expect(line).toMatch(/integer/);
  });

  it('--tenant-claim without OIDC names both settings', () => {
    const r = ingestMustFail(['--tenant-claim', 'x']);
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('ingester.tenantClaim');
    expect(line).toContain('flag --tenant-claim');
    expect(line).toMatch(/OIDC|oidc/);
  });

  it('values that a component checks further are refused with the setting and its source too', () => {
    const keys = tempDir('siglake-jwks-');
    const priv = path.join(keys, 'private.json');
    const jwk = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
    fs.writeFileSync(priv, JSON.stringify({ keys: [{ ...jwk, kid: 'k1' }] }));
    const odd = path.join(keys, 'odd.json');
    fs.writeFileSync(odd, JSON.stringify({ keys: [{ kty: 'oops', kid: 'k1' }] }));
    const cases: { args: string[]; env?: Record<string, string>; want: string[] }[] = [
      { args: ['--rate-limit-per-sec', '5000000'], want: ['ingester.rateLimit.ratePerSec', 'flag --rate-limit-per-sec', '1000000'] },
      { args: ['--allowed-tenants', 'ok,../x'], want: ['ingester.allowedTenants', 'flag --allowed-tenants', '"../x"'] },
      { args: ['--oidc-issuer', 'https://issuer.test', '--oidc-jwks-file', priv], want: ['auth.oidc.jwksFile', 'flag --oidc-jwks-file', 'private'] },
      { args: [], env: { SIGLAKE_OIDC_ISSUER: 'https://issuer.test', SIGLAKE_OIDC_JWKS_FILE: odd }, want: ['auth.oidc.jwksFile', 'env SIGLAKE_OIDC_JWKS_FILE', '"oops"'] },
    ];
    for (const c of cases) {
      const r = ingestMustFail(c.args, c.env);
      expect(r.status, r.stderr).toBe(2);
      const line = oneLine(r.stderr);
      for (const w of c.want) expect(line).toContain(w);
      expect(line).not.toContain('"d"');
      expect(listFiles(r.dir)).toEqual([]);
    }
  });

  it('listeners that would share a port are refused before anything is made, wildcards and localhost included', () => {
    // Only equal host strings were compared: 0.0.0.0 beside 127.0.0.1 (or localhost beside
    // 127.0.0.1, or :: beside 0.0.0.0) on one port passed, made the WAL, the catalog and the
    // warehouse, then failed with EADDRINUSE and exit code 1.
    const cases: [string[], string][] = [
      [['--http-listen', '0.0.0.0:47318', '--grpc-listen', '127.0.0.1:47318'], 'invalid server.grpcListen (flag --grpc-listen): an address that overlaps server.httpListen (flag --http-listen)'],
      [['--http-listen', '127.0.0.1:47318', '--grpc-listen', 'localhost:47318'], 'invalid server.grpcListen (flag --grpc-listen)'],
      [['--http-listen', ':47318', '--grpc-listen', '[::]:47318'], 'invalid server.grpcListen (flag --grpc-listen)'],
      [['--metrics-listen', '0.0.0.0:47317', '--grpc-listen', '127.0.0.1:47317'], 'invalid server.metricsListen (flag --metrics-listen): an address that overlaps server.grpcListen'],
    ];
    for (const [args, want] of cases) {
      const r = ingestMustFail(args);
      expect(r.status, r.stderr).toBe(2);
      expect(oneLine(r.stderr)).toContain(want);
      expect(listFiles(r.dir)).toEqual([]);
    }
  });

  it('a flag whose value was left out does not take the next flag as its value', () => {
    // `--wal-dir --trust-tenant-header` made a WAL directory named --trust-tenant-header and left
    // the header untrusted.
    const r = ingestMustFail(['--wal-dir', '--trust-tenant-header']);
    expect(r.status).toBe(2);
    expect(oneLine(r.stderr)).toBe(
      'siglake: flag --wal-dir needs a value, got the flag --trust-tenant-header (write --wal-dir=VALUE for a value that starts with --)',
    );
    expect(listFiles(r.dir)).toEqual([]);
  });

  it('a word after a secret flag\'s value is refused without echoing it', () => {
    const r = ingestMustFail(['--auth-bearer-tokens', 'tok-one-s3cret', 'tok-two-s3cret']);
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('unexpected argument after the value of --auth-bearer-tokens');
    expect(line).not.toContain('s3cret');
    expect(listFiles(r.dir)).toEqual([]);
  });

  it('an unknown flag is named', () => {
    const r = ingestMustFail(['--no-such-flag', '1']);
    expect(r.status).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain('--no-such-flag');
    expect(line).toMatch(/unknown flag/);
  });

  it('`siglake config reference` prints a table row for every setting, in all three forms', () => {
    const r = runCli(['config', 'reference'], { cwd: REPO });
    expect(r.status).toBe(0);
    const rows = r.stdout.split('\n').filter((l) => l.startsWith('| `'));
    // The flags the contract (§2) names, plus the ones this suite relies on.
    const contractFlags = [
      '--http-listen',
      '--grpc-listen',
      '--max-request-bytes',
      '--workers',
      '--wal-dir',
      '--wal-fsync',
      '--wal-fsync-interval-ms',
      '--wal-segment-bytes',
      '--tenant-claim',
      '--trust-tenant-header',
      '--allowed-tenants',
      '--max-tenants',
      '--ingest-max-lanes',
      '--ingest-queue-capacity',
      '--mem-breaker-limit-mib',
      '--mem-breaker-sample-secs',
      '--rate-limit-per-sec',
      '--rate-limit-burst',
      '--redis-url',
      '--auth-bearer-tokens',
      '--auth-bearer-tokens-file',
      '--oidc-issuer',
      '--oidc-audience',
      '--oidc-jwks-url',
      '--oidc-jwks-file',
      '--request-timeout-secs',
      '--shutdown-timeout-secs',
    ];
    const flags = new Set([...contractFlags, ...settingNames().map((n) => SETTINGS[n].flag)]);
    const missing: string[] = [];
    for (const flag of flags) {
      const env = 'SIGLAKE_' + flag.slice(2).toUpperCase().replace(/-/g, '_');
      const row = rows.find((l) => l.includes(`| \`${flag}\` |`));
      if (row === undefined || !row.includes(`\`${env}\``)) missing.push(flag);
    }
    expect(missing).toEqual([]);
    // Every row also carries the YAML key of its setting.
    for (const n of settingNames()) {
      const row = rows.find((l) => l.includes(`| \`${SETTINGS[n].flag}\` |`))!;
      expect(row.startsWith(`| \`${SETTINGS[n].key}\` |`), row).toBe(true);
      expect(row).toContain(envName(SETTINGS[n].flag));
    }
  });
});

describe('the native addon (--otlp-walk, --wal-drop-synced-pages)', () => {
  const nativeLine = (ing: RunningIngester) => ing.logs.find((l) => l.msg === 'native code');

  it('is used by default: the native walk validates, and synced segment pages are dropped', async () => {
    const ing = await startIngester();
    try {
      expect(nativeLine(ing)).toMatchObject({ walk: 'native', dropSyncedPages: true });
      const ok = await post(ing.url, '/v1/logs', logsProto(['native walk']));
      expect(ok.status).toBe(200);
      // A body the walk refuses is refused with the exact walk's words.
      const bad = await post(ing.url, '/v1/logs', Uint8Array.from([0x0a, 0x05, 0x12, 0x03, 0x1a, 0x01, 0xff]));
      expect(bad.status).toBe(400);
      expect(new TextDecoder().decode(bad.body)).toContain('SIGLAKE_BAD_BODY');
      expect(walDump(ing.walDir).map((d) => d.texts)).toEqual([['native walk']]);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });

  it('without the addon, auto falls back with a warning for each, and serves the same', async () => {
    const ing = await startIngester({ env: { SIGLAKE_TEST_NATIVE_PATH: '/nonexistent/siglake_native.node' } });
    try {
      const warnings = ing.logs.filter((l) => l.level === 40).map((l) => l.msg);
      expect(warnings).toContain('OTLP bodies are validated by the JavaScript walk: slower on large bodies');
      expect(warnings).toContain('WAL segment pages are left in the page cache (--wal-drop-synced-pages needs the native addon)');
      expect(nativeLine(ing)).toMatchObject({ walk: 'js', dropSyncedPages: false });
      expect((await post(ing.url, '/v1/logs', logsProto(['js walk']))).status).toBe(200);
      expect(walDump(ing.walDir).map((d) => d.texts)).toEqual([['js walk']]);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });

  it('--otlp-walk js and --wal-drop-synced-pages=false turn each off', async () => {
    const ing = await startIngester({ args: ['--otlp-walk', 'js', '--wal-drop-synced-pages=false'] });
    try {
      expect(nativeLine(ing)).toMatchObject({ walk: 'js', dropSyncedPages: false });
      expect(ing.logs.filter((l) => l.level === 40)).toEqual([]);
      expect((await post(ing.url, '/v1/logs', logsProto(['plain']))).status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });

  it('--otlp-walk native refuses to start without the addon, in one line', () => {
    const r = ingestMustFail(['--otlp-walk', 'native'], { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_NATIVE_PATH: '/nonexistent/siglake_native.node' });
    expect(r.status).toBe(2);
    expect(oneLine(r.stderr)).toContain(
      'native addon siglake_native.node: not built (npm run build builds it; it needs a C compiler, make and python3); refusing to start with --otlp-walk native (auto falls back to the JavaScript walk)',
    );
    expect(listFiles(r.dir)).toEqual([]);
  });
});

describe('a refused start leaves no audit file behind', () => {
  // The Ingester opened (created) audit.file before it read the tenants file, and cli.ts checked
  // the catalog and the warehouse after that: a refused start (exit 2, the right line) left an
  // empty audit.log behind.
  const refusals = (dir: string): { args: string[]; want: string }[] => {
    const blocker = path.join(dir, 'not-a-directory');
    fs.writeFileSync(blocker, 'x');
    return [
      { args: ['--tenants-file', path.join(dir, 'nonexistent.yaml')], want: 'invalid tenants.file (flag --tenants-file)' },
      {
        args: ['--catalog-url', `sqlite:${path.join(dir, 'catalog.db')}`, '--warehouse', path.join(blocker, 'warehouse')],
        want: 'invalid warehouse.path (flag --warehouse): cannot write to the warehouse',
      },
    ];
  };

  it('in a fresh directory: exit 2, the line, and no audit file (nor anything else)', () => {
    const dir = tempDir('siglake-audit-refused-');
    for (const c of refusals(dir)) {
      const audit = path.join(dir, 'audit.log');
      const r = ingestMustFail(['--audit-file', audit, ...c.args]);
      expect(r.status, r.stderr).toBe(2);
      expect(oneLine(r.stderr)).toContain(c.want);
      expect(fs.existsSync(audit), c.want).toBe(false);
      expect(listFiles(r.dir)).toEqual([]);
      expect(fs.readdirSync(dir).sort()).toEqual(['not-a-directory']);
    }
  });

  it('an audit file that was there keeps its bytes', () => {
    const dir = tempDir('siglake-audit-kept-');
    const audit = path.join(dir, 'audit.log');
    const before = '{"event":"refusal","tenant":null}\n';
    fs.writeFileSync(audit, before);
    for (const c of refusals(dir)) {
      const r = ingestMustFail(['--audit-file', audit, ...c.args]);
      expect(r.status, r.stderr).toBe(2);
      expect(oneLine(r.stderr)).toContain(c.want);
      expect(fs.readFileSync(audit, 'utf8')).toBe(before);
    }
  });

  it('an audit file that cannot be opened is still refused before anything is made', () => {
    const dir = tempDir('siglake-audit-bad-');
    const r = ingestMustFail(['--audit-file', path.join(dir, 'no', 'such', 'dir', 'audit.log')]);
    expect(r.status, r.stderr).toBe(2);
    expect(oneLine(r.stderr)).toContain('invalid audit.file (flag --audit-file): cannot open');
    expect(oneLine(r.stderr)).toContain('ENOENT');
    expect(listFiles(r.dir)).toEqual([]);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('a start that passes every check makes the audit file, and it is written', async () => {
    const dir = tempDir('siglake-audit-made-');
    const audit = path.join(dir, 'audit.log');
    const ing = await startIngester({ dataDir: dir, args: ['--audit-file', audit] });
    try {
      expect(fs.existsSync(audit)).toBe(true);
      // No tenant header trusted: a refusal, audited.
      expect((await post(ing.url, '/v1/logs', logsProto(['x']), { headers: { 'x-scope-orgid': 'acme' } })).status).toBe(403);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    expect(fs.readFileSync(audit, 'utf8')).toContain('"event":"refusal"');
  });
});

describe('a listen host that does not resolve is a settings refusal', () => {
  // --http-listen nosuch.invalid:4318 made the WAL, the catalog and the warehouse, then failed
  // `cannot listen on nosuch.invalid:4318 for OTLP/HTTP` with exit 1 and no reason. (.invalid never
  // resolves, RFC 6761; a resolver that cannot reach its server says EAI_AGAIN instead.)
  for (const [flag, key] of [
    ['--http-listen', 'server.httpListen'],
    ['--grpc-listen', 'server.grpcListen'],
    ['--metrics-listen', 'server.metricsListen'],
  ] as const) {
    it(`${flag} nosuch.invalid:0: exit 2, one line naming ${key}, the host and the reason; nothing made`, () => {
      const r = ingestMustFail([flag, 'nosuch.invalid:0', '--catalog-url', 'sqlite:catalog.db', '--warehouse', 'warehouse']);
      expect(r.status, r.stderr).toBe(2);
      expect(oneLine(r.stderr)).toMatch(new RegExp(`^siglake: invalid ${key.replace('.', '\\.')} \\(flag ${flag}\\): host nosuch\\.invalid does not resolve \\((ENOTFOUND|EAI_AGAIN)\\)$`));
      expect(fs.readdirSync(r.dir)).toEqual([]);
    });
  }
});
