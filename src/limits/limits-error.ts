// Errors of the limits library. Callers match on `code`, never on the message.

export type LimitsErrorCode =
  /** A limit's parameter is out of range or cannot be represented; `param` names it. */
  | 'SIGLAKE_LIMITS_BAD_PARAM'
  /** A SharedArrayBuffer handed to `attach` is not a table this library made. */
  | 'SIGLAKE_LIMITS_BAD_BUFFER'
  /** The shared-budget backend (Redis) did not answer as expected. */
  | 'SIGLAKE_LIMITS_BACKEND';

export class LimitsError extends Error {
  readonly code: LimitsErrorCode;
  /** The option at fault (`ratePerSec`, `burst`, …) for SIGLAKE_LIMITS_BAD_PARAM. */
  readonly param: string | undefined;

  constructor(code: LimitsErrorCode, message: string, param?: string) {
    super(message);
    this.name = 'LimitsError';
    this.code = code;
    this.param = param;
  }
}
