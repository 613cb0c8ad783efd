// OIDC bearer tokens: a JWT signed by the identity provider, verified with jose
// against a JWKS fetched from a URL or read from a file.
//
// Hot path: a verified token is cached until its `exp` and served only for the
// exact same token string. `lookup(token)` answers a hit synchronously; only a
// miss goes through `verify(token)`, which returns a Promise. The Map is
// indexed by the token's last 32 characters (the tail of its signature) and
// each entry keeps the full token, compared with `===` before it is served: a
// token arrives as a fresh string on every request, and V8 hashes a fresh
// string over its whole length (about 1.3 ns a character, 1-3 µs for a real
// JWT), while a 32-character key plus one equality check stays near 100 ns
// whatever the token's size. Two tokens sharing a tail cannot be confused:
// the equality check turns that into a miss, and inserting one replaces the
// other. An entry is never served at or past `exp`: `exp` is checked against
// the clock on every hit, and a token already past `exp` (accepted only thanks
// to the clock-skew tolerance) is not cached at all. The cache is bounded and
// evicts the oldest entry; only verified tokens ever enter it, so a flood of
// garbage tokens cannot push good ones out faster than it could anyway.
//
// Every refusal is an AuthError (401) with a short reason; a token never
// reaches an error, a log line or a metric. When the key source itself fails
// (JWKS URL unreachable, timeout, not JSON) the answer is a 503
// SIGLAKE_UNAVAILABLE instead: the caller's credentials may be fine, and a
// 401 would tell a client to stop retrying.

import { readFileSync } from 'node:fs';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  jwtVerify,
  type CryptoKey,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
} from 'jose';
import { ConfigError, IngestError } from '../errors.js';
import { ASYMMETRIC_ALGORITHMS } from './algorithms.js';
import { AuthError, type AuthFailureReason } from './auth-error.js';

/** The default allow-list: every algorithm the verifier supports (anything else is refused at construction). */
export const DEFAULT_ALGORITHMS: readonly string[] = ASYMMETRIC_ALGORITHMS;

export const OIDC_DEFAULTS = Object.freeze({
  clockSkewSecs: 30,
  cacheSize: 10_000,
  maxTokenBytes: 8192,
  jwksTimeoutMs: 5000,
  jwksCooldownMs: 30_000,
});

export interface OidcVerifierOptions {
  /** Required `iss`. */
  issuer: string;
  /** Required `aud` (one of them, when a list); unset means `aud` is not checked. */
  audience?: string | string[];
  /** JWKS URL; default `<issuer>/.well-known/jwks.json`. Exclusive with `jwksFile`. */
  jwksUrl?: string;
  /** A static JWKS file read once at construction. Exclusive with `jwksUrl`. */
  jwksFile?: string;
  /** Allowed `alg` values; default {@link DEFAULT_ALGORITHMS}. `none` and `HS*` are refused. */
  algorithms?: string[];
  /** Tolerance for `exp` and `nbf`, in seconds. Default 30. */
  clockSkewSecs?: number;
  /** Verified tokens kept; 0 disables the cache. Default 10000. */
  cacheSize?: number;
  /** Tokens longer than this are refused before parsing. Default 8192. */
  maxTokenBytes?: number;
  /** Timeout of one JWKS fetch, in ms. Default 5000. */
  jwksTimeoutMs?: number;
  /** After a successful fetch, an unknown `kid` refetches only once this many ms have passed. Default 30000. */
  jwksCooldownMs?: number;
  /** Told why the key source failed (never called with a token), for a log line. */
  onJwksError?: (cause: unknown) => void;
}

/** A verified token as the cache holds it. `claims` is deep-frozen. */
export interface VerifiedToken {
  readonly claims: Record<string, unknown>;
  /** `exp` in ms since the epoch; the entry is not served from this instant on. */
  readonly expiresAtMs: number;
}

/** Characters of the token's end that index the cache. */
const CACHE_KEY_CHARS = 32;

interface CacheEntry {
  readonly token: string;
  readonly result: VerifiedToken;
}

function cacheKey(token: string): string {
  return token.length <= CACHE_KEY_CHARS ? token : token.slice(token.length - CACHE_KEY_CHARS);
}

export class OidcVerifier {
  readonly #cache = new Map<string, CacheEntry>();
  readonly #cacheSize: number;
  readonly #maxTokenBytes: number;
  readonly #getKey: JWTVerifyGetKey;
  readonly #options: JWTVerifyOptions;
  readonly #fail: Readonly<Record<AuthFailureReason, AuthError>>;
  readonly #keysUnavailable: IngestError;
  readonly #source: 'url' | 'file';

