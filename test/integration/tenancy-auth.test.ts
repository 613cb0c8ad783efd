// The tenancy boundary with authentication (issue 3; contract §2, §4, §5, §6,
// §8; reliability "bad tokens" and "tenant isolation" rows), against the real
// `siglake ingest` process, over OTLP/HTTP and OTLP/gRPC for every rule:
//
//   - claim mode with OIDC (RSA and EC keys made here; the JWKS read from a
//     file by one ingester, fetched from a local HTTP server by another):
//     claim → tenant; 403 claim_missing / claim_invalid / header_mismatch;
//     the claim wins over --trust-tenant-header; tenant A cannot write as B
//   - bad tokens → 401, never admitted, never echoed; an unknown kid refetches
//     the JWKS at most once per cooldown; a JWKS outage is a 503, not a 401
//   - static bearer tokens (flag and file)
//   - `--tenant-claim` without OIDC stops start-up with exit code 2
//
// No response message and no line the process writes may contain a token.

import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, grpc, rawGrpcCall } from '../helpers/grpc-client.js';
import { sleep } from '../helpers/wait.js';
import { runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import {
  AUDIENCE,
  ISSUER,
  JwksServer,
  makeKeyPair,
  mint,
  mintAlgNone,
  mintHs256WithPublicKey,
  nowSecs,
  secretParts,
  writeJwksFile,
  type KeyPair,
} from '../helpers/jwt.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import {
  Client,
  TRANSPORTS,
  delta,
  expectAccepted as expectAcceptedBy,
  expectCode,
  expectRefused as expectRefusedBy,
  only,
  textsUnder,
  topDirs,
  walBytes,
  type Reason,
  type Reply,
  type Signal,
  type Transport,
} from '../helpers/tenancy-client.js';

// ------------------------------------------------------------------ helpers

/** Request headers: `token` becomes `Authorization: Bearer <token>`; `authorization` overrides it verbatim. */
interface Creds {
  token?: string;
  authorization?: string;
  orgId?: string;
}

function headersOf(c: Creds): Record<string, string> {
  const h: Record<string, string> = {};
  if (c.authorization !== undefined) h['authorization'] = c.authorization;
  else if (c.token !== undefined) h['authorization'] = `Bearer ${c.token}`;
  if (c.orgId !== undefined) h['x-scope-orgid'] = c.orgId;
  return h;
}

function expectNoSecret(text: string, token: string | undefined): void {
  if (token === undefined) return;
  for (const s of secretParts(token)) expect(text.includes(s), 'a token (or part of one) is echoed').toBe(false);
}

interface Expect {
  status: number;
  /** The 403's reason label (its counter must rise by exactly 1). */
  reason?: Reason;
  /** The 401's reason (ErrorInfo metadata `reason`). */
  says?: string;
}

/** One request that must be refused: status/code, message, exactly the right counter, no token echoed. */
function expectRefused(c: Client, t: Transport, signal: Signal, text: string, creds: Creds, want: Expect): Promise<Reply> {
  return expectRefusedBy(c, () => c.send(t, signal, text, headersOf(creds)), want.status, want.reason, (r) => {
    if (want.says !== undefined) expectCode(r, 'SIGLAKE_UNAUTHENTICATED', want.says);
    expectNoSecret(r.message, creds.token);
    expectNoSecret(r.message, creds.authorization);
  });
}

function expectAccepted(c: Client, t: Transport, signal: Signal, text: string, creds: Creds): Promise<void> {
  return expectAcceptedBy(c, () => c.send(t, signal, text, headersOf(creds)));
}

/** Nothing the process logged (stdout JSON lines, stderr) contains any part of any of `tokens`. */
async function expectLogsFreeOf(ing: RunningIngester, tokens: Iterable<string>): Promise<void> {
  await sleep(200); // let the last lines through the pipes
  expect(ing.logs.length).toBeGreaterThan(0);
  const streams: Array<[string, string[]]> = [
    ['stdout', ing.logs.map((l) => JSON.stringify(l))],
    ['stderr', ing.stderr.split('\n')],
  ];
  const leaks: string[] = [];
  for (const t of tokens) {
    const parts = secretParts(t);
    for (const [name, lines] of streams) {
      const hit = lines.find((line) => parts.some((p) => line.includes(p)));
      if (hit !== undefined) leaks.push(`${name}: ${hit.slice(0, 160)}`);
    }
  }
  expect(leaks, 'token text reached the process logs').toEqual([]);
}

