// OidcVerifier against real keys (RSA and EC pairs generated here), a JWKS
// file, and a real JWKS HTTP server on port 0 whose fetches are counted.

import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AuthError } from '../../src/auth/auth-error.js';
import { DEFAULT_ALGORITHMS, OidcVerifier, type OidcVerifierOptions } from '../../src/auth/oidc-verifier.js';
import { ConfigError, IngestError } from '../../src/errors.js';
import { TenantResolver } from '../../src/tenancy/tenant-resolver.js';
import { sleep } from '../helpers/wait.js';

const ISS = 'https://idp.example.test';
const AUD = 'siglake';

interface Pair {
  priv: CryptoKey;
  pub: CryptoKey;
  jwk: JWK;
  alg: string;
  kid: string;
}

async function pair(alg: 'RS256' | 'ES256', kid: string): Promise<Pair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { priv: privateKey, pub: publicKey, jwk, alg, kid };
}

const nowSecs = (): number => Math.floor(Date.now() / 1000);
const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

interface SignOpts {
  iss?: string | null;
  aud?: string | null;
  exp?: number | null;
  nbf?: number;
  kid?: string;
}

async function sign(key: Pair, claims: JWTPayload = {}, o: SignOpts = {}): Promise<string> {
  const jwt = new SignJWT({ sub: 'svc-1', ...claims }).setProtectedHeader({ alg: key.alg, kid: o.kid ?? key.kid });
  if (o.iss !== null) jwt.setIssuer(o.iss ?? ISS);
  if (o.aud !== null) jwt.setAudience(o.aud ?? AUD);
  if (o.exp !== null) jwt.setExpirationTime(o.exp ?? nowSecs() + 600);
  if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
  jwt.setIssuedAt();
  return jwt.sign(key.priv);
}

/** The refusal of `p`, checked to be an IngestError that does not echo any part of `token`. */
async function refusal(p: Promise<unknown>, token: string): Promise<IngestError> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(IngestError);
  const err = caught as IngestError;
  const texts = [err.message, String(err), err.stack ?? '', JSON.stringify(err)];
  const parts = token.split('.').filter((s) => s.length >= 8);
  for (const t of texts) {
    if (token.length > 0) expect(t).not.toContain(token);
    for (const part of parts) expect(t).not.toContain(part);
  }
  return err;
}

async function reason(p: Promise<unknown>, token: string): Promise<string> {
  const err = await refusal(p, token);
  expect(err.code).toBe('SIGLAKE_UNAUTHENTICATED');
  expect(err.httpStatus).toBe(401);
  expect(err).toBeInstanceOf(AuthError);
  expect(err.message).toBe(`unauthenticated: ${(err as AuthError).authReason}`);
  return (err as AuthError).authReason;
}

let rsa: Pair;
let ec: Pair;
let stranger: Pair; // a key the verifier never learns
let dir: string;
let jwksFile: string;

beforeAll(async () => {
  rsa = await pair('RS256', 'rsa-1');
  ec = await pair('ES256', 'ec-1');
  stranger = await pair('RS256', 'rsa-1'); // same kid as rsa, different key
  dir = mkdtempSync(join(tmpdir(), 'siglake-oidc-'));
  jwksFile = join(dir, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [rsa.jwk, ec.jwk] }));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function fileVerifier(o: Partial<OidcVerifierOptions> = {}): OidcVerifier {
  return new OidcVerifier({ issuer: ISS, audience: AUD, jwksFile, ...o });
}

