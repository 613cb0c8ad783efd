// Tests that spend a day or month budget and expect its refusals (and a
// Retry-After to the period's end) must not straddle the end of that UTC
// period: at 00:00 UTC the budget starts again, a refusal expected next turns
// into an admission, and the shared counters' keys change name.

import { sleep } from './wait.js';

/** How close to a period's end clearOfUtcPeriodEnd() waits it out: longer than the tests it guards take. */
export const UTC_PERIOD_MARGIN_MS = 120_000;

/** The longest clearOfUtcPeriodEnd() sleeps: give the hook or test that calls it this much more time. */
export const UTC_PERIOD_WAIT_MAX_MS = UTC_PERIOD_MARGIN_MS + 2_000;

/** The first instant (ms) of the UTC day, or month, after the one holding `nowMs`. */
export function nextUtcPeriodStart(period: 'day' | 'month', nowMs = Date.now()): number {
  const d = new Date(nowMs);
  return period === 'day'
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/**
 * If the current UTC `period` ends within UTC_PERIOD_MARGIN_MS, sleeps until
 * just past its end (a bounded wait, at most UTC_PERIOD_WAIT_MAX_MS), so that
 * what follows runs within one period. Returns how long it slept.
 */
export async function clearOfUtcPeriodEnd(period: 'day' | 'month'): Promise<number> {
  const now = Date.now();
  const left = nextUtcPeriodStart(period, now) - now;
  if (left >= UTC_PERIOD_MARGIN_MS) return 0;
  const wait = left + 1_000;
  console.log(`[utc-period] ${Math.ceil(left / 1000)} s to the end of the UTC ${period}: waiting it out so that the test runs within one period`);
  await sleep(wait);
  return wait;
}
