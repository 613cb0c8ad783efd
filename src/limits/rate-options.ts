// The rate options every RateBudget shares: ratePerSec (0 = off) and burst.

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
