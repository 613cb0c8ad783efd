// The limits library: rate budgets (in-process and Redis-shared), the memory
// breaker, and the shared-memory primitives beneath them. docs/limits.md.

export { BreakerFlag } from './breaker-flag.js';
export { LimitsError, type LimitsErrorCode } from './limits-error.js';
export { MemBreaker, type MemBreakerOptions } from './mem-breaker.js';
export type { RateBudget } from './rate-budget.js';
export { RateLimiter, type RateLimiterOptions } from './rate-limiter.js';
export { resolveGlobalRateOptions, resolveRateOptions, type ResolvedRateOptions } from './rate-options.js';
export { LEASE_SCRIPT, RedisBudget, type RedisBudgetOptions } from './redis-budget.js';
export { EVICTION_PROBES, TenantSlots } from './tenant-slots.js';
export { MAX_HORIZON_TICKS, MAX_RATE_PER_SEC, MAX_SLOTS, TokenBucketTable, type TokenBucketTableOptions } from './token-bucket-table.js';
