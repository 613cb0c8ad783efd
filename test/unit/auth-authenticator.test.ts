// Authenticator modes (open, static, OIDC), header parsing, and the
// synchronous cache-hit path.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthError } from '../../src/auth/auth-error.js';
import { Authenticator, type AuthResult } from '../../src/auth/authenticator.js';
import { IngestError } from '../../src/errors.js';
import { thrown } from '../helpers/thrown.js';

const ISS = 'https://idp.example.test';
const AUD = 'siglake';
const GOOD = 'sk_live_7f3a9c2e41b8d6f0a5e3';
const OTHER = 'sk_live_0000aaaa1111bbbb2222';

/** The synchronous refusal of `fn`, checked to be a 401 that echoes no part of `secret`. */
function refusedSync(fn: () => unknown, secret: string): string {
  const err = thrown(AuthError, fn);
  expect(err.code).toBe('SIGLAKE_UNAUTHENTICATED');
  expect(err.httpStatus).toBe(401);
  expect(err.grpcCode).toBe(16);
  if (secret.length >= 4) {
    for (const t of [err.message, String(err), err.stack ?? '']) expect(t).not.toContain(secret);
  }
  return err.authReason;
}

function isThenable(v: unknown): boolean {
  return v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';
}

describe('Authenticator: open', () => {
  it('accepts every request as anonymous, synchronously, whatever the header', () => {
    const a = new Authenticator({ bearerTokens: [] });
    expect(a.mode).toBe('open');
    for (const h of [undefined, '', 'Basic Zm9vOmJhcg==', 'Bearer whatever']) {
      const r = a.authenticate(h);
      expect(isThenable(r)).toBe(false);
      expect((r as AuthResult).claims).toBeUndefined();
    }
  });
});

describe('Authenticator: static tokens', () => {
  const a = new Authenticator({ bearerTokens: [GOOD, OTHER] });

  it('accepts a configured token with any case of the scheme', () => {
    expect(a.mode).toBe('static');
    for (const h of [`Bearer ${GOOD}`, `bearer ${GOOD}`, `BEARER ${OTHER}`, `bEaReR   ${GOOD}  `]) {
      const r = a.authenticate(h);
      expect(isThenable(r)).toBe(false);
      expect(r).toEqual({ claims: undefined });
    }
  });

  it('refuses a missing header, a wrong scheme and an empty token', () => {
    expect(refusedSync(() => a.authenticate(undefined), GOOD)).toBe('missing credentials');
    expect(refusedSync(() => a.authenticate(''), GOOD)).toBe('missing credentials');
    expect(refusedSync(() => a.authenticate(`Basic ${GOOD}`), GOOD)).toBe('wrong scheme');
    expect(refusedSync(() => a.authenticate(GOOD), GOOD)).toBe('wrong scheme');
    expect(refusedSync(() => a.authenticate(`Bearer${GOOD}`), GOOD)).toBe('wrong scheme');
    expect(refusedSync(() => a.authenticate(`Token ${GOOD}`), GOOD)).toBe('wrong scheme');
    expect(refusedSync(() => a.authenticate('Bearer'), GOOD)).toBe('empty token');
    expect(refusedSync(() => a.authenticate('Bearer '), GOOD)).toBe('empty token');
    expect(refusedSync(() => a.authenticate('Bearer    '), GOOD)).toBe('empty token');
  });

  it('refuses near misses without echoing them', () => {
    for (const bad of [GOOD.slice(0, -1), `${GOOD}x`, GOOD.toUpperCase(), `x${GOOD.slice(1)}`, `${GOOD} ${OTHER}`]) {
      expect(refusedSync(() => a.authenticate(`Bearer ${bad}`), bad)).toBe('invalid token');
    }
    const huge = 'a'.repeat(20_000);
    expect(refusedSync(() => a.authenticate(`Bearer ${huge}`), huge)).toBe('invalid token');
  });
});

describe('Authenticator: OIDC', () => {
  let dir: string;
  let jwksFile: string;
  let priv: CryptoKey;

  beforeAll(async () => {
    const kp = await generateKeyPair('ES256', { extractable: true });
    priv = kp.privateKey;
    dir = mkdtempSync(join(tmpdir(), 'siglake-authn-'));
    jwksFile = join(dir, 'jwks.json');
    writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(kp.publicKey)), kid: 'k1', alg: 'ES256' }] }));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const token = (claims: Record<string, unknown>): Promise<string> =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(ISS)
      .setAudience(AUD)
      .setExpirationTime('10m')
      .sign(priv);

  function oidcAuth(): Authenticator {
    return new Authenticator({
      bearerTokens: [GOOD],
      oidc: {
        issuer: ISS,
        audience: AUD,
        jwksFile,
        clockSkewSecs: 30,
        cacheSize: 100,
        maxTokenBytes: 8192,
        jwksTimeoutMs: 1000,
        jwksCooldownMs: 1000,
      },
    });
  }

  it('takes precedence over static tokens', async () => {
    const a = oidcAuth();
    expect(a.mode).toBe('oidc');
    let caught: unknown;
    try {
      await a.authenticate(`Bearer ${GOOD}`);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(AuthError);
    expect((caught as AuthError).authReason).toBe('malformed');
    expect((caught as Error).message).not.toContain(GOOD);
  });

  it('a miss returns a Promise; the cache hit returns the claims synchronously', async () => {
    const a = oidcAuth();
    const jwt = await token({ org: 'acme' });
    const first = a.authenticate(`Bearer ${jwt}`);
    expect(isThenable(first)).toBe(true);
    const verified = await first;
    expect(verified.claims?.org).toBe('acme');
    const second = a.authenticate(`bearer ${jwt}`);
    expect(isThenable(second)).toBe(false);
    expect(second).toBe(verified);
    expect((second as AuthResult).claims?.org).toBe('acme');
    expect(a.oidc?.cachedTokens).toBe(1);
  });

  it('header problems throw synchronously; token problems reject with a 401', async () => {
    const a = oidcAuth();
    expect(refusedSync(() => a.authenticate(undefined), GOOD)).toBe('missing credentials');
    expect(refusedSync(() => a.authenticate('Basic abc'), GOOD)).toBe('wrong scheme');
    expect(refusedSync(() => a.authenticate('Bearer '), GOOD)).toBe('empty token');
    const jwt = await token({ org: 'acme' });
    const tampered = `${jwt.slice(0, -4)}AAAA`;
    const p = a.authenticate(`Bearer ${tampered}`);
    expect(isThenable(p)).toBe(true);
    await expect(p).rejects.toBeInstanceOf(IngestError);
    await expect(p).rejects.toMatchObject({ code: 'SIGLAKE_UNAUTHENTICATED', httpStatus: 401 });
    const err = await (p as Promise<AuthResult>).catch((e: unknown) => e as Error);
    expect((err as Error).message).not.toContain(tampered);
    expect((err as Error).message).not.toContain(tampered.split('.')[2]);
  });
});
