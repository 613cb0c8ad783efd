// TenantResolver: every row of contract §5, the bad-header rows of the
// reliability spec, and x-siglake-index.

import { describe, expect, it } from 'vitest';
import { ConfigError, IngestError, type TenantDeniedReason } from '../../src/errors.js';
import { RESERVED_NAMES } from '../../src/tenancy/identifier.js';
import { TenantResolver } from '../../src/tenancy/tenant-resolver.js';
import { thrown } from '../helpers/thrown.js';

const defaultMode = new TenantResolver({ trustTenantHeader: false });
const headerMode = new TenantResolver({ trustTenantHeader: true });
const claimMode = new TenantResolver({ trustTenantHeader: false, tenantClaim: 'org' });
const bothSet = new TenantResolver({ trustTenantHeader: true, tenantClaim: 'org' });

const MAX = 'a'.repeat(128);
const TOO_LONG = 'a'.repeat(129);
const CYRILLIC_A = '\u0430'; // looks like Latin 'a'
const LOOKALIKE_DEFAULT = `def${CYRILLIC_A}ult`;
const LOOKALIKE_ACME = `${CYRILLIC_A}cme`;

function mixedCase(s: string): string[] {
  const alt = [...s].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c.toLowerCase())).join('');
  return [s.toUpperCase(), alt, s[0].toUpperCase() + s.slice(1)];
}

function refusal(fn: () => unknown): IngestError {
  return thrown(IngestError, fn);
}

function expectBadHeader(fn: () => unknown): void {
  const err = refusal(fn);
  expect(err.code).toBe('SIGLAKE_BAD_HEADER');
  expect(err.httpStatus).toBe(400);
  expect(err.grpcCode).toBe(3);
  expect(err.reason).toBeUndefined();
}

function expectDenied(fn: () => unknown, reason: TenantDeniedReason): void {
  const err = refusal(fn);
  expect(err.code).toBe('SIGLAKE_TENANT_DENIED');
  expect(err.httpStatus).toBe(403);
  expect(err.grpcCode).toBe(7);
  expect(err.reason).toBe(reason);
  expect(err.message).toContain(reason);
}

describe('TenantResolver modes', () => {
  it('derives the mode; the claim wins when both are set', () => {
    expect(defaultMode.mode).toBe('default');
    expect(headerMode.mode).toBe('header');
    expect(claimMode.mode).toBe('claim');
    expect(bothSet.mode).toBe('claim');
    expect(() => new TenantResolver({ trustTenantHeader: false, tenantClaim: '' })).toThrow(ConfigError);
  });
});

describe('default mode', () => {
  it('always resolves to default; a header naming exactly default is harmless', () => {
    expect(defaultMode.resolve(undefined, 0, undefined)).toBe('default');
    expect(defaultMode.resolve('default', 1, undefined)).toBe('default');
    expect(defaultMode.resolve(undefined, 0, { org: 'acme' })).toBe('default');
  });

  it('any other header value → 403 header_not_trusted', () => {
    const values = ['acme', 'DEFAULT', 'Default', ' default', MAX, TOO_LONG, '../x', 'a/b', LOOKALIKE_DEFAULT, 'logs', '.hidden'];
    for (const v of values) expectDenied(() => defaultMode.resolve(v, 1, undefined), 'header_not_trusted');
    for (const name of RESERVED_NAMES) {
      for (const v of mixedCase(name)) expectDenied(() => defaultMode.resolve(v, 1, undefined), 'header_not_trusted');
    }
  });

  it('raw header problems → 400, even for default', () => {
    expectBadHeader(() => defaultMode.resolve('', 1, undefined));
    expectBadHeader(() => defaultMode.resolve('default', 2, undefined));
    expectBadHeader(() => defaultMode.resolve('acme', 2, undefined));
    expectBadHeader(() => defaultMode.resolve('def\nault', 1, undefined));
    expectBadHeader(() => defaultMode.resolve('acme\u0000', 1, undefined));
    expectBadHeader(() => defaultMode.resolve('acme\u007f', 1, undefined));
    expectBadHeader(() => defaultMode.resolve('a\tb', 1, undefined));
  });
});

describe('trusted-header mode', () => {
  it('routes by the header, or default when absent', () => {
    expect(headerMode.resolve(undefined, 0, undefined)).toBe('default');
    expect(headerMode.resolve('default', 1, undefined)).toBe('default');
    expect(headerMode.resolve('acme', 1, undefined)).toBe('acme');
    expect(headerMode.resolve('Team_A-42', 1, undefined)).toBe('Team_A-42');
    expect(headerMode.resolve(MAX, 1, undefined)).toBe(MAX);
    // Claims play no part in header mode.
    expect(headerMode.resolve('acme', 1, { org: 'other' })).toBe('acme');
  });

  it('an invalid identifier → 400, not a denial', () => {
    for (const v of [TOO_LONG, '../x', 'a/b', '.hidden', 'a b', 'a.b', 'lost+found', LOOKALIKE_ACME, 'acme,beta']) {
      expectBadHeader(() => headerMode.resolve(v, 1, undefined));
    }
  });

  it('every reserved name, in any case → 400', () => {
    for (const name of RESERVED_NAMES) {
      for (const v of [name, ...mixedCase(name)]) expectBadHeader(() => headerMode.resolve(v, 1, undefined));
    }
  });

  it('raw header problems → 400', () => {
    expectBadHeader(() => headerMode.resolve('', 1, undefined));
    expectBadHeader(() => headerMode.resolve('acme', 2, undefined));
    expectBadHeader(() => headerMode.resolve('ac\rme', 1, undefined));
  });
});