  constructor(opts: OidcVerifierOptions) {
    if (typeof opts.issuer !== 'string' || opts.issuer === '') {
      throw ConfigError.ofSetting('auth.oidc.issuer', 'must be a non-empty string');
    }
    const algorithms = checkAlgorithms(opts.algorithms);
    const clockSkewSecs = checkNumber('auth.oidc.clockSkewSecs', opts.clockSkewSecs, OIDC_DEFAULTS.clockSkewSecs, 0, false);
    this.#cacheSize = checkNumber('auth.oidc.cacheSize', opts.cacheSize, OIDC_DEFAULTS.cacheSize, 0, true);
    this.#maxTokenBytes = checkNumber('auth.oidc.maxTokenBytes', opts.maxTokenBytes, OIDC_DEFAULTS.maxTokenBytes, 1, true);
    const timeoutMs = checkNumber('auth.oidc.jwksTimeoutMs', opts.jwksTimeoutMs, OIDC_DEFAULTS.jwksTimeoutMs, 1, true);
    const cooldownMs = checkNumber('auth.oidc.jwksCooldownMs', opts.jwksCooldownMs, OIDC_DEFAULTS.jwksCooldownMs, 0, true);
    let audience: string | string[] | undefined;
    if (opts.audience !== undefined) {
      const list = Array.isArray(opts.audience) ? opts.audience : [opts.audience];
      if (list.length === 0 || list.some((a) => typeof a !== 'string' || a === '')) {
        throw ConfigError.ofSetting('auth.oidc.audience', 'must be a non-empty string');
      }
      audience = Array.isArray(opts.audience) ? [...opts.audience] : opts.audience;
    }

    this.#fail = AuthError.table();
    this.#keysUnavailable = new IngestError('SIGLAKE_UNAVAILABLE', 'identity provider keys unavailable');

    let source: JWTVerifyGetKey;
    if (opts.jwksFile !== undefined && opts.jwksUrl !== undefined) {
      throw ConfigError.ofSetting('auth.oidc.jwksFile', 'set either auth.oidc.jwksFile or auth.oidc.jwksUrl, not both');
    }
    if (opts.jwksFile !== undefined) {
      const jwks = readJwksFile(opts.jwksFile);
      try {
        source = createLocalJWKSet(jwks);
      } catch {
        throw ConfigError.ofSetting('auth.oidc.jwksFile', `${opts.jwksFile} is not a valid JWKS`);
      }
      this.#source = 'file';
    } else {
      const href = opts.jwksUrl ?? `${opts.issuer.replace(/\/+$/, '')}/.well-known/jwks.json`;
      let url: URL;
      try {
        url = new URL(href);
      } catch {
        throw ConfigError.ofSetting('auth.oidc.jwksUrl', `not a URL: ${href}`);
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        throw ConfigError.ofSetting('auth.oidc.jwksUrl', `must be http(s), got ${url.protocol}`);
      }
      source = createRemoteJWKSet(url, { timeoutDuration: timeoutMs, cooldownDuration: cooldownMs });
      this.#source = 'url';
    }

    // Key-selection outcomes pass through for the reason mapping; any other
    // failure is the key source's, answered with the 503 sentinel.
    const unavailable = this.#keysUnavailable;
    const onJwksError = opts.onJwksError;
    this.#getKey = async (header, token) => {
      try {
        return await source(header, token);
      } catch (err) {
        const code = (err as { code?: unknown } | null)?.code;
        if (
          code === 'ERR_JWKS_NO_MATCHING_KEY' ||
          code === 'ERR_JWKS_MULTIPLE_MATCHING_KEYS' ||
          code === 'ERR_JOSE_NOT_SUPPORTED'
        ) {
          throw err;
        }
        onJwksError?.(err);
        throw unavailable;
      }
    };

