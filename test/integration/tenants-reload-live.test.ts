// Reloading the tenants file while the real `siglake ingest` serves
// (declared-tenants.md §1; docs/tenants.md "Reload"):
//
//   - a reload parses the file off the event loop: requests are answered
//     while a large file is parsed (parsed in place, a 4,000-tenant YAML file
//     held every request, /readyz included, for the whole parse)
//   - a change made while the ingester starts, after it loaded the file and
//     before it watches it, is applied once it is up (it was never applied:
//     its change event came before the watch, and the next one for the same
//     text was taken for content already tried)
//   - a SIGHUP (logrotate's for the audit file, or any reload) gives back no
//     token of a tenant's bucket
//   - a burst the bucket cannot represent is the file's refusal, naming the
//     setting, the file and the tenant
//   - a tenant removed and re-added (a reverted edit, a half-written file read
//     by one reload and whole by the next) gets no fresh burst and no fresh
//     day's budget: it takes back what its bucket held, at most its new
//     burst, and its budget's counters (each remove + re-add was a whole
//     fresh burst, and a whole fresh budget), and no second
//     `tenant_first_admission` audit event (once per tenant per process: it
//     got one at each re-add), and no second `lane_first_admission` for a
//     lane it stored on before the removal (its lanes stay; one it opens
//     after the re-add gets its first)

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, until } from '../helpers/wait.js';
import { followIngester, runCli, startIngester, tempDir, CLI, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { Client } from '../helpers/tenancy-client.js';
import { auditEvents } from '../helpers/audit-events.js';
import { ManualUpload } from '../helpers/http.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { spawn } from 'node:child_process';

const oidcArgs = (jwks: string): string[] => ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks];

let key: KeyPair;
let dir: string;
let jwks: string;

beforeAll(async () => {
  key = await makeKeyPair('ES256', 'k-reload-live');
  dir = tempDir('siglake-tenants-reload-');
  jwks = writeJwksFile(dir, [key.jwk]);
});

/** Writes `text` to `file` as a careful operator (or the kubelet) does: a new file renamed into place. */
function writeAtomically(file: string, text: string): void {
  fs.writeFileSync(`${file}.tmp`, text);
  fs.renameSync(`${file}.tmp`, file);
}

function manyTenants(n: number): string {
  let s = 'tenants:\n';
  for (let i = 0; i < n; i++) {
    s += `  - id: t${i}\n    subjects: { claims: { org_id: org-${i} } }\n    rateLimit: { requestsPerSec: ${10 + (i % 7)}, burst: 20 }\n    budget: { period: day, records: 1000000 }\n`;
  }
  return s;
}

