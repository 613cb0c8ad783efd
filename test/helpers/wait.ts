// The one place tests wait: a plain sleep, and polling a condition with a
// deadline (tests wait on conditions, never on a guessed duration; the
// deadline only turns a hang into a failure that says what it waited for).

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every `everyMs` until it holds; throws, naming `what`, after `timeoutMs`. */
export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 10,
): Promise<void> {
  if (!(await holdsWithin(cond, timeoutMs, everyMs))) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** Polls `cond` every `everyMs`; whether it held within `timeoutMs` (for tests that assert either outcome). */
export async function holdsWithin(cond: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 10): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() > end) return false;
    await sleep(everyMs);
  }
}

/** Polls `fn` every `everyMs` until it returns a value, and returns it; throws, naming `what`, after `timeoutMs`. */
export async function untilValue<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