// ------------------------------------------------------------------ keys

let rsa: KeyPair;
let ec: KeyPair;
/** Not in any JWKS: forges "bad signature" (with a known kid) and "unknown key" tokens. */
let stranger: KeyPair;

beforeAll(async () => {
  [rsa, ec, stranger] = await Promise.all([
    makeKeyPair('RS256', 'rsa-1'),
    makeKeyPair('ES256', 'ec-1'),
    makeKeyPair('RS256', 'rsa-1'),
  ]);
});

const oidcArgs = (source: string[]): string[] => ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, ...source];

// ------------------------------------------------------------------ claim mode

interface ClaimSetup {
  name: string;
  start(): Promise<{ ing: RunningIngester; cleanup(): Promise<void> }>;
  /** Whether --trust-tenant-header is also set (the claim must still win). */
  trustHeaderToo: boolean;
}

const CLAIM = 'org_id';

const CLAIM_SETUPS: ClaimSetup[] = [
  {
    name: 'JWKS from a file, --trust-tenant-header also set',
    trustHeaderToo: true,
    async start() {
      const dir = tempDir('siglake-jwks-');
      const file = writeJwksFile(dir, [rsa.jwk, ec.jwk]);
      const ing = await startIngester({
        args: [...oidcArgs(['--oidc-jwks-file', file]), '--tenant-claim', CLAIM, '--trust-tenant-header'],
      });
      return { ing, cleanup: async () => {} };
    },
  },
  {
    name: 'JWKS from a local HTTP server',
    trustHeaderToo: false,
    async start() {
      const jwks = await JwksServer.start([rsa.jwk, ec.jwk]);
      const ing = await startIngester({ args: [...oidcArgs(['--oidc-jwks-url', jwks.url]), '--tenant-claim', CLAIM] });
      return { ing, cleanup: () => jwks.close() };
    },
  },
];

/** Claim values that are present but unusable: 403 claim_invalid, never sanitised, never defaulted. */
const INVALID_CLAIMS: Array<[string, unknown]> = [
  ['a number', 42],
  ['an array', ['acme']],
  ['an object', { id: 'acme' }],
  ['a boolean', true],
  ['null', null],
  ['an empty string', ''],
  ['a space', 'acme prod'],
  ['a slash', 'a/b'],
  ['../x', '../x'],
  ['129 characters', 'c'.repeat(129)],
  ['reserved logs', 'logs'],
  ['reserved Traces', 'Traces'],
  ['reserved INDEXES', 'INDEXES'],
  ['reserved lost+found', 'lost+found'],
  ['a Cyrillic look-alike', '\u0430cme'],
];

