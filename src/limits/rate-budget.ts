// The face of every rate limit implementation (contract §4 step 2).

/**
 * A rate budget: one global bucket, consulted before authentication, and one
 * bucket per resolved tenant, consulted after tenant resolution. A take returns
 * 0 when the request is admitted, otherwise the whole seconds (≥ 1) for
 * `Retry-After`. In-process buckets always answer synchronously; a shared
 * budget answers with a Promise only when its local lease is spent and a lease
 * request to the backend is already on its way; the whole wait is bounded by
 * the command timeout, past which the request is admitted (and counted).
 */
export interface RateBudget {
  /** False when ratePerSec is 0: every take admits. */
  readonly enabled: boolean;
  /** Spend a token of the global bucket. */
  takeGlobal(): number | Promise<number>;
  /** Spend a token of `tenant`'s bucket; `tenant` is the id tenant resolution produced (contract §5). */
  takeTenant(tenant: string): number | Promise<number>;
  /** Release timers and connections. */
  close(): Promise<void>;
}