describe('OidcVerifier construction', () => {
  it('refuses none and HMAC algorithms, empty and unknown lists', () => {
    for (const algorithms of [['none'], ['NONE'], ['HS256'], ['RS256', 'hs512'], ['HS384'], [], ['RSA-OAEP']]) {
      expect(() => fileVerifier({ algorithms })).toThrow(ConfigError);
    }
    expect(() => fileVerifier({ algorithms: ['HS256'] })).toThrow(/HS256/);
  });

  it('defaults to the asymmetric families only', () => {
    expect(DEFAULT_ALGORITHMS.some((a) => /^hs|^none$/i.test(a))).toBe(false);
    for (const fam of ['RS256', 'PS256', 'ES256', 'EdDSA']) expect(DEFAULT_ALGORITHMS).toContain(fam);
  });

  it('names the path of an unreadable or invalid JWKS file', () => {
    const missing = join(dir, 'nope.json');
    expect(() => fileVerifier({ jwksFile: missing })).toThrow(missing);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"keys": 3}');
    expect(() => fileVerifier({ jwksFile: bad })).toThrow(ConfigError);
    const secret = join(dir, 'secret.json');
    writeFileSync(secret, JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0', kid: 'h' }] }));
    expect(() => fileVerifier({ jwksFile: secret })).toThrow(/private or symmetric/);
  });

  it('refuses both a JWKS file and URL, bad numbers, and an empty issuer', () => {
    expect(() => fileVerifier({ jwksUrl: 'https://x.test/jwks' })).toThrow(ConfigError);
    expect(() => fileVerifier({ cacheSize: -1 })).toThrow(ConfigError);
    expect(() => fileVerifier({ maxTokenBytes: 0 })).toThrow(ConfigError);
    expect(() => fileVerifier({ clockSkewSecs: Number.NaN })).toThrow(ConfigError);
    expect(() => new OidcVerifier({ issuer: '', jwksFile })).toThrow(ConfigError);
    expect(() => new OidcVerifier({ issuer: ISS, jwksUrl: 'ftp://x.test/jwks' })).toThrow(ConfigError);
  });
});

