// What a synchronous call threw, checked to be of the expected class (a test
// that expects a refusal fails here if there was none, or another kind).

import { expect } from 'vitest';

export function thrown<E>(kind: abstract new (...args: never[]) => E, fn: () => unknown): E {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(kind);
  return caught as E;
}
