// Tenant routing of the query server (tenant-gate.ts) and the rendezvous
// choice of a shard (rendezvous.ts).

import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { QueryError } from '../../src/query/query-error.js';
import { pickShard } from '../../src/query/rendezvous.js';
import { TenantGate } from '../../src/query/tenant-gate.js';
import { TenantIndex } from '../../src/tenants/tenant-index.js';
import { parseTenantsText, TenantsFileError } from '../../src/tenants/tenants-file.js';

function denial(f: () => unknown): { status: number; reason: string | undefined } {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(QueryError);
    return { status: (e as QueryError).httpStatus, reason: (e as QueryError).reason };
  }
  throw new Error('no refusal');
}

describe('TenantGate', () => {
  it('without a claim every query reads the default tenant, whatever the token says', () => {
    const g = new TenantGate({ tenantClaim: undefined, allowedTenants: [] });
    expect(g.resolve(undefined)).toBe('default');
    expect(g.resolve({ tenant: 'acme' })).toBe('default');
  });

  it('with a claim: the claim, or 403 missing / invalid / unlisted', () => {
    const g = new TenantGate({ tenantClaim: 'tenant', allowedTenants: ['acme', 'default'] });
    expect(g.resolve({ tenant: 'acme' })).toBe('acme');
    expect(g.resolve({ tenant: 'default' })).toBe('default');
    expect(denial(() => g.resolve(undefined))).toEqual({ status: 403, reason: 'missing' });
    expect(denial(() => g.resolve({ other: 'acme' }))).toEqual({ status: 403, reason: 'missing' });
    for (const bad of ['', 'a b', '../x', 'LOGS', 'x'.repeat(129), 7, null, ['acme']]) {
      expect(denial(() => g.resolve({ tenant: bad }))).toEqual({ status: 403, reason: 'invalid' });
    }
    expect(denial(() => g.resolve({ tenant: 'globex' }))).toEqual({ status: 403, reason: 'unlisted' });
  });

  it('a reloaded tenants file applies from the next resolution; one that does not index keeps the old set', () => {
    const decls = (ids: [string, string][]) => parseTenantsText(JSON.stringify({ tenants: ids.map(([id, org]) => ({ id, subjects: { claims: { org_id: org } } })) }), 't.json');
    const g = new TenantGate({ tenantClaim: 'tenant', allowedTenants: [], declared: new TenantIndex(decls([['acme', 'a']])) });
    expect(g.declaredCount).toBe(1);
    expect(g.resolve({ org_id: 'u', tenant: 'globex' })).toBe('globex');
    expect(g.replaceDeclared(decls([['acme', 'a'], ['umbrella', 'u']]))).toEqual({ added: ['umbrella'], removed: [] });
    expect(g.resolve({ org_id: 'u', tenant: 'globex' })).toBe('umbrella');
    // Two tenants selecting the same claim value: refused, the previous set stays.
    expect(() => g.replaceDeclared(decls([['umbrella', 'u'], ['hooli', 'u']]))).toThrow(TenantsFileError);
    expect(g.declaredCount).toBe(2);
    expect(g.resolve({ org_id: 'u' })).toBe('umbrella');
    expect(g.replaceDeclared(decls([['umbrella', 'u']]))).toEqual({ added: [], removed: ['acme'] });
    expect(g.resolve({ org_id: 'a', tenant: 'globex' })).toBe('globex');
  });

  it('an allow-list without a claim, or with a bad identifier, is a configuration error', () => {
    expect(() => new TenantGate({ tenantClaim: undefined, allowedTenants: ['acme'] })).toThrow(ConfigError);
    expect(() => new TenantGate({ tenantClaim: 't', allowedTenants: ['a b'] })).toThrow(ConfigError);
  });
});

describe('pickShard (rendezvous hashing)', () => {
  const shards = ['http://q0:4380', 'http://q1:4380', 'http://q2:4380', 'http://q3:4380'];
  const tenants = Array.from({ length: 2000 }, (_, i) => `tenant-${i}`);

  it('is stable and independent of the order of the list', () => {
    for (const t of tenants.slice(0, 100)) expect(pickShard(t, [...shards].reverse())).toBe(pickShard(t, shards));
  });

  it('spreads tenants over every shard', () => {
    const counts = new Map<string, number>();
    for (const t of tenants) counts.set(pickShard(t, shards), (counts.get(pickShard(t, shards)) ?? 0) + 1);
    for (const s of shards) expect(counts.get(s)!).toBeGreaterThan(2000 / 4 / 2);
  });

  it('removing a shard moves only the tenants it had', () => {
    const fewer = shards.filter((s) => s !== 'http://q2:4380');
    for (const t of tenants) {
      const before = pickShard(t, shards);
      if (before !== 'http://q2:4380') expect(pickShard(t, fewer)).toBe(before);
    }
  });
});
