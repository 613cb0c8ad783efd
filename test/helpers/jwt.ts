// JWTs for the tenancy integration tests: RSA and EC key pairs made here, tokens
// signed with them (and forged ones: alg none, HS256 keyed with the public key),
// a JWKS written to a file, and a JWKS served over HTTP on port 0 whose
// fetches are counted.

import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

export const ISSUER = 'https://idp.siglake.test';
export const AUDIENCE = 'siglake-ingest';

export interface KeyPair {
  readonly priv: CryptoKey;
  readonly pub: CryptoKey;
  /** The public JWK, with kid, alg and use. */
  readonly jwk: JWK;
  readonly alg: 'RS256' | 'ES256';
  readonly kid: string;
}

export async function makeKeyPair(alg: 'RS256' | 'ES256', kid: string): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { priv: privateKey, pub: publicKey, jwk, alg, kid };
}

export const nowSecs = (): number => Math.floor(Date.now() / 1000);

export interface MintOptions {
  /** `null` leaves the claim out. */
  iss?: string | null;
  aud?: string | null;
  exp?: number | null;
  nbf?: number;
  /** Header kid (default the key's). */
  kid?: string;
  sub?: string;
}

/** A JWT signed by `key` with `claims` plus iss/aud/exp/iat (overridable). */
export async function mint(key: KeyPair, claims: JWTPayload = {}, o: MintOptions = {}): Promise<string> {
  const jwt = new SignJWT({ sub: o.sub ?? 'svc-tenancy-tests', ...claims }).setProtectedHeader({
    alg: key.alg,
    kid: o.kid ?? key.kid,
    typ: 'JWT',
  });
  if (o.iss !== null) jwt.setIssuer(o.iss ?? ISSUER);
  if (o.aud !== null) jwt.setAudience(o.aud ?? AUDIENCE);
  if (o.exp !== null) jwt.setExpirationTime(o.exp ?? nowSecs() + 600);
  if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
  jwt.setIssuedAt();
  return jwt.sign(key.priv);
}

const b64url = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

function standardClaims(claims: JWTPayload): JWTPayload {
  return { sub: 'svc-forged', iss: ISSUER, aud: AUDIENCE, iat: nowSecs(), exp: nowSecs() + 600, ...claims };
}

/** An unsigned token: `alg: none`, empty signature. */
export function mintAlgNone(claims: JWTPayload = {}, kid?: string): string {
  const header = b64url({ alg: 'none', typ: 'JWT', ...(kid !== undefined ? { kid } : {}) });
  return `${header}.${b64url(standardClaims(claims))}.`;
}

/** The classic confusion attack: HS256 with the RSA public key (SPKI PEM) as the HMAC secret. */
export async function mintHs256WithPublicKey(key: KeyPair, claims: JWTPayload = {}): Promise<string> {
  const pem = await exportSPKI(key.pub);
  const header = b64url({ alg: 'HS256', typ: 'JWT', kid: key.kid });
  const payload = b64url(standardClaims(claims));
  const sig = createHmac('sha256', pem).update(`${header}.${payload}`).digest('base64url');
  return `${header}.${payload}.${sig}`;
}

/** Writes `{ keys }` as a JWKS file under `dir` and returns its path. */
export function writeJwksFile(dir: string, keys: JWK[], name = 'jwks.json'): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify({ keys }));
  return file;
}

/** A JWKS served at `/.well-known/jwks.json` on 127.0.0.1:<port 0>; fetches are counted. */
export class JwksServer {
  readonly server: Server;
  fetches = 0;
  keys: JWK[];
  #port = 0;

  private constructor(keys: JWK[]) {
    this.keys = keys;
    this.server = createServer((req, res) => {
      if (req.method !== 'GET' || req.url !== '/.well-known/jwks.json') {
        res.writeHead(404).end();
        return;
      }
      this.fetches++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys }));
    });
  }

  static async start(keys: JWK[]): Promise<JwksServer> {
    const s = new JwksServer(keys);
    await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
    s.#port = (s.server.address() as AddressInfo).port;
    return s;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}/.well-known/jwks.json`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/**
 * The pieces of `token` that must never show up in a response or a log line:
 * the whole token and, for a JWT, its payload and signature segments (at least
 * 8 characters each). The header segment is left out: it only says alg and
 * kid, and every token from one key shares it.
 */
export function secretParts(token: string): string[] {
  if (token.length === 0) return [];
  const segments = token.split('.');
  const parts = (segments.length === 3 ? segments.slice(1) : segments).filter((s) => s.length >= 8);
  return [token, ...parts];
}
