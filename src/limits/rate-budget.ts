// The synchronous face of every rate limit implementation (contract §4 step 2).

/**
 * A rate budget: one global bucket, consulted before authentication, and one
 * bucket per resolved tenant, consulted after tenant resolution. Both takes are
 * synchronous and return 0 when the request is admitted, otherwise the whole
 * seconds (≥ 1) for `Retry-After`.
 */
export interface RateBudget {
  /** False when ratePerSec is 0: every take admits. */
  readonly enabled: boolean;
  /** Spend a token of the global bucket. */
  takeGlobal(): number;
  /** Spend a token of `tenant`'s bucket; `tenant` is the id tenant resolution produced (contract §5). */
  takeTenant(tenant: string): number;
  /** Release timers and connections. */
  close(): Promise<void>;
}
