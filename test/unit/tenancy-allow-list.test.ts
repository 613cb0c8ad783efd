// AllowList: --allowed-tenants (contract §4 step 5).

import { describe, expect, it } from 'vitest';
import { ConfigError, IngestError } from '../../src/errors.js';
import { AllowList } from '../../src/tenancy/allow-list.js';
import { thrown } from '../helpers/thrown.js';

function denial(fn: () => unknown): IngestError {
  return thrown(IngestError, fn);
}

describe('AllowList', () => {
  it('an empty list is open', () => {
    const open = new AllowList([]);
    expect(open.open).toBe(true);
    expect(open.allows('anything')).toBe(true);
    expect(() => open.check('acme')).not.toThrow();
  });

  it('a list admits exactly its members, case-sensitively', () => {
    const list = new AllowList(['acme', 'default']);
    expect(list.open).toBe(false);
    expect(() => list.check('acme')).not.toThrow();
    expect(() => list.check('default')).not.toThrow();
    expect(list.allows('beta')).toBe(false);
    for (const t of ['beta', 'ACME', 'acme2', 'acm']) {
      const err = denial(() => list.check(t));
      expect(err.code).toBe('SIGLAKE_TENANT_DENIED');
      expect(err.reason).toBe('not_allowed');
      expect(err.httpStatus).toBe(403);
    }
  });

  it('refuses entries that could never be a tenant', () => {
    for (const bad of ['', 'a/b', 'logs', 'Traces', 'x'.repeat(129)]) {
      expect(() => new AllowList(['acme', bad])).toThrow(ConfigError);
    }
  });
});