describe('OidcVerifier with a JWKS file: the bad-token rows', () => {
  it('accepts RS256 and ES256 tokens and returns their claims', async () => {
    const v = fileVerifier();
    const a = await v.verify(await sign(rsa, { org: 'acme' }));
    expect(a.claims.org).toBe('acme');
    expect(a.claims.iss).toBe(ISS);
    const b = await v.verify(await sign(ec, { org: 'beta' }));
    expect(b.claims.org).toBe('beta');
    expect(v.keySource).toBe('file');
  });

  it('alg none → algorithm not allowed', async () => {
    const v = fileVerifier();
    const token = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ iss: ISS, aud: AUD, exp: nowSecs() + 600, org: 'acme' })}.`;
    expect(await reason(v.verify(token), token)).toBe('algorithm not allowed');
  });

  it('HS256 signed with the RSA public key bytes → algorithm not allowed', async () => {
    const v = fileVerifier();
    const pem = await exportSPKI(rsa.pub);
    const header = b64({ alg: 'HS256', typ: 'JWT', kid: rsa.kid });
    const payload = b64({ iss: ISS, aud: AUD, exp: nowSecs() + 600, org: 'acme' });
    const sig = createHmac('sha256', pem).update(`${header}.${payload}`).digest('base64url');
    const token = `${header}.${payload}.${sig}`;
    expect(await reason(v.verify(token), token)).toBe('algorithm not allowed');
    // The raw JWK bytes as the secret fare no better.
    const sig2 = createHmac('sha256', JSON.stringify(rsa.jwk)).update(`${header}.${payload}`).digest('base64url');
    const token2 = `${header}.${payload}.${sig2}`;
    expect(await reason(v.verify(token2), token2)).toBe('algorithm not allowed');
  });

  it('an algorithm outside a narrowed allow-list → algorithm not allowed', async () => {
    const v = fileVerifier({ algorithms: ['RS256'] });
    const token = await sign(ec);
    expect(await reason(v.verify(token), token)).toBe('algorithm not allowed');
  });

  it('expired, and within the clock skew accepted but not cached', async () => {
    const v = fileVerifier({ clockSkewSecs: 30 });
    const old = await sign(rsa, {}, { exp: nowSecs() - 120 });
    expect(await reason(v.verify(old), old)).toBe('expired');
    const justExpired = await sign(rsa, {}, { exp: nowSecs() - 5 });
    const r = await v.verify(justExpired);
    expect(r.claims.sub).toBe('svc-1');
    expect(v.lookup(justExpired)).toBeUndefined();
    expect(v.cachedTokens).toBe(0);
  });

  it('not yet valid (nbf beyond the skew)', async () => {
    const v = fileVerifier({ clockSkewSecs: 30 });
    const token = await sign(rsa, {}, { nbf: nowSecs() + 300 });
    expect(await reason(v.verify(token), token)).toBe('not yet valid');
    const soon = await sign(rsa, {}, { nbf: nowSecs() + 10 });
    expect((await v.verify(soon)).claims.sub).toBe('svc-1');
  });

  it('wrong or missing iss → wrong issuer; wrong or missing aud → wrong audience', async () => {
    const v = fileVerifier();
    for (const iss of ['https://evil.example.test', null]) {
      const t = await sign(rsa, {}, { iss });
      expect(await reason(v.verify(t), t)).toBe('wrong issuer');
    }
    for (const aud of ['someone-else', null]) {
      const t = await sign(rsa, {}, { aud });
      expect(await reason(v.verify(t), t)).toBe('wrong audience');
    }
  });

  it('audience unset: aud is not checked', async () => {
    const v = new OidcVerifier({ issuer: ISS, jwksFile });
    const t = await sign(rsa, {}, { aud: 'anything' });
    expect((await v.verify(t)).claims.aud).toBe('anything');
  });

  it('unknown kid → unknown key', async () => {
    const v = fileVerifier();
    const token = await sign(rsa, {}, { kid: 'rsa-404' });
    expect(await reason(v.verify(token), token)).toBe('unknown key');
  });

  it('a known kid with another key, or a tampered payload → bad signature', async () => {
    const v = fileVerifier();
    const forged = await sign(stranger, { org: 'acme' });
    expect(await reason(v.verify(forged), forged)).toBe('bad signature');
    const good = await sign(rsa, { org: 'acme' });
    const [h, , s] = good.split('.');
    const tampered = `${h}.${b64({ iss: ISS, aud: AUD, exp: nowSecs() + 600, org: 'victim' })}.${s}`;
    expect(await reason(v.verify(tampered), tampered)).toBe('bad signature');
  });

  it('a JWKS without kids: tries each matching key, refuses when none verifies', async () => {
    const other = await pair('RS256', 'unused');
    const noKids = join(dir, 'nokids.json');
    const strip = (j: JWK): JWK => ({ ...j, kid: undefined });
    writeFileSync(noKids, JSON.stringify({ keys: [strip(other.jwk), strip(rsa.jwk)] }));
    const v = fileVerifier({ jwksFile: noKids });
    const plain = async (k: Pair): Promise<string> =>
      new SignJWT({ org: 'acme' }).setProtectedHeader({ alg: 'RS256' }).setIssuer(ISS).setAudience(AUD).setExpirationTime('10m').sign(k.priv);
    expect((await v.verify(await plain(rsa))).claims.org).toBe('acme');
    const forged = await plain(stranger);
    expect(await reason(v.verify(forged), forged)).toBe('bad signature');
  });

  it('oversized tokens are refused before parsing', async () => {
    const v = fileVerifier({ maxTokenBytes: 8192 });
    const junk = 'x'.repeat(8193);
    expect(await reason(v.verify(junk), junk)).toBe('too large');
    const big = await sign(rsa, { pad: 'p'.repeat(9000) });
    expect(big.length).toBeGreaterThan(8192);
    expect(await reason(v.verify(big), big)).toBe('too large');
    const small = fileVerifier({ maxTokenBytes: 64 });
    const normal = await sign(rsa);
    expect(await reason(small.verify(normal), normal)).toBe('too large');
  });

  it('garbage, a missing exp and broken JSON → malformed', async () => {
    const v = fileVerifier();
    const noExp = await sign(rsa, {}, { exp: null });
    const brokenJson = `${Buffer.from('{"alg":"RS256"').toString('base64url')}.${b64({})}.c2ln`;
    for (const t of ['', 'abc', 'a.b.c', 'a.b.c.d', '....', noExp, brokenJson, 'Bearer x.y.z']) {
      expect(await reason(v.verify(t), t)).toBe('malformed');
    }
  });

  it('a tenant claim that is a number, an array or an object → claim_invalid at the resolver', async () => {
    const v = fileVerifier();
    const resolver = new TenantResolver({ trustTenantHeader: false, tenantClaim: 'org' });
    for (const org of [42, ['acme'], { id: 'acme' }, null, true]) {
      const { claims } = await v.verify(await sign(rsa, { org } as JWTPayload));
      let caught: unknown;
      try {
        resolver.resolve(undefined, 0, claims);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(IngestError);
      expect((caught as IngestError).reason).toBe('claim_invalid');
      expect((caught as IngestError).httpStatus).toBe(403);
    }
    const { claims } = await v.verify(await sign(rsa, { org: 'acme' }));
    expect(resolver.resolve(undefined, 0, claims)).toBe('acme');
  });
});

describe('OidcVerifier verified-token cache', () => {
  it('a hit is synchronous, returns the same frozen entry, and holds until exp', async () => {
    const v = fileVerifier();
    const token = await sign(rsa, { org: 'acme', nested: { a: [1] } });
    expect(v.lookup(token)).toBeUndefined();
    const first = await v.verify(token);
    const hit = v.lookup(token);
    expect(hit).toBe(first);
    expect(Object.isFrozen(hit?.claims)).toBe(true);
    expect(Object.isFrozen((hit?.claims.nested as { a: unknown[] }).a)).toBe(true);
    expect(() => {
      (hit?.claims as Record<string, unknown>).org = 'other';
    }).toThrow(TypeError);
    expect(await v.verify(token)).toBe(first);
  });

  it('never serves a token at or past exp', async () => {
    const v = fileVerifier({ clockSkewSecs: 0 });
    const exp = nowSecs() + 2; // expires 1-2 s from now
    const token = await sign(rsa, { org: 'acme' }, { exp });
    const entry = await v.verify(token);
    expect(entry.expiresAtMs).toBe(exp * 1000);
    expect(v.lookup(token)).toBe(entry);
    // Wait until just past exp: the entry must be gone from the very first instant.
    await sleep(Math.max(0, exp * 1000 - Date.now()) + 20);
    expect(v.lookup(token)).toBeUndefined();
    expect(await reason(v.verify(token), token)).toBe('expired');
    expect(v.cachedTokens).toBe(0);
  });

  it('is bounded and evicts the oldest entry', async () => {
    const v = fileVerifier({ cacheSize: 3 });
    const tokens: string[] = [];
    for (let i = 0; i < 5; i++) tokens.push(await sign(rsa, { n: i }));
    for (const t of tokens) await v.verify(t);
    expect(v.cachedTokens).toBe(3);
    expect(v.lookup(tokens[0])).toBeUndefined();
    expect(v.lookup(tokens[1])).toBeUndefined();
    for (const t of tokens.slice(2)) expect(v.lookup(t)?.claims.sub).toBe('svc-1');
    // Re-verifying a cached token does not evict anything.
    await v.verify(tokens[4]);
    expect(v.cachedTokens).toBe(3);
    expect(v.lookup(tokens[2])).toBeDefined();
  });

  it('serves only the identical token, never one that merely shares its tail', async () => {
    const v = fileVerifier();
    const token = await sign(rsa, { org: 'acme' });
    const entry = await v.verify(token);
    const tail = token.slice(-40);
    const [h, p] = token.split('.');
    const impostors = [
      `${b64({ alg: 'RS256', kid: rsa.kid })}.${b64({ iss: ISS, aud: AUD, exp: nowSecs() + 600, org: 'victim' })}.${token.split('.')[2]}`,
      `x${token.slice(1)}`,
      `${h}.${p}x.${token.split('.')[2]}`,
      tail,
      ` ${token}`,
    ];
    for (const t of impostors) {
      expect(t.slice(-32)).toBe(token.slice(-32));
      expect(v.lookup(t)).toBeUndefined();
      const why = await reason(v.verify(t), t);
      expect(['bad signature', 'malformed']).toContain(why);
    }
    // The genuine entry is still there, untouched.
    expect(v.lookup(token)).toBe(entry);
    expect(v.lookup(token.slice(0, -1))).toBeUndefined();
    expect(v.cachedTokens).toBe(1);
  });

  it('cacheSize 0 keeps nothing', async () => {
    const v = fileVerifier({ cacheSize: 0 });
    const token = await sign(rsa);
    await v.verify(token);
    expect(v.lookup(token)).toBeUndefined();
    expect(v.cachedTokens).toBe(0);
  });

  it('refused tokens never enter the cache', async () => {
    const v = fileVerifier();
    const forged = await sign(stranger);
    await reason(v.verify(forged), forged);
    expect(v.lookup(forged)).toBeUndefined();
    expect(v.cachedTokens).toBe(0);
  });
});

describe('OidcVerifier with a JWKS URL', () => {
  let server: Server | undefined;
  let fetches = 0;
  let keys: JWK[] = [];
  let mode: 'ok' | 'error' | 'hang' = 'ok';

  async function start(): Promise<string> {
    fetches = 0;
    mode = 'ok';
    server = createServer((req, res) => {
      if (req.url !== '/.well-known/jwks.json') {
        res.writeHead(404).end();
        return;
      }
      fetches++;
      if (mode === 'hang') return; // never answers
      if (mode === 'error') {
        res.writeHead(500).end('boom');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  afterEach(async () => {
    const s = server;
    server = undefined;
    if (s !== undefined) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  it('derives <issuer>/.well-known/jwks.json and fetches once for many tokens', async () => {
    keys = [rsa.jwk, ec.jwk];
    const base = await start();
    const v = new OidcVerifier({ issuer: base, audience: AUD, jwksCooldownMs: 60_000 });
    expect(v.keySource).toBe('url');
    const tokens = await Promise.all([1, 2, 3].map((n) => sign(rsa, { n }, { iss: base })));
    tokens.push(await sign(ec, {}, { iss: base }));
    for (const t of tokens) await v.verify(t);
    expect(fetches).toBe(1);
    for (const t of tokens) expect(v.lookup(t)).toBeDefined();
    for (const t of tokens) await v.verify(t);
    expect(fetches).toBe(1);
  });

  it('an unknown kid refetches at most once per cooldown, and picks up a rotated key', async () => {
    keys = [rsa.jwk];
    const base = await start();
    const v = new OidcVerifier({ issuer: ISS, audience: AUD, jwksUrl: `${base}/.well-known/jwks.json`, jwksCooldownMs: 600 });
    await v.verify(await sign(rsa));
    expect(fetches).toBe(1);

    // Inside the cooldown: refused without a fetch.
    const unknown1 = await sign(ec, {}, { kid: 'rotated-1' });
    expect(await reason(v.verify(unknown1), unknown1)).toBe('unknown key');
    expect(fetches).toBe(1);

    // After it: exactly one refetch, then the cooldown holds again.
    await sleep(650);
    expect(await reason(v.verify(unknown1), unknown1)).toBe('unknown key');
    expect(fetches).toBe(2);
    const unknown2 = await sign(ec, {}, { kid: 'rotated-2' });
    expect(await reason(v.verify(unknown2), unknown2)).toBe('unknown key');
    const unknown3 = await sign(ec, {}, { kid: 'rotated-3' });
    expect(await reason(v.verify(unknown3), unknown3)).toBe('unknown key');
    expect(fetches).toBe(2);

    // The provider rotates in a new key: found on the next allowed refetch.
    const rotated = await pair('ES256', 'ec-rotated');
    keys = [rsa.jwk, rotated.jwk];
    await sleep(650);
    const fresh = await sign(rotated, { org: 'acme' });
    expect((await v.verify(fresh)).claims.org).toBe('acme');
    expect(fetches).toBe(3);
    expect(v.lookup(fresh)).toBeDefined();
    await v.verify(fresh);
    expect(fetches).toBe(3);
  });

  it('a JWKS endpoint that fails or times out → 503 SIGLAKE_UNAVAILABLE, cause reported, no token leaked', async () => {
    keys = [rsa.jwk];
    const base = await start();
    const causes: unknown[] = [];
    const v = new OidcVerifier({
      issuer: ISS,
      audience: AUD,
      jwksUrl: `${base}/.well-known/jwks.json`,
      jwksTimeoutMs: 200,
      onJwksError: (c) => causes.push(c),
    });
    mode = 'error';
    const t1 = await sign(rsa);
    const e1 = await refusal(v.verify(t1), t1);
    expect(e1.code).toBe('SIGLAKE_UNAVAILABLE');
    expect(e1.httpStatus).toBe(503);
    mode = 'hang';
    const started = Date.now();
    const e2 = await refusal(v.verify(t1), t1);
    expect(e2.code).toBe('SIGLAKE_UNAVAILABLE');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(causes.length).toBe(2);
    for (const c of causes) expect(String(c)).not.toContain(t1);
    // Recovery: the next request fetches again and succeeds.
    mode = 'ok';
    expect((await v.verify(t1)).claims.sub).toBe('svc-1');
  });
});