for (const setup of CLAIM_SETUPS) {
  describe(`claim mode (--tenant-claim ${CLAIM}), ${setup.name}`, () => {
    let ing: RunningIngester;
    let c: Client;
    let cleanup: () => Promise<void> = async () => {};
    const used = new Set<string>();
    const stored: Record<string, string[]> = { acme: [], globex: [] };
    let acmeRsa: string;
    let acmeEc: string;
    let globexEc: string;
    let noClaim: string;
    const invalid = new Map<string, string>();

    const tok = async (key: KeyPair, claims: Record<string, unknown>): Promise<string> => {
      const t = await mint(key, claims);
      used.add(t);
      return t;
    };

    beforeAll(async () => {
      ({ ing, cleanup } = await setup.start());
      c = new Client(ing);
      acmeRsa = await tok(rsa, { [CLAIM]: 'acme' });
      acmeEc = await tok(ec, { [CLAIM]: 'acme' });
      globexEc = await tok(ec, { [CLAIM]: 'globex' });
      noClaim = await tok(rsa, { tenant: 'acme', org: { id: 'acme' } });
      for (const [what, value] of INVALID_CLAIMS) invalid.set(what, await tok(what.length % 2 ? rsa : ec, { [CLAIM]: value }));
    });
    afterAll(async () => {
      c?.close();
      if (ing) expect(await ing.stop()).toBe(0);
      await cleanup();
    });

    for (const t of TRANSPORTS) {
      it(`${t}: the claim names the tenant (RSA and EC tokens) → <wal>/<claim>/`, async () => {
        await expectAccepted(c, t, 'logs', `acme-rsa-${t}`, { token: acmeRsa });
        await expectAccepted(c, t, 'traces', `acme-ec-span-${t}`, { token: acmeEc });
        await expectAccepted(c, t, 'logs', `globex-ec-${t}`, { token: globexEc });
        stored['acme']!.push(`acme-rsa-${t}`, `acme-ec-span-${t}`);
        stored['globex']!.push(`globex-ec-${t}`);
        for (const lane of ['acme/logs', 'acme/traces', 'globex/logs']) expect(fs.existsSync(path.join(ing.walDir, lane)), lane).toBe(true);
      });

      it(`${t}: X-Scope-OrgID equal to the claim → 200`, async () => {
        await expectAccepted(c, t, 'logs', `acme-hdr-${t}`, { token: acmeRsa, orgId: 'acme' });
        stored['acme']!.push(`acme-hdr-${t}`);
      });

      it(`${t}: no such claim → 403 claim_missing`, async () => {
        await expectRefused(c, t, 'logs', `noclaim-${t}`, { token: noClaim }, { status: 403, reason: 'claim_missing' });
        await expectRefused(c, t, 'logs', `noclaim-hdr-${t}`, { token: noClaim, orgId: 'acme' }, { status: 403, reason: 'claim_missing' });
      });

      it(`${t}: a claim that is not a usable identifier → 403 claim_invalid (each kind)`, async () => {
        for (const [what] of INVALID_CLAIMS) {
          const r = await expectRefused(c, t, 'logs', `invalid-${t}`, { token: invalid.get(what)! }, { status: 403, reason: 'claim_invalid' });
          expect(r.message, what).toContain('claim_invalid');
        }
      });

      it(`${t}: tenant A's token with X-Scope-OrgID naming B (or a variant of A) → 403 header_mismatch`, async () => {
        for (const other of ['globex', 'ACME', 'default', 'acme-2']) {
          await expectRefused(c, t, 'logs', `mismatch-${other}-${t}`, { token: acmeRsa, orgId: other }, { status: 403, reason: 'header_mismatch' });
        }
        await expectRefused(c, t, 'traces', `mismatch-span-${t}`, { token: globexEc, orgId: 'acme' }, { status: 403, reason: 'header_mismatch' });
      });
    }

    if (setup.trustHeaderToo) {
      for (const t of TRANSPORTS) {
        it(`${t}: the claim wins over --trust-tenant-header: no header → the claim's tenant, a header naming another → header_mismatch`, async () => {
          const globexBefore = walBytes(path.join(ing.walDir, 'globex'));
          await expectAccepted(c, t, 'traces', `claim-wins-${t}`, { token: acmeEc });
          stored['acme']!.push(`claim-wins-${t}`);
          expect(fs.existsSync(path.join(ing.walDir, 'logs')), 'never routed to default').toBe(false);
          await expectRefused(c, t, 'traces', `claim-wins-hdr-${t}`, { token: acmeEc, orgId: 'globex' }, { status: 403, reason: 'header_mismatch' });
          expect(walBytes(path.join(ing.walDir, 'globex')), 'bytes under globex').toBe(globexBefore);
        });
      }
    }

    it('isolation: each tenant\'s records are in its own directory only; nothing under default or a refused name', async () => {
      expect(topDirs(ing.walDir)).toEqual(['acme', 'globex']);
      expect(textsUnder(path.join(ing.walDir, 'acme'))).toEqual([...stored['acme']!].sort());
      expect(textsUnder(path.join(ing.walDir, 'globex'))).toEqual([...stored['globex']!].sort());
      const d = await c.denials();
      expect(d).toEqual({
        ...only(undefined),
        claim_missing: 4,
        claim_invalid: 2 * INVALID_CLAIMS.length,
        header_mismatch: setup.trustHeaderToo ? 12 : 10,
      });
      expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(2);
    });

    it('no token text in the process logs', async () => {
      await expectLogsFreeOf(ing, used);
    });
  });
}