describe('claim mode', () => {
  it('routes by the verified claim', () => {
    expect(claimMode.resolve(undefined, 0, { org: 'acme' })).toBe('acme');
    expect(claimMode.resolve(undefined, 0, { org: 'default' })).toBe('default');
    expect(claimMode.resolve(undefined, 0, { org: MAX })).toBe(MAX);
    expect(claimMode.resolve('acme', 1, { org: 'acme' })).toBe('acme');
  });

  it('claim absent → 403 claim_missing (no claims at all, or not an own property)', () => {
    expectDenied(() => claimMode.resolve(undefined, 0, undefined), 'claim_missing');
    expectDenied(() => claimMode.resolve(undefined, 0, {}), 'claim_missing');
    expectDenied(() => claimMode.resolve(undefined, 0, { tenant: 'acme' }), 'claim_missing');
    const protoClaim = new TenantResolver({ trustTenantHeader: false, tenantClaim: 'toString' });
    expectDenied(() => protoClaim.resolve(undefined, 0, {}), 'claim_missing');
    // A header never stands in for a missing claim.
    expectDenied(() => claimMode.resolve('acme', 1, {}), 'claim_missing');
  });

  it('claim not a string or not an identifier → 403 claim_invalid, never sanitised or defaulted', () => {
    const bad: unknown[] = [42, 0, ['acme'], { id: 'acme' }, null, true, '', TOO_LONG, '../x', 'a/b', 'acme ', LOOKALIKE_ACME];
    for (const name of RESERVED_NAMES) bad.push(...mixedCase(name));
    for (const org of bad) expectDenied(() => claimMode.resolve(undefined, 0, { org }), 'claim_invalid');
    // Even a header naming a valid tenant does not rescue it.
    expectDenied(() => claimMode.resolve('acme', 1, { org: 'ac/me' }), 'claim_invalid');
  });

  it('header present and not exactly the claim → 403 header_mismatch', () => {
    for (const h of ['beta', 'ACME', 'default', LOOKALIKE_ACME, '../x']) {
      expectDenied(() => claimMode.resolve(h, 1, { org: 'acme' }), 'header_mismatch');
    }
  });

  it('when both options are set the claim rules apply', () => {
    expect(bothSet.resolve(undefined, 0, { org: 'acme' })).toBe('acme');
    expect(bothSet.resolve('acme', 1, { org: 'acme' })).toBe('acme');
    expectDenied(() => bothSet.resolve('beta', 1, { org: 'acme' }), 'header_mismatch');
    expectDenied(() => bothSet.resolve('beta', 1, undefined), 'claim_missing');
  });

  it('raw header problems → 400 before any claim check', () => {
    expectBadHeader(() => claimMode.resolve('', 1, { org: 'acme' }));
    expectBadHeader(() => claimMode.resolve('acme', 2, { org: 'acme' }));
    expectBadHeader(() => claimMode.resolve('ac\u0001me', 1, undefined));
  });
});

describe('refusals', () => {
  it('reuse one error per cause and never echo the value', () => {
    const a = refusal(() => defaultMode.resolve('secret-tenant-a', 1, undefined));
    const b = refusal(() => defaultMode.resolve('secret-tenant-b', 1, undefined));
    expect(a).toBe(b);
    expect(a.message).not.toContain('secret-tenant');
    const c = refusal(() => headerMode.resolve('bad/value', 1, undefined));
    expect(c.message).not.toContain('bad/value');
  });
});

describe('resolveIndex', () => {
  it('absent → undefined; a valid name passes', () => {
    expect(defaultMode.resolveIndex(undefined)).toBeUndefined();
    expect(claimMode.resolveIndex('errors')).toBe('errors');
    expect(headerMode.resolveIndex(MAX, 1)).toBe(MAX);
  });

  it('anything breaking the identifier rule → 400', () => {
    for (const v of ['', TOO_LONG, '../x', 'a/b', '.x', LOOKALIKE_ACME, 'a\nb', 'a b']) {
      expectBadHeader(() => defaultMode.resolveIndex(v));
    }
    for (const name of RESERVED_NAMES) {
      for (const v of [name, ...mixedCase(name)]) expectBadHeader(() => headerMode.resolveIndex(v));
    }
    expectBadHeader(() => headerMode.resolveIndex('errors', 2));
  });
});
