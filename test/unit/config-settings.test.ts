import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { configReference } from '../../src/config/reference.js';
import { SETTINGS, envName, settingNames } from '../../src/config/settings.js';
import { ConfigError } from '../../src/errors.js';

const load = (argv: string[], env: Record<string, string> = {}) => loadSettings({ argv, env });

function yamlFile(text: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-cfg-'));
  const p = path.join(dir, 'siglake.yaml');
  fs.writeFileSync(p, text);
  return p;
}

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('the settings table', () => {
  it('derives every env var from its flag by the one naming rule', () => {
    for (const n of settingNames()) {
      const d = SETTINGS[n];
      expect(d.flag).toMatch(/^--[a-z0-9-]+$/);
      expect(envName(d.flag)).toBe('SIGLAKE_' + d.flag.slice(2).toUpperCase().replace(/-/g, '_'));
    }
    expect(envName('--ingest-max-lanes')).toBe('SIGLAKE_INGEST_MAX_LANES');
  });

  it('has unique flags and YAML keys, and covers every setting of contract §2', () => {
    const flags = settingNames().map((n) => SETTINGS[n].flag);
    const keys = settingNames().map((n) => SETTINGS[n].key);
    expect(new Set(flags).size).toBe(flags.length);
    expect(new Set(keys).size).toBe(keys.length);
    const contract: [string, string][] = [
      ['server.httpListen', '--http-listen'],
      ['server.grpcListen', '--grpc-listen'],
      ['server.maxRequestBytes', '--max-request-bytes'],
      ['ingester.workers', '--workers'],
      ['ingester.walDir', '--wal-dir'],
      ['ingester.wal.fsync', '--wal-fsync'],
      ['ingester.wal.fsyncIntervalMs', '--wal-fsync-interval-ms'],
      ['ingester.wal.segmentBytes', '--wal-segment-bytes'],
      ['ingester.tenantClaim', '--tenant-claim'],
      ['ingester.trustTenantHeader', '--trust-tenant-header'],
      ['ingester.allowedTenants', '--allowed-tenants'],
      ['ingester.maxTenants', '--max-tenants'],
      ['ingester.maxLanes', '--ingest-max-lanes'],
      ['ingester.backpressure.capacity', '--ingest-queue-capacity'],
      ['ingester.memBreaker.limitMib', '--mem-breaker-limit-mib'],
      ['ingester.memBreaker.sampleSecs', '--mem-breaker-sample-secs'],
      ['ingester.rateLimit.ratePerSec', '--rate-limit-per-sec'],
      ['ingester.rateLimit.burst', '--rate-limit-burst'],
      ['redis.url', '--redis-url'],
      ['auth.bearerTokens', '--auth-bearer-tokens'],
      ['auth.oidc.issuer', '--oidc-issuer'],
      ['auth.oidc.audience', '--oidc-audience'],
      ['auth.oidc.jwksUrl', '--oidc-jwks-url'],
      ['auth.oidc.jwksFile', '--oidc-jwks-file'],
      ['ingester.wal.segmentMaxAgeSecs', '--wal-segment-max-age-secs'],
    ];
    for (const [key, flag] of contract) {
      const name = settingNames().find((n) => SETTINGS[n].key === key);
      expect(name, key).toBeDefined();
      expect(SETTINGS[name!].flag).toBe(flag);
    }
  });
});

