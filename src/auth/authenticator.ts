// The authentication step of admission (contract §4 step 3).
//
// Mode, fixed at construction:
//   open    nothing configured: every request is anonymous, the header is ignored
//   oidc    `oidc` given (takes precedence over static tokens): a verified JWT
//   static  `bearerTokens` non-empty: one of the configured tokens
//
// `authenticate` is synchronous for open mode, static tokens and a JWT found in
// the verified-token cache; only a JWT that missed the cache returns a Promise.
// Refusals are AuthErrors (401) thrown synchronously for header problems and
// static tokens, or carried by the rejected Promise for a JWT miss.

import { AuthError, type AuthFailureReason } from './auth-error.js';
import { OidcVerifier, type OidcVerifierOptions } from './oidc-verifier.js';
import { StaticTokenAuth } from './static-tokens.js';

/** The outcome of authentication. `claims` are the verified, frozen JWT claims; undefined when open or static. */
export interface AuthResult {
  readonly claims: Record<string, unknown> | undefined;
}

export interface AuthenticatorOptions {
  /** Static tokens (flag/env list, or {@link loadTokenFile}); empty means none. */
  bearerTokens: string[];
  /** OIDC; when set it takes precedence and static tokens are not consulted. */
  oidc?: OidcVerifierOptions;
}

export type AuthMode = 'open' | 'static' | 'oidc';

const B = 0x62; // b
const E = 0x65; // e
const A = 0x61; // a
const R = 0x72; // r

export class Authenticator {
  readonly #mode: AuthMode;
  readonly #static: StaticTokenAuth | undefined;
  readonly #oidc: OidcVerifier | undefined;
  readonly #anonymous: AuthResult = Object.freeze({ claims: undefined });
  readonly #fail: Readonly<Record<AuthFailureReason, AuthError>> = AuthError.table();

  constructor(opts: AuthenticatorOptions) {
    if (opts.oidc !== undefined) {
      this.#mode = 'oidc';
      this.#oidc = new OidcVerifier(opts.oidc);
    } else if (opts.bearerTokens.length > 0) {
      this.#mode = 'static';
      this.#static = new StaticTokenAuth(opts.bearerTokens);
    } else {
      this.#mode = 'open';
    }
  }

  get mode(): AuthMode {
    return this.#mode;
  }

  /** The OIDC verifier, when in oidc mode (for its cache size and key source). */
  get oidc(): OidcVerifier | undefined {
    return this.#oidc;
  }

  /**
   * Authenticate one request from its `Authorization` header value.
   * Returns the result synchronously except for a JWT that missed the cache.
   * Throws (or rejects with) an AuthError 401; a JWKS outage rejects with
   * SIGLAKE_UNAVAILABLE 503.
   */
  authenticate(authorization: string | undefined): AuthResult | Promise<AuthResult> {
    const mode = this.#mode;
    if (mode === 'open') return this.#anonymous;
    const token = this.#bearer(authorization);
    if (mode === 'static') {
      if ((this.#static as StaticTokenAuth).verify(token)) return this.#anonymous;
      throw this.#fail['invalid token'];
    }
    const oidc = this.#oidc as OidcVerifier;
    const hit = oidc.lookup(token);
    if (hit !== undefined) return hit;
    return oidc.verify(token);
  }

  /** The token of `Bearer <token>` (scheme case-insensitive, spaces around the token ignored). */
  #bearer(header: string | undefined): string {
    if (header === undefined || header.length === 0) throw this.#fail['missing credentials'];
    const n = header.length;
    if (
      n < 6 ||
      (header.charCodeAt(0) | 0x20) !== B ||
      (header.charCodeAt(1) | 0x20) !== E ||
      (header.charCodeAt(2) | 0x20) !== A ||
      (header.charCodeAt(3) | 0x20) !== R ||
      (header.charCodeAt(4) | 0x20) !== E ||
      (header.charCodeAt(5) | 0x20) !== R
    ) {
      throw this.#fail['wrong scheme'];
    }
    if (n === 6) throw this.#fail['empty token'];
    if (header.charCodeAt(6) !== 0x20) throw this.#fail['wrong scheme'];
    let start = 7;
    while (start < n && header.charCodeAt(start) === 0x20) start++;
    let end = n;
    while (end > start && (header.charCodeAt(end - 1) === 0x20 || header.charCodeAt(end - 1) === 0x09)) end--;
    if (start === end) throw this.#fail['empty token'];
    return header.slice(start, end);
  }
}
