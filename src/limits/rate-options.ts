// The rate options every RateBudget shares: ratePerSec (0 = off) and burst for
// the tenant buckets, and globalRatePerSec / globalBurst for the global bucket
// (off unless globalRatePerSec is set: contract §9).

import { LimitsError } from './limits-error.js';

export interface ResolvedRateOptions {
  ratePerSec: number;
  burst: number;
}

/** Validate ratePerSec (finite, ≥ 0) and apply the default burst: ratePerSec rounded up, at least 1 (contract §2). */
export function resolveRateOptions(ratePerSec: number, burst: number | undefined): ResolvedRateOptions {
  if (typeof ratePerSec !== 'number' || !Number.isFinite(ratePerSec) || ratePerSec < 0) {
    throw new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', `ratePerSec must be a finite number ≥ 0, got ${String(ratePerSec)}`, 'ratePerSec');
  }
  return { ratePerSec, burst: burst ?? Math.max(1, Math.ceil(ratePerSec)) };
}

/**
 * The global bucket's parameters, given the tenant buckets' (already resolved).
 * globalRatePerSec defaults to 0: no global bucket (contract §9), so one
 * tenant spending its own bucket never refuses another. globalBurst defaults
 * to the global rate rounded up, at least 1. A global rate while ratePerSec is
 * 0 (the limiter off) is refused with `param` 'globalRatePerSec'.
 */
export function resolveGlobalRateOptions(
  tenant: ResolvedRateOptions,
  globalRatePerSec: number | undefined,
  globalBurst: number | undefined,
): ResolvedRateOptions {
  const rate = globalRatePerSec ?? 0;
  if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < 0) {
    throw new LimitsError(
      'SIGLAKE_LIMITS_BAD_PARAM',
      `globalRatePerSec must be a finite number ≥ 0, got ${String(rate)}`,
      'globalRatePerSec',
    );
  }
  if (rate > 0 && tenant.ratePerSec === 0) {
    throw new LimitsError(
      'SIGLAKE_LIMITS_BAD_PARAM',
      `globalRatePerSec must be 0 while ratePerSec is 0 (the limiter is off), got ${rate}`,
      'globalRatePerSec',
    );
  }
  const burst = globalBurst ?? Math.max(1, Math.ceil(rate));
  return { ratePerSec: rate, burst };
}