describe('loading', () => {
  it('applies the contract defaults', () => {
    const { settings: s, sources } = load([]);
    expect(s.httpListen).toEqual({ host: '0.0.0.0', port: 4318 });
    expect(s.grpcListen).toEqual({ host: '0.0.0.0', port: 4317 });
    expect(s.maxRequestBytes).toBe(16777216);
    expect(s.workers).toBe(Math.max(1, os.availableParallelism() - 1));
    expect(s.walDir).toBe('./data/wal');
    expect(s.walFsync).toBe('batch');
    expect(s.walFsyncIntervalMs).toBe(100);
    expect(s.walSegmentBytes).toBe(67108864);
    expect(s.tenantClaim).toBeUndefined();
    expect(s.trustTenantHeader).toBe(false);
    expect(s.allowedTenants).toEqual([]);
    expect(s.maxTenants).toBe(0);
    expect(s.maxLanes).toBe(4096);
    expect(s.queueCapacity).toBe(1024);
    expect(s.memBreakerLimitMib).toBe(0);
    expect(s.memBreakerSampleSecs).toBe(1);
    expect(s.rateLimitPerSec).toBe(0);
    expect(s.rateLimitGlobalPerSec).toBe(0);
    expect(s.redisUrl).toBeUndefined();
    expect(s.oidcJwksUrl).toBeUndefined();
    expect(sources.maxTenants).toBe('default');
  });

  it('layers file < env < flag', () => {
    const file = yamlFile('ingester:\n  maxTenants: 5\n  maxLanes: 7\n  workers: 3\n');
    const { settings: s, sources } = load(['--config', file, '--ingest-max-lanes', '9'], {
      SIGLAKE_WORKERS: '2',
      SIGLAKE_INGEST_MAX_LANES: '8',
    });
    expect(s.maxTenants).toBe(5);
    expect(sources.maxTenants).toBe('file');
    expect(s.workers).toBe(2);
    expect(sources.workers).toBe('env');
    expect(s.maxLanes).toBe(9);
    expect(sources.maxLanes).toBe('flag');
  });

  it('reads SIGLAKE_CONFIG, lists as comma strings or YAML lists, booleans in all forms', () => {
    const file = yamlFile('ingester:\n  allowedTenants: [a, b]\n  trustTenantHeader: true\n');
    expect(load([], { SIGLAKE_CONFIG: file }).settings.allowedTenants).toEqual(['a', 'b']);
    expect(load([], { SIGLAKE_CONFIG: file }).settings.trustTenantHeader).toBe(true);
    expect(load(['--allowed-tenants', 'x, y,,z']).settings.allowedTenants).toEqual(['x', 'y', 'z']);
    expect(load(['--trust-tenant-header']).settings.trustTenantHeader).toBe(true);
    expect(load(['--trust-tenant-header=false']).settings.trustTenantHeader).toBe(false);
    expect(load([], { SIGLAKE_TRUST_TENANT_HEADER: 'true' }).settings.trustTenantHeader).toBe(true);
    expect(load(['--max-tenants=3']).settings.maxTenants).toBe(3);
  });

  it('computes defaults from other settings', () => {
    expect(load(['--rate-limit-per-sec', '50']).settings.rateLimitBurst).toBe(50);
    expect(load(['--rate-limit-per-sec', '50', '--rate-limit-burst', '5']).settings.rateLimitBurst).toBe(5);
    // No global bucket unless given its own rate (contract §9); its burst follows its rate.
    const one = load(['--rate-limit-per-sec', '0.5', '--rate-limit-burst', '3']).settings;
    expect([one.rateLimitGlobalPerSec, one.rateLimitGlobalBurst]).toEqual([0, 1]);
    const own = load(['--rate-limit-per-sec', '0.5', '--rate-limit-burst', '3', '--rate-limit-global-per-sec', '100.5']).settings;
    expect([own.rateLimitGlobalPerSec, own.rateLimitGlobalBurst, own.rateLimitBurst]).toEqual([100.5, 101, 3]);
    const both = load(['--rate-limit-per-sec', '1', '--rate-limit-global-per-sec', '1000', '--rate-limit-global-burst', '50']).settings;
    expect([both.rateLimitGlobalPerSec, both.rateLimitGlobalBurst, both.rateLimitBurst]).toEqual([1000, 50, 1]);
    const env = load([], { SIGLAKE_RATE_LIMIT_PER_SEC: '2', SIGLAKE_RATE_LIMIT_GLOBAL_PER_SEC: '20', SIGLAKE_RATE_LIMIT_GLOBAL_BURST: '40' });
    expect([env.settings.rateLimitGlobalPerSec, env.settings.rateLimitGlobalBurst]).toEqual([20, 40]);
    expect(env.sources.rateLimitGlobalPerSec).toBe('env');
    const file = yamlFile('ingester:\n  rateLimit:\n    ratePerSec: 2\n    globalRatePerSec: 30\n    globalBurst: 60\n');
    const yaml = load(['--config', file]).settings;
    expect([yaml.rateLimitGlobalPerSec, yaml.rateLimitGlobalBurst]).toEqual([30, 60]);
    const oidc = load(['--oidc-issuer', 'https://idp.example/', '--tenant-claim', 'org']).settings;
    expect(oidc.oidcJwksUrl).toBe('https://idp.example/.well-known/jwks.json');
    expect(oidc.tenantClaim).toBe('org');
  });

  it('names the setting and the source of a bad value', () => {
    expect(errorOf(() => load(['--max-tenants', '-1']))).toBe(
      'invalid ingester.maxTenants (flag --max-tenants): must not be negative, got -1',
    );
    expect(errorOf(() => load([], { SIGLAKE_WAL_FSYNC: 'sometimes' }))).toBe(
      'invalid ingester.wal.fsync (env SIGLAKE_WAL_FSYNC): must be one of batch, interval, never, got "sometimes"',
    );
    const file = yamlFile('ingester:\n  maxLanes: lots\n');
    expect(errorOf(() => load(['--config', file]))).toBe(
      `invalid ingester.maxLanes (file ${file} key ingester.maxLanes): must be an integer, got "lots"`,
    );
    expect(errorOf(() => load(['--http-listen', 'nope']))).toMatch(/server\.httpListen \(flag --http-listen\): must be host:port/);
    expect(errorOf(() => load(['--workers', '1.5']))).toMatch(/ingester\.workers .*must be an integer/);
  });

  it('refuses unknown keys and flags, unreadable files, and settings that need others', () => {
    expect(errorOf(() => load(['--config', yamlFile('ingester:\n  maxTenant: 1\n')]))).toMatch(/unknown key ingester\.maxTenant/);
    expect(errorOf(() => load(['--max-tenant', '1']))).toMatch(/unknown flag --max-tenant \(did you mean --max-tenants\?\); `--help` lists the flags/);
    expect(errorOf(() => load(['--config', '/nonexistent/siglake.yaml']))).toMatch(/cannot read config file .*ENOENT/);
    expect(errorOf(() => load(['--tenant-claim', 'org']))).toBe(
      'invalid ingester.tenantClaim (flag --tenant-claim): needs OIDC (set auth.oidc.issuer)',
    );
    expect(errorOf(() => load(['--oidc-jwks-file', '/x']))).toMatch(/auth\.oidc\.jwksFile .*needs auth\.oidc\.issuer/);
    // Found by an operator's review (stop 47): an offline command given the serving pods' config
    // file (a drain Job) was refused over an auth file it never reads, where it is not mounted.
    const auth = ['--oidc-issuer', 'https://i', '--oidc-jwks-file', '/nonexistent/jwks.json'];
    expect(errorOf(() => load(auth))).toMatch(/auth\.oidc\.jwksFile .*cannot read/);
    expect(loadSettings({ argv: auth, env: {}, serves: false }).settings.oidcJwksFile).toBe('/nonexistent/jwks.json');
    expect(loadSettings({ argv: ['--auth-bearer-tokens-file', '/nonexistent/t'], env: {}, serves: false }).settings.authBearerTokensFile).toBe('/nonexistent/t');
    // One address for both ports, and a warehouse inside the WAL root (or the other way), are refused.
    expect(errorOf(() => load(['--http-listen', '127.0.0.1:4999', '--grpc-listen', '127.0.0.1:4999']))).toMatch(
      /invalid server\.grpcListen \(flag --grpc-listen\): the same address as server\.httpListen/,
    );
    expect(load(['--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0']).settings.grpcListen.port).toBe(0);
    expect(errorOf(() => load(['--wal-dir', '/d', '--warehouse', '/d']))).toMatch(/invalid warehouse\.path \(flag --warehouse\): \/d overlaps ingester\.walDir/);
    expect(errorOf(() => load(['--wal-dir', '/d/wal', '--warehouse', '/d']))).toMatch(/overlaps ingester\.walDir/);
    expect(errorOf(() => load(['--wal-dir', '/d', '--warehouse', '/d/warehouse']))).toMatch(/overlaps ingester\.walDir/);
    expect(load(['--wal-dir', '/d/wal', '--warehouse', '/d/wal2']).settings.warehousePath).toBe('/d/wal2');
    // A section left empty holds nothing; one that is not a map says so (it read "unknown key server").
    expect(load(['--config', yamlFile('server:\n')]).settings.httpListen.port).toBe(4318);
    expect(errorOf(() => load(['--config', yamlFile('server: 5\n')]))).toMatch(/server must be a map/);
    // The query server's pairs name their source too (before stop 47: the setting alone).
    expect(errorOf(() => load(['--query-tenant-claim', 'tenant']))).toBe(
      'invalid query.oidc.tenantClaim (flag --query-tenant-claim): needs OIDC (set auth.oidc.issuer)',
    );
    expect(errorOf(() => load([], { SIGLAKE_QUERY_ALLOWED_TENANTS: 'acme' }))).toBe(
      'invalid query.allowedTenants (env SIGLAKE_QUERY_ALLOWED_TENANTS): needs query.oidc.tenantClaim (without a claim every query reads main)',
    );
    expect(errorOf(() => load(['--oidc-issuer', 'https://i', '--oidc-algorithms', 'RS256,none']))).toMatch(
      /auth\.oidc\.algorithms .*item 2: must be one of/,
    );
    expect(errorOf(() => load(['--oidc-issuer', 'https://i', '--oidc-algorithms', 'HS256']))).toMatch(/auth\.oidc\.algorithms/);
  });

  it('checks the global rate settings together with ratePerSec', () => {
    expect(errorOf(() => load(['--rate-limit-global-per-sec', '100']))).toBe(
      'invalid ingester.rateLimit.globalRatePerSec (flag --rate-limit-global-per-sec): needs ingester.rateLimit.ratePerSec > 0 (the rate limiter is off while it is 0)',
    );
    expect(errorOf(() => load([], { SIGLAKE_RATE_LIMIT_GLOBAL_PER_SEC: '5' }))).toMatch(
      /^invalid ingester\.rateLimit\.globalRatePerSec \(env SIGLAKE_RATE_LIMIT_GLOBAL_PER_SEC\): needs ingester\.rateLimit\.ratePerSec > 0/,
    );
    // A tenant rate without a global one is the default: no global bucket.
    expect(load(['--rate-limit-per-sec', '10', '--rate-limit-global-per-sec', '0']).settings.rateLimitGlobalPerSec).toBe(0);
    expect(errorOf(() => load(['--rate-limit-per-sec', '10', '--rate-limit-global-per-sec', '1', '--rate-limit-global-burst', '1001']))).toBe(
      'invalid ingester.rateLimit.globalBurst (flag --rate-limit-global-burst): globalBurst / globalRatePerSec must be at most 1000 s, got 1001.0 s',
    );
    expect(errorOf(() => load(['--rate-limit-per-sec', '10', '--rate-limit-global-per-sec', '-1']))).toMatch(
      /^invalid ingester\.rateLimit\.globalRatePerSec \(flag --rate-limit-global-per-sec\): must not be negative/,
    );
    // Explicitly 0 while the limiter is off is consistent, and so is a global burst that stays unused.
    expect(load(['--rate-limit-global-per-sec', '0']).settings.rateLimitGlobalPerSec).toBe(0);
    expect(load(['--rate-limit-per-sec', '1', '--rate-limit-global-per-sec', '1', '--rate-limit-global-burst', '1000']).settings.rateLimitGlobalBurst).toBe(1000);
  });

  it('ignores unknown SIGLAKE_ variables (Kubernetes service links) but not unknown flags', () => {
    expect(load([], { SIGLAKE_PORT_4318_TCP_ADDR: '10.0.0.1', SIGLAKE_SERVICE_HOST: 'x' }).settings.maxLanes).toBe(4096);
  });

  it('never echoes a Redis URL with credentials in an error', () => {
    const msg = errorOf(() => load(['--redis-url', 'http://user:s3cret@host']));
    expect(msg).not.toContain('s3cret');
  });

  it('never echoes a secret setting\'s value, whatever its type or where it stands', () => {
    // A number or a boolean in the file was echoed by "got …"; a word after a token list by
    // "unexpected argument".
    for (const [text, key] of [
      ['auth:\n  bearerTokens: 73519024\n', 'auth.bearerTokens'],
      ['auth:\n  bearerTokens: [true, 73519024]\n', 'auth.bearerTokens'],
      ['redis:\n  url: 73519024\n', 'redis.url'],
      ['query:\n  shardToken: [73519024]\n', 'query.shardToken'],
      ['catalog:\n  url: 73519024\n', 'catalog.url'],
    ] as const) {
      const msg = errorOf(() => load(['--config', yamlFile(text)]));
      expect(msg).toContain(`invalid ${key} (file `);
      expect(msg).not.toMatch(/73519024|true/);
    }
    for (const argv of [
      ['--auth-bearer-tokens', 'a-s3cret', 'b-s3cret'],
      ['--auth-bearer-tokens=a-s3cret', 'b-s3cret'],
      ['--query-shard-token', 'a-s3cret', 'b-s3cret'],
      ['--redis-url', 'redis://:a-s3cret@h', 'b-s3cret'],
    ]) {
      const msg = errorOf(() => load(argv));
      expect(msg).toMatch(/^unexpected argument after the value of --/);
      expect(msg).not.toContain('s3cret');
    }
    // Any other stray word is named.
    expect(errorOf(() => load(['--workers', '2', 'extra']))).toBe('unexpected argument "extra"');
  });

  it('a flag whose value was left out refuses the next flag as its value', () => {
    expect(errorOf(() => load(['--tenant-claim', '--trust-tenant-header']))).toBe(
      'flag --tenant-claim needs a value, got the flag --trust-tenant-header (write --tenant-claim=VALUE for a value that starts with --)',
    );
    expect(errorOf(() => load(['--config', '--workers=2']))).toMatch(/^flag --config needs a file, got the flag --workers /);
    // A value that starts with -- is still possible, written with =; a negative number is a value.
    expect(load(['--wal-dir=--odd', '--warehouse', '/w']).settings.walDir).toBe('--odd');
    expect(errorOf(() => load(['--max-tenants', '-1']))).toMatch(/must not be negative/);
  });

  it('an empty --config or SIGLAKE_CONFIG is refused naming it, and an unreadable file names its source', () => {
    expect(errorOf(() => load(['--config=']))).toBe('flag --config is empty: name a YAML file, or leave it unset');
    expect(errorOf(() => load([], { SIGLAKE_CONFIG: '' }))).toBe('env SIGLAKE_CONFIG is empty: name a YAML file, or leave it unset');
    expect(errorOf(() => load([], { SIGLAKE_CONFIG: '/nonexistent/s.yaml' }))).toBe('cannot read config file /nonexistent/s.yaml (env SIGLAKE_CONFIG): ENOENT');
    expect(errorOf(() => load(['--config', os.tmpdir()]))).toMatch(/^cannot read config file .* \(flag --config\): EISDIR$/);
  });

  it('a YAML number keeps its text for a string setting, and is a number for a number setting', () => {
    // `catalog.name: 1.10` was read as "1.1", `walDir: 010` as "10", a token 0123 as "123".
    const file = yamlFile(
      'catalog:\n  name: 1.10\ningester:\n  walDir: 010\n  workers: 0x2\n  allowedTenants: [007, 1e3]\nquery:\n  shardToken: 0123\n  maxRows: 1e3\n',
    );
    const s = load(['--config', file]).settings;
    expect([s.catalogName, s.walDir, s.queryShardToken, s.allowedTenants]).toEqual(['1.10', '010', '0123', ['007', '1e3']]);
    expect([s.workers, s.queryMaxRows]).toEqual([2, 1000]);
    // Refusals quote the number as written.
    expect(errorOf(() => load(['--config', yamlFile('ingester:\n  workers: 99999999999999999999\n')]))).toMatch(
      /must be an integer, got 99999999999999999999$/,
    );
    expect(errorOf(() => load(['--config', yamlFile('ingester:\n  workers: 1.50\n')]))).toMatch(/must be an integer, got 1\.50$/);
    expect(errorOf(() => load(['--config', yamlFile('ingester:\n  memBreaker:\n    sampleSecs: .inf\n')]))).toMatch(/finite number, got \.inf$/);
    expect(errorOf(() => load(['--config', yamlFile('server: 5\n')]))).toMatch(/server must be a map/);
  });

  it('a key given twice in a file, once as a dotted key, is refused', () => {
    expect(errorOf(() => load(['--config', yamlFile('ingester.workers: 2\ningester:\n  workers: 3\n')]))).toMatch(
      /: key ingester\.workers is given twice$/,
    );
    expect(errorOf(() => load(['--config', yamlFile('ingester.wal:\n  fsync: never\ningester:\n  wal:\n    fsync: batch\n')]))).toMatch(
      /key ingester\.wal\.fsync is given twice/,
    );
  });

  it('refuses listeners that would take one port: equal, wildcard or localhost', () => {
    const both = (http: string, grpc: string) => () => load(['--http-listen', http, '--grpc-listen', grpc]);
    for (const [http, grpc] of [
      ['0.0.0.0:4999', '127.0.0.1:4999'],
      ['127.0.0.1:4999', '0.0.0.0:4999'],
      [':4999', '10.1.2.3:4999'],
      ['[::]:4999', '0.0.0.0:4999'],
      ['[::]:4999', '[::1]:4999'],
      ['[0:0::0]:4999', '127.0.0.1:4999'],
      ['localhost:4999', '127.0.0.1:4999'],
      ['localhost:4999', '[::1]:4999'],
      ['0.0.0.0:4999', 'localhost:4999'],
    ]) {
      expect(errorOf(both(http!, grpc!))).toMatch(/^invalid server\.grpcListen \(flag --grpc-listen\): an address that overlaps server\.httpListen \(flag --http-listen\): .*; OTLP\/HTTP and OTLP\/gRPC need a port each$/);
    }
    for (const [http, grpc] of [
      ['[::ffff:127.0.0.1]:4999', '127.0.0.1:4999'],
      ['LocalHost:4999', 'localhost:4999'],
      ['[::1]:4999', '[0:0:0:0:0:0:0:1]:4999'],
    ]) {
      expect(errorOf(both(http!, grpc!))).toMatch(/the same address as server\.httpListen/);
    }
    // Addresses that can share a port, and port 0 (the OS picks two), pass.
    for (const [http, grpc] of [
      ['127.0.0.1:4999', '127.0.0.2:4999'],
      ['0.0.0.0:4999', '[::1]:4999'],
      ['[::]:0', '0.0.0.0:0'],
      ['0.0.0.0:4999', '0.0.0.0:4998'],
    ]) {
      expect(() => both(http!, grpc!)()).not.toThrow();
    }
    // The default gRPC address (0.0.0.0:4317) takes 4317 on 127.0.0.1 too.
    expect(errorOf(() => load(['--metrics-listen', '127.0.0.1:4317']))).toMatch(
      /^invalid server\.metricsListen \(flag --metrics-listen\): an address that overlaps server\.grpcListen \(default of server\.grpcListen\)/,
    );
    expect(errorOf(() => load([], { SIGLAKE_METRICS_LISTEN: 'localhost:4318', SIGLAKE_HTTP_LISTEN: '127.0.0.1:4318' }))).toMatch(
      /^invalid server\.metricsListen \(env SIGLAKE_METRICS_LISTEN\): an address that overlaps server\.httpListen \(env SIGLAKE_HTTP_LISTEN\)/,
    );
  });

  it('a shard token is one header value, given once', () => {
    for (const bad of ['tok ', ' tok', 'to\nk', 'tök\u0001']) {
      const msg = errorOf(() => load(['--query-shard-token', bad]));
      expect(msg).toMatch(/^invalid query\.shardToken \(flag --query-shard-token\): must be printable ASCII/);
    }
    expect(load(['--query-shard-token', 'a b~c']).settings.queryShardToken).toBe('a b~c');
    expect(errorOf(() => load(['--query-shard-token', 't', '--query-shard-token-file', '/f']))).toBe(
      'invalid query.shardTokenFile (flag --query-shard-token-file): query.shardToken is set too (flag --query-shard-token); set one of them',
    );
  });
});

describe('the configuration reference', () => {
  it('lists every setting with its flag, env var, YAML key and default', () => {
    const ref = configReference();
    for (const n of settingNames()) {
      const d = SETTINGS[n];
      expect(ref).toContain(`| \`${d.key}\` | \`${d.flag}\` | \`${envName(d.flag)}\` |`);
    }
  });

  it('is what docs/configuration.md holds (run npm run docs:config after changing settings)', () => {
    const doc = fs.readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    expect(doc).toBe(configReference());
  });
});