describe('a reload while the ingester serves', () => {
  let ing: RunningIngester;
  let c: Client;
  const file = (): string => path.join(dir, 'live.yaml');
  beforeAll(async () => {
    fs.writeFileSync(file(), 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 0.01, burst: 3 }\n');
    ing = await startIngester({ args: [...oidcArgs(jwks), '--tenants-file', file()] });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it("a SIGHUP gives back no token of a tenant's bucket", async () => {
    const acme = { authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'acme-1' })}` };
    for (let i = 0; i < 3; i++) expect((await c.send('http', 'logs', `a${i}`, acme)).status).toBe(200);
    expect((await c.send('http', 'logs', 'a3', acme)).status).toBe(429);
    // logrotate's postrotate (the audit file) and an unchanged file alike: every reload refilled every bucket.
    for (let i = 0; i < 3; i++) {
      const n = ing.logs.length;
      ing.child.kill('SIGHUP');
      await until(() => ing.logs.slice(n).some((l) => l.msg === 'tenants file reloaded'), 10_000, 'the SIGHUP reload');
    }
    expect((await c.send('http', 'logs', 'a4', acme)).status).toBe(429);
    expect((await c.send('grpc', 'logs', 'a5', acme)).code).not.toBe(0);
  });

  it('parses the file off the event loop: requests are answered while a large file is parsed', async () => {
    const readyz = async (): Promise<number> => (await fetch(`${ing.url}/readyz`)).status;
    const n = ing.logs.length;
    writeAtomically(file(), manyTenants(4000));
    ing.child.kill('SIGHUP');
    const sent = Date.now();
    // Answers that arrive before the reload is reported done were served while the file was parsed.
    let during = 0;
    let reloaded = false;
    while (!reloaded && Date.now() - sent < 60_000) {
      expect(await readyz()).toBe(200);
      reloaded = ing.logs.slice(n).some((l) => l.msg === 'tenants file reloaded' && l['tenants'] === 4000);
      if (!reloaded) during++;
    }
    expect(reloaded).toBe(true);
    console.log(`[tenants-reload-live] 4,000-tenant reload: ${Date.now() - sent} ms, ${during} /readyz answers meanwhile`);
    // Parsed in place, the reload held the event loop: no answer came until it was done.
    expect(during).toBeGreaterThanOrEqual(3);
    expect(await ing.metric('siglake_tenants_declared')).toBe(4000);
    expect(await ing.metric('siglake_tenants_reload_failures_total')).toBe(0);
  }, 90_000);
});

describe('a tenant removed by a reload and re-added by the next', () => {
  let ing: RunningIngester;
  let c: Client;
  const file = (): string => path.join(dir, 'readd.yaml');
  const audit = (): string => path.join(dir, 'readd-audit.log');
  const other = '  - id: other\n    subjects: { claims: { org_id: other } }\n';
  const acme = '  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 0.01, burst: 3 }\n';
  const beta = (burst: number): string => `  - id: beta\n    subjects: { claims: { org_id: beta } }\n    rateLimit: { requestsPerSec: 0.01, burst: ${burst} }\n`;
  const gamma = '  - id: gamma\n    subjects: { claims: { org_id: gamma } }\n    budget: { period: day, records: 2 }\n';
  const as = async (org: string): Promise<Record<string, string>> => ({ authorization: `Bearer ${await mint(key, { org_id: org }, { sub: `${org}-1` })}` });

  /** Writes the file with `tenants`, sends SIGHUP, and waits for the reload that put them in force. */
  async function reloadWith(...tenants: string[]): Promise<void> {
    const n = ing.logs.length;
    writeAtomically(file(), `tenants:\n${tenants.join('')}`);
    ing.child.kill('SIGHUP');
    await until(() => ing.logs.slice(n).some((l) => l.msg === 'tenants file reloaded' && l['tenants'] === tenants.length), 10_000, `the reload to ${tenants.length} tenants`);
  }

  beforeAll(async () => {
    fs.writeFileSync(file(), `tenants:\n${other}`);
    ing = await startIngester({ args: [...oidcArgs(jwks), '--tenants-file', file(), '--audit-file', audit()] });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('gets no fresh burst: a tenant that spent its bucket is still refused once back', async () => {
    await reloadWith(other, acme);
    const h = await as('acme');
    for (let i = 0; i < 3; i++) expect((await c.send('http', 'logs', `a${i}`, h)).status).toBe(200);
    const spent = await c.send('http', 'logs', 'a3', h);
    expect([spent.status, spent.errorCode]).toEqual([429, 'SIGLAKE_RATE_LIMITED']);
    await reloadWith(other);
    await reloadWith(other, acme);
    const back = await c.send('http', 'logs', 'a4', h);
    expect([back.status, back.errorCode]).toEqual([429, 'SIGLAKE_RATE_LIMITED']);
    expect((await c.send('grpc', 'logs', 'a5', h)).code).not.toBe(0);
  });

  it('re-added with a larger burst, it holds what it held: the 2 tokens it left, not 5', async () => {
    await reloadWith(other, beta(3));
    const h = await as('beta');
    expect((await c.send('http', 'logs', 'b0', h)).status).toBe(200);
    await reloadWith(other);
    await reloadWith(other, beta(5));
    for (let i = 1; i <= 2; i++) expect((await c.send('http', 'logs', `b${i}`, h)).status).toBe(200);
    const past = await c.send('http', 'logs', 'b3', h);
    expect([past.status, past.errorCode]).toEqual([429, 'SIGLAKE_RATE_LIMITED']);
  });

  it("gets no fresh budget: a tenant that spent its day's budget is still refused once back", async () => {
    await reloadWith(other, gamma);
    const h = await as('gamma');
    for (let i = 0; i < 2; i++) expect((await c.send('http', 'logs', `g${i}`, h)).status).toBe(200);
    const spent = await c.send('http', 'logs', 'g2', h);
    expect([spent.status, spent.errorCode]).toEqual([429, 'SIGLAKE_BUDGET_EXHAUSTED']);
    await reloadWith(other);
    await reloadWith(other, gamma);
    const back = await c.send('http', 'logs', 'g3', h);
    expect([back.status, back.errorCode]).toEqual([429, 'SIGLAKE_BUDGET_EXHAUSTED']);
    expect(await ing.metric('siglake_tenant_budget_remaining{tenant="gamma",unit="records"}')).toBe(0);
  });

  it('is audited once: no second tenant_first_admission when it is back', async () => {
    const delta = '  - id: delta\n    subjects: { claims: { org_id: delta } }\n';
    const epsilon = '  - id: epsilon\n    subjects: { claims: { org_id: epsilon } }\n';
    const firsts = (tenant: string) => auditEvents(audit()).filter((e) => e['event'] === 'tenant_first_admission' && e['tenant'] === tenant);
    await reloadWith(other, delta);
    const h = await as('delta');
    expect((await c.send('http', 'logs', 'd0', h)).status).toBe(200);
    await until(() => firsts('delta').length === 1, 10_000, "delta's first admission in the audit file");
    await reloadWith(other);
    await reloadWith(other, delta, epsilon);
    expect((await c.send('http', 'logs', 'd1', h)).status).toBe(200);
    // epsilon's first admission, audited after delta's stored request: once it is in the file, so would be delta's second.
    expect((await c.send('http', 'logs', 'e0', await as('epsilon'))).status).toBe(200);
    await until(() => firsts('epsilon').length === 1, 10_000, "epsilon's first admission in the audit file");
    expect(firsts('delta')).toHaveLength(1);
  });

  it('is charged for its first request, admitted before the removal and stored after it: a budget that had counted nothing yet', async () => {
    const theta = '  - id: theta\n    subjects: { claims: { org_id: theta } }\n    budget: { period: day, records: 5 }\n';
    const remaining = () => ing.metric('siglake_tenant_budget_remaining{tenant="theta",unit="records"}');
    await reloadWith(other, theta);
    expect(await remaining()).toBe(5);
    const body = logsProto(['th0']);
    const up = new ManualUpload(ing.httpPort, '/v1/logs', body.length, { authorization: (await as('theta'))['authorization']! });
    await up.connected;
    up.socket.write(body.subarray(0, 1));
    // Admitted (its bytes reserved, then its tenant resolved and its budget looked at, in one turn): in flight.
    await until(async () => (await ing.metric('siglake_ingest_inflight_bytes')) === body.length, 10_000, "theta's request admitted");
    await reloadWith(other);
    up.socket.write(body.subarray(1));
    expect((await up.response).status).toBe(200);
    up.socket.destroy();
    await reloadWith(other, theta);
    // The stored record is charged to the budget theta takes back (it was charged to nothing: a budget
    // that had counted nothing was not remembered at the removal, so the charge found none).
    expect(await remaining()).toBe(4);
  });

  it('keeps its lanes: no second lane_first_admission for a lane that stored before the removal, one for a lane new after it', async () => {
    const zeta = '  - id: zeta\n    subjects: { claims: { org_id: zeta } }\n';
    const eta = '  - id: eta\n    subjects: { claims: { org_id: eta } }\n';
    const lanes = (tenant: string, signal: string) =>
      auditEvents(audit()).filter((e) => e['event'] === 'lane_first_admission' && e['tenant'] === tenant && e['signal'] === signal);
    await reloadWith(other, zeta);
    const h = await as('zeta');
    expect((await c.send('http', 'logs', 'z0', h)).status).toBe(200);
    await until(() => lanes('zeta', 'logs').length === 1, 10_000, "zeta's logs lane's first admission in the audit file");
    expect(lanes('zeta', 'logs')[0]).toMatchObject({ subject: 'zeta-1', index: null });
    await reloadWith(other);
    await reloadWith(other, zeta, eta);
    expect((await c.send('http', 'logs', 'z1', h)).status).toBe(200);
    expect((await c.send('grpc', 'logs', 'z2', h)).code).toBe(0);
    // A lane it never stored on before: its first admission, once.
    expect((await c.send('http', 'traces', 'z3', h)).status).toBe(200);
    expect((await c.send('grpc', 'traces', 'z4', h)).code).toBe(0);
    // eta's first admission, audited after zeta's stored requests: once it is in the file, so would be a second one of zeta's.
    expect((await c.send('http', 'logs', 'e0', await as('eta'))).status).toBe(200);
    await until(() => lanes('eta', 'logs').length === 1, 10_000, "eta's logs lane's first admission in the audit file");
    expect(lanes('zeta', 'logs')).toHaveLength(1);
    expect(lanes('zeta', 'traces')).toHaveLength(1);
    expect(lanes('zeta', 'traces')[0]).toMatchObject({ subject: 'zeta-1', index: null });
  });
});

describe('a change while the ingester starts', () => {
  it('made after the file was loaded and before it is watched, is applied once the ingester is up', async () => {
    const file = path.join(dir, 'starting.yaml');
    const one = 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 10 }\n';
    fs.writeFileSync(file, one);
    // An unreachable Redis holds start-up (bounded waits for the shared buckets) between the load and the watch.
    const dataDir = tempDir('siglake-tenants-starting-');
    const child = spawn(
      process.execPath,
      [CLI, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dataDir, 'wal'), '--workers', '1', '--tenants-file', file, '--redis-url', 'redis://127.0.0.1:1'],
      { cwd: dataDir, env: { ...process.env, SIGLAKE_TEST_HOOKS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const ingP = followIngester(child, dataDir, 'ready', 30_000);
    // 'native code' is logged as the ingester is built, just before it loads the file.
    let seen = '';
    child.stdout!.on('data', (d: Buffer) => (seen += d.toString()));
    await until(() => seen.includes('"native code"'), 20_000, 'the ingester to start');
    await sleep(300);
    writeAtomically(file, `${one}  - id: beta\n    subjects: { claims: { org_id: beta } }\n`);
    const ing = await ingP;
    try {
      // Not listening yet when the file changed: the change came before the watch.
      const listening = ing.logs.findIndex((l) => l.msg === 'listening');
      expect(listening).toBeGreaterThanOrEqual(0);
      await until(async () => (await ing.metric('siglake_tenants_declared')) === 2, 10_000, 'the change made during start-up to be in force');
      expect(ing.logs.some((l) => l.msg === 'tenants file reloaded')).toBe(true);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  }, 60_000);
});

describe('a burst the bucket cannot represent', () => {
  it('is the file\'s refusal: exit 2 at start-up naming the setting, the file and the tenant; a reload keeps the old set', async () => {
    const file = path.join(dir, 'burst.yaml');
    const bad = 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 1000000, burst: 4000000 }\n';
    fs.writeFileSync(file, bad);
    const r = runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'w-burst'), '--tenants-file', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      `siglake: invalid tenants.file (flag --tenants-file): ${file}: tenant "acme" rateLimit.burst: burst 4000000 is too large for ratePerSec 1000000: the refill period cannot be represented within 0.1 % (lower burst or rate)\n`,
    );
    fs.writeFileSync(file, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n');
    const ing = await startIngester({ args: ['--tenants-file', file] });
    try {
      writeAtomically(file, bad);
      await until(async () => (await ing.metric('siglake_tenants_reload_failures_total')) === 1, 10_000, 'the reload to be refused');
      const line = ing.logs.find((l) => l.msg === 'tenants file reload refused: the previous set stays in force');
      expect(line?.['err']).toBe(`tenants.file ${file}: tenant "acme" rateLimit.burst: burst 4000000 is too large for ratePerSec 1000000: the refill period cannot be represented within 0.1 % (lower burst or rate)`);
      expect(await ing.metric('siglake_tenants_declared')).toBe(1);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  }, 60_000);
});