// ------------------------------------------------------------------ bad tokens

describe('bad tokens → 401 (JWKS from a local HTTP server, --oidc-jwks-cooldown-secs 1, claim mode)', () => {
  let ing: RunningIngester;
  let c: Client;
  let jwks: JwksServer;
  const fetchTimes: number[] = [];
  const used = new Set<string>();
  const accepted: string[] = [];
  const bad: Array<[string, Creds, string]> = [];
  let good: string;
  let unknownSeq = 0;

  beforeAll(async () => {
    jwks = await JwksServer.start([rsa.jwk, ec.jwk]);
    jwks.server.on('request', (req) => {
      if (req.url === '/.well-known/jwks.json') fetchTimes.push(Date.now());
    });
    ing = await startIngester({
      args: [...oidcArgs(['--oidc-jwks-url', jwks.url, '--oidc-jwks-cooldown-secs', '1']), '--tenant-claim', CLAIM],
    });
    c = new Client(ing);
    const now = nowSecs();
    const claims = { [CLAIM]: 'acme' };
    good = await mint(rsa, claims);
    const tokens: Array<[string, string, string]> = [
      ['alg none', mintAlgNone(claims, rsa.kid), 'algorithm not allowed'],
      ['HS256 signed with the RSA public key', await mintHs256WithPublicKey(rsa, claims), 'algorithm not allowed'],
      ['expired', await mint(rsa, claims, { exp: now - 3600 }), 'expired'],
      ['not yet valid', await mint(ec, claims, { nbf: now + 3600 }), 'not yet valid'],
      ['wrong iss', await mint(rsa, claims, { iss: 'https://evil.example.test' }), 'wrong issuer'],
      ['wrong aud', await mint(ec, claims, { aud: 'another-service' }), 'wrong audience'],
      ['signed by another key under a known kid', await mint(stranger, claims), 'bad signature'],
      ['oversized (20 KiB, validly signed)', await mint(rsa, { ...claims, pad: 'p'.repeat(20 * 1024) }), 'too large'],
      ['a garbage string', 'garbage-token-Zq9wXv3Lm', 'malformed'],
      ['three dots of garbage', 'aaaaaaaaaa.bbbbbbbbbb.cccccccccc', 'malformed'],
    ];
    for (const [what, token, says] of tokens) {
      used.add(token);
      bad.push([what, { token }, says]);
    }
    used.add(good);
    bad.push(['no Authorization header', {}, 'missing credentials']);
    bad.push(['Basic scheme', { authorization: 'Basic dXNlcjpzZWNyZXQtcGFzc3dvcmQ=' }, 'wrong scheme']);
    bad.push(['Token scheme with a good JWT', { authorization: `Token ${good}` }, 'wrong scheme']);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
    await jwks?.close();
  });

  it('a good token is admitted (the JWKS is fetched on first use)', async () => {
    for (const t of TRANSPORTS) {
      await expectAccepted(c, t, 'logs', `good-${t}`, { token: good });
      accepted.push(`good-${t}`);
    }
    expect(jwks.fetches).toBe(1);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: every bad credential → 401 naming the cause, no denial counted, no token echoed`, async () => {
      const m0 = await ing.metrics();
      const endpoint401 = 'siglake_ingest_requests_total{endpoint="otlp",status="401"}';
      for (const [what, creds, says] of bad) {
        const r = await expectRefused(c, t, 'logs', `bad-${t}`, creds, { status: 401, says });
        expect(r.message.startsWith('unauthenticated'), what).toBe(true);
        expect(r.retryAfter, what).toBeNull();
      }
      const m1 = await ing.metrics();
      expect((m1.get(endpoint401) ?? 0) - (m0.get(endpoint401) ?? 0)).toBe(bad.length);
      // None of these needed a key the ingester did not already hold.
      expect(jwks.fetches).toBe(1);
    });
  }

  it('an unknown kid → 401 unknown key; the JWKS server is asked again at most once per cooldown', async () => {
    const unknown = async (): Promise<string> => {
      const token = await mint(stranger, { [CLAIM]: 'acme' }, { kid: `rotated-${++unknownSeq}` });
      used.add(token);
      return token;
    };
    // A burst right away, then another once the cooldown has passed.
    for (let round = 0; round < 2; round++) {
      if (round === 1) await sleep(1200);
      const before = jwks.fetches;
      for (let i = 0; i < 4; i++) {
        for (const t of TRANSPORTS) {
          await expectRefused(c, t, i % 2 ? 'traces' : 'logs', `unknown-kid-${t}`, { token: await unknown() }, { status: 401, says: 'unknown key' });
        }
      }
      if (round === 1) expect(jwks.fetches, 'an unknown kid after the cooldown refetches').toBeGreaterThan(before);
    }
    expect(jwks.fetches).toBe(fetchTimes.length);
    for (let i = 1; i < fetchTimes.length; i++) {
      expect(fetchTimes[i]! - fetchTimes[i - 1]!, `gap between fetch ${i} and ${i + 1}`).toBeGreaterThanOrEqual(950);
    }
  });

  it('a key the provider rotates in is picked up on the next allowed refetch', async () => {
    const rotated = await makeKeyPair('ES256', 'ec-rotated');
    jwks.keys = [rsa.jwk, ec.jwk, rotated.jwk];
    await sleep(1100);
    const token = await mint(rotated, { [CLAIM]: 'acme' });
    used.add(token);
    for (const t of TRANSPORTS) {
      await expectAccepted(c, t, 'traces', `rotated-${t}`, { token });
      accepted.push(`rotated-${t}`);
    }
  });

  it('grpc: an authorization value with a non-ASCII byte (a good JWT plus "é") → UNAUTHENTICATED, never admitted', async () => {
    const token = await mint(rsa, { [CLAIM]: 'acme' }, { sub: 'svc-non-ascii-authorization' });
    used.add(token);
    const before = await c.denials();
    // grpc-js will not send such a value, so the call goes out over node:http2 by hand.
    const r = await rawGrpcCall(ing.grpcAddress, LOGS_EXPORT, logsProto(['non-ascii-authorization']), {
      headers: { authorization: `Bearer ${token}\u00e9` },
    });
    expect(r.code, `grpc-status (${r.message})`).toBe(grpc.status.UNAUTHENTICATED);
    expect(r.errorCode).toBe('SIGLAKE_UNAUTHENTICATED');
    expectNoSecret(r.message, token);
    expect(delta(before, await c.denials())).toEqual(only(undefined));
  });

  it('nothing refused was admitted: only acme exists, holding exactly the good requests', async () => {
    expect(topDirs(ing.walDir)).toEqual(['acme']);
    expect(textsUnder(path.join(ing.walDir, 'acme'))).toEqual([...accepted].sort());
    expect(await c.denials()).toEqual(only(undefined));
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(1);
  });

  it('no token text in the process logs', async () => {
    await expectLogsFreeOf(ing, used);
  });
});

describe('JWKS URL unreachable → 503 + Retry-After: 1, not 401', () => {
  let ing: RunningIngester;
  let c: Client;
  let token: string;
  beforeAll(async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    ing = await startIngester({
      args: [...oidcArgs(['--oidc-jwks-url', `http://127.0.0.1:${port}/.well-known/jwks.json`]), '--tenant-claim', CLAIM],
    });
    c = new Client(ing);
    token = await mint(rsa, { [CLAIM]: 'acme' });
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: a token that is not cached → 503 (UNAVAILABLE) with retry-after 1, nothing stored`, async () => {
      const r = await expectRefused(c, t, 'logs', `outage-${t}`, { token }, { status: 503 });
      expectCode(r, 'SIGLAKE_UNAVAILABLE');
      expect(r.retryAfter).toBe('1');
      expect(topDirs(ing.walDir)).toEqual([]);
    });
  }

  it('no token text in the process logs', async () => {
    await expectLogsFreeOf(ing, [token]);
  });
});

// ------------------------------------------------------------------ static tokens

describe('static bearer tokens (--auth-bearer-tokens and --auth-bearer-tokens-file)', () => {
  const FLAG_TOKEN = 'static-flag-token-7Qx9vR2p';
  const FILE_TOKEN = 'static-file-token-K2m4Ht8s';
  let ing: RunningIngester;
  let c: Client;
  const accepted: string[] = [];
  beforeAll(async () => {
    const dir = tempDir('siglake-tokens-');
    const file = path.join(dir, 'tokens.txt');
    fs.writeFileSync(file, `# ingest clients\n\n  ${FILE_TOKEN}  \n# static-commented-token-QQQQ\n`);
    ing = await startIngester({ args: ['--auth-bearer-tokens', `${FLAG_TOKEN},other-flag-token-Lp3`, '--auth-bearer-tokens-file', file] });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: the right token (from the flag, from the file, any case of "Bearer") → 200`, async () => {
      await expectAccepted(c, t, 'logs', `flag-${t}`, { token: FLAG_TOKEN });
      await expectAccepted(c, t, 'traces', `file-${t}`, { token: FILE_TOKEN });
      await expectAccepted(c, t, 'logs', `lower-${t}`, { authorization: `bearer ${FILE_TOKEN}` });
      accepted.push(`flag-${t}`, `file-${t}`, `lower-${t}`);
    });

    it(`${t}: a wrong token → 401 invalid token, never echoed`, async () => {
      const wrong: Array<[Creds, string]> = [
        [{ token: 'static-wrong-token-Zt5uY1' }, 'invalid token'],
        [{ token: FLAG_TOKEN.slice(0, -1) }, 'invalid token'],
        [{ token: `${FILE_TOKEN}x` }, 'invalid token'],
        [{ token: 'static-commented-token-QQQQ' }, 'invalid token'],
        [{}, 'missing credentials'],
        [{ authorization: `Basic ${FLAG_TOKEN}` }, 'wrong scheme'],
      ];
      for (const [creds, says] of wrong) {
        const r = await expectRefused(c, t, 'logs', `wrong-${t}`, creds, { status: 401, says });
        expectNoSecret(r.message, FLAG_TOKEN);
        expectNoSecret(r.message, FILE_TOKEN);
      }
    });
  }

  it('only the accepted requests are stored (tenant default), and no token reached the logs', async () => {
    expect(topDirs(ing.walDir)).toEqual(['logs', 'traces']);
    expect(walDump(ing.walDir).flatMap((l) => l.texts).sort()).toEqual([...accepted].sort());
    await expectLogsFreeOf(ing, [FLAG_TOKEN, FILE_TOKEN, 'other-flag-token-Lp3', 'static-wrong-token-Zt5uY1']);
  });
});

// ------------------------------------------------------------------ configuration

describe('--tenant-claim without OIDC', () => {
  const cases: Array<[string, string[], Record<string, string>, RegExp]> = [
    ['the flag', ['--tenant-claim', CLAIM], {}, /flag --tenant-claim/],
    ['the env var', [], { SIGLAKE_TENANT_CLAIM: CLAIM }, /env SIGLAKE_TENANT_CLAIM/],
    ['the flag, with static tokens only', ['--tenant-claim', CLAIM, '--auth-bearer-tokens', 'some-static-token'], {}, /flag --tenant-claim/],
  ];
  for (const [what, args, env, source] of cases) {
    it(`stops start-up with exit code 2 and one line naming the setting (${what})`, () => {
      const dir = tempDir('siglake-claim-cfg-');
      const r = runCli(
        ['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), ...args],
        { env, cwd: dir },
      );
      expect(r.status).toBe(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/tenantClaim/);
      expect(lines[0]).toMatch(source);
      expect(lines[0]).toMatch(/OIDC|oidc/);
      expect(r.stderr).not.toContain('some-static-token');
      expect(fs.existsSync(path.join(dir, 'wal'))).toBe(false);
    });
  }
});
