// The 401 refusal of the authentication step (contract §4 step 3, §6).
//
// The message is `unauthenticated: <reason>` and nothing else: a token, or any
// part of one, never reaches a message, a log line or a metric label. Callers
// match on `code` (SIGLAKE_UNAUTHENTICATED) and may use `authReason`, a small
// fixed set, for logs or a bounded metric label.

import { IngestError } from '../errors.js';

/** Why a credential was refused. A closed set: safe as a log field or a metric label. */
export type AuthFailureReason =
  | 'missing credentials'
  | 'wrong scheme'
  | 'empty token'
  | 'invalid token'
  | 'too large'
  | 'malformed'
  | 'algorithm not allowed'
  | 'unknown key'
  | 'bad signature'
  | 'expired'
  | 'not yet valid'
  | 'wrong issuer'
  | 'wrong audience';

export const AUTH_FAILURE_REASONS: readonly AuthFailureReason[] = [
  'missing credentials',
  'wrong scheme',
  'empty token',
  'invalid token',
  'too large',
  'malformed',
  'algorithm not allowed',
  'unknown key',
  'bad signature',
  'expired',
  'not yet valid',
  'wrong issuer',
  'wrong audience',
];

/**
 * A 401. Instances carry no request data, so each owner builds one per reason
 * up front (see {@link AuthError.table}) and rethrows it: refusing a flood of
 * bad credentials allocates no errors.
 */
export class AuthError extends IngestError {
  readonly authReason: AuthFailureReason;

  constructor(reason: AuthFailureReason) {
    super('SIGLAKE_UNAUTHENTICATED', `unauthenticated: ${reason}`, { label: reason });
    this.name = 'AuthError';
    this.authReason = reason;
  }

  /** One prebuilt error per reason, for an owner to keep in a private field. */
  static table(): Readonly<Record<AuthFailureReason, AuthError>> {
    const t = {} as Record<AuthFailureReason, AuthError>;
    for (const r of AUTH_FAILURE_REASONS) t[r] = new AuthError(r);
    return Object.freeze(t);
  }
}