    this.#options = Object.freeze({
      issuer: opts.issuer,
      audience,
      algorithms,
      clockTolerance: clockSkewSecs,
      requiredClaims: ['exp'],
    });
  }

  /** Where the keys come from. */
  get keySource(): 'url' | 'file' {
    return this.#source;
  }

  /** Entries now in the verified-token cache (expired ones linger until hit or evicted). */
  get cachedTokens(): number {
    return this.#cache.size;
  }

  /**
   * The cache hit path: the verified token when `token` is cached and not yet
   * past `exp`, else undefined (then call {@link verify}). Synchronous; the only
   * allocation is the 32-character key (a slice of the token).
   */
  lookup(token: string): VerifiedToken | undefined {
    const key = cacheKey(token);
    const hit = this.#cache.get(key);
    if (hit === undefined || hit.token !== token) return undefined;
    if (Date.now() >= hit.result.expiresAtMs) {
      this.#cache.delete(key);
      return undefined;
    }
    return hit.result;
  }

  /**
   * Verify a token that missed the cache (a hit is answered too). Rejects with
   * an AuthError (401) naming the reason, or with SIGLAKE_UNAVAILABLE (503)
   * when the JWKS could not be fetched.
   */
  async verify(token: string): Promise<VerifiedToken> {
    if (token.length > this.#maxTokenBytes) throw this.#fail['too large'];
    const hit = this.lookup(token);
    if (hit !== undefined) return hit;
    let payload: JWTPayload;
    try {
      payload = (await jwtVerify(token, this.#getKey, this.#options)).payload;
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'ERR_JWKS_MULTIPLE_MATCHING_KEYS') {
        payload = await this.#verifyWithEach(token, err as AsyncIterable<unknown>);
      } else {
        throw this.#map(err);
      }
    }
    return this.#remember(token, payload);
  }

  /** Several keys matched (a JWKS without `kid`s): accept the first whose signature verifies. */
  async #verifyWithEach(token: string, keys: AsyncIterable<unknown>): Promise<JWTPayload> {
    for await (const key of keys) {
      try {
        return (await jwtVerify(token, key as CryptoKey, this.#options)).payload;
      } catch (err) {
        if ((err as { code?: unknown } | null)?.code !== 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') throw this.#map(err);
      }
    }
    throw this.#fail['bad signature'];
  }

  #remember(token: string, payload: JWTPayload): VerifiedToken {
    const claims = deepFreeze(payload as Record<string, unknown>);
    const entry: VerifiedToken = Object.freeze({ claims, expiresAtMs: (payload.exp as number) * 1000 });
    if (this.#cacheSize > 0 && Date.now() < entry.expiresAtMs) {
      const cache = this.#cache;
      const key = cacheKey(token);
      // A token sharing this key is replaced, and moves to the newest end.
      if (!cache.delete(key)) {
        while (cache.size >= this.#cacheSize) {
          const oldest = cache.keys().next();
          if (oldest.done) break;
          cache.delete(oldest.value);
        }
      }
      cache.set(key, Object.freeze({ token, result: entry }));
    }
    return entry;
  }

  /** A jose failure as a refusal. Matches on jose's stable error codes. */
  #map(err: unknown): IngestError {
    if (err === this.#keysUnavailable) return this.#keysUnavailable;
    const fail = this.#fail;
    const e = (err ?? {}) as { code?: unknown; claim?: unknown; reason?: unknown };
    switch (e.code) {
      case 'ERR_JOSE_ALG_NOT_ALLOWED':
        return fail['algorithm not allowed'];
      case 'ERR_JWT_EXPIRED':
        return fail.expired;
      case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
        return fail['bad signature'];
      case 'ERR_JWKS_NO_MATCHING_KEY':
        return fail['unknown key'];
      case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
        if (e.claim === 'iss') return fail['wrong issuer'];
        if (e.claim === 'aud') return fail['wrong audience'];
        if (e.claim === 'nbf' && e.reason === 'check_failed') return fail['not yet valid'];
        return fail.malformed;
      default:
        return fail.malformed;
    }
  }
}

function checkAlgorithms(list: string[] | undefined): string[] {
  if (list === undefined) return [...DEFAULT_ALGORITHMS];
  if (!Array.isArray(list) || list.length === 0) {
    throw ConfigError.ofSetting('auth.oidc.algorithms', 'must be a non-empty list');
  }
  for (const alg of list) {
    if (typeof alg !== 'string') throw ConfigError.ofSetting('auth.oidc.algorithms', 'every entry must be a string');
    if (alg.toLowerCase() === 'none') {
      throw ConfigError.ofSetting('auth.oidc.algorithms', '"none" is never allowed (unsigned tokens)');
    }
    if (/^hs/i.test(alg)) {
      throw ConfigError.ofSetting('auth.oidc.algorithms', `${alg} is refused: HMAC algorithms let a public key act as a secret`);
    }
    if (!ASYMMETRIC_ALGORITHMS.includes(alg)) {
      throw ConfigError.ofSetting('auth.oidc.algorithms', `unsupported algorithm ${alg}`);
    }
  }
  return [...new Set(list)];
}

function checkNumber(name: string, v: number | undefined, dflt: number, min: number, integer: boolean): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw ConfigError.ofSetting(name, `must be ${integer ? 'an integer' : 'a number'} ≥ ${min}, got ${String(v)}`);
  }
  return v;
}

function readJwksFile(path: string): JSONWebKeySet {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? 'read failed';
    throw ConfigError.ofSetting('auth.oidc.jwksFile', `cannot read ${path} (${why})`);
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    throw ConfigError.ofSetting('auth.oidc.jwksFile', `${path} is not JSON`);
  }
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) {
    throw ConfigError.ofSetting('auth.oidc.jwksFile', `${path} is not a JWKS (no "keys" array, or it is empty)`);
  }
  for (const k of keys) {
    if (k !== null && typeof k === 'object' && ('d' in k || (k as { kty?: unknown }).kty === 'oct')) {
      throw ConfigError.ofSetting('auth.oidc.jwksFile', `${path} holds a private or symmetric key; give public keys only`);
    }
    const kty = (k as { kty?: unknown } | null)?.kty;
    if (kty !== 'RSA' && kty !== 'EC' && kty !== 'OKP') {
      throw ConfigError.ofSetting('auth.oidc.jwksFile', `${path} holds a key whose kty is ${JSON.stringify(kty ?? null)}; want RSA, EC or OKP public keys`);
    }
  }
  return jwks as JSONWebKeySet;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as object)) deepFreeze(v);
  }
  return value;
}
