// Signs one JWT per tenant for the load generator, with a private key it is
// given (PEM in any form node:crypto reads, or a JWK as JSON). The algorithm
// follows from the key unless it is named: RSA → RS256, EC P-256/384/521 →
// ES256/384/512, Ed25519 → EdDSA.

import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SignJWT } from 'jose';
import { ConfigError } from '../errors.js';
import type { JwtOptions } from './loadgen-options.js';

const CURVE_ALG: Readonly<Record<string, string>> = { 'prime256v1': 'ES256', 'P-256': 'ES256', 'secp384r1': 'ES384', 'P-384': 'ES384', 'secp521r1': 'ES512', 'P-521': 'ES512' };

export class JwtSigner {
  readonly #key: KeyObject;
  readonly #alg: string;
  readonly #kid: string | undefined;
  readonly #o: JwtOptions;

  constructor(opts: JwtOptions) {
    this.#o = opts;
    let text: string;
    try {
      text = readFileSync(opts.keyFile, 'utf8');
    } catch (e) {
      throw new ConfigError(`--jwt-key: cannot read ${opts.keyFile}: ${(e as Error).message}`);
    }
    let jwk: { kid?: unknown; alg?: unknown } | undefined;
    try {
      if (text.trimStart().startsWith('{')) {
        jwk = JSON.parse(text) as { kid?: unknown; alg?: unknown };
        this.#key = createPrivateKey({ key: jwk as never, format: 'jwk' });
      } else {
        this.#key = createPrivateKey(text);
      }
    } catch (e) {
      throw new ConfigError(`--jwt-key: ${opts.keyFile} is not a private key (PEM or JWK): ${(e as Error).message}`);
    }
    this.#kid = opts.kid ?? (typeof jwk?.kid === 'string' ? jwk.kid : undefined);
    const named = opts.alg ?? (typeof jwk?.alg === 'string' ? jwk.alg : undefined);
    this.#alg = named ?? JwtSigner.#algOf(this.#key);
  }

  get alg(): string {
    return this.#alg;
  }

  static #algOf(key: KeyObject): string {
    const type = key.asymmetricKeyType;
    if (type === 'rsa') return 'RS256';
    if (type === 'ed25519') return 'EdDSA';
    if (type === 'ec') {
      const curve = key.asymmetricKeyDetails?.namedCurve ?? '';
      const alg = CURVE_ALG[curve];
      if (alg !== undefined) return alg;
      throw new ConfigError(`--jwt-key: EC curve ${curve} has no JWS algorithm; use P-256, P-384 or P-521`);
    }
    throw new ConfigError(`--jwt-key: ${type ?? 'unknown'} keys are not supported; use RSA, EC or Ed25519 (or name one with --jwt-alg)`);
  }

  /** A token whose tenant claim is `tenant`, valid from now for the configured lifetime. */
  async sign(tenant: string, subject: string): Promise<string> {
    const o = this.#o;
    const jwt = new SignJWT({ [o.claim]: tenant })
      .setProtectedHeader(this.#kid !== undefined ? { alg: this.#alg, kid: this.#kid, typ: 'JWT' } : { alg: this.#alg, typ: 'JWT' })
      .setSubject(subject)
      .setIssuedAt()
      .setExpirationTime(`${o.ttlSecs}s`);
    if (o.issuer !== undefined) jwt.setIssuer(o.issuer);
    if (o.audience !== undefined) jwt.setAudience(o.audience);
    return jwt.sign(this.#key);
  }
}
