// The tenants file and the resolution indexes (declared-tenants.md §1-2).

import { describe, expect, it } from 'vitest';
import { AMBIGUOUS, TenantIndex } from '../../src/tenants/tenant-index.js';
import { parseTenantsText, TenantsFileError } from '../../src/tenants/tenants-file.js';

function load(doc: unknown): TenantIndex {
  return new TenantIndex(parseTenantsText(JSON.stringify(doc), 'tenants.json'));
}

function refusal(doc: unknown, name = 'tenants.json'): string {
  try {
    const text = typeof doc === 'string' ? doc : JSON.stringify(doc);
    new TenantIndex(parseTenantsText(text, name));
  } catch (e) {
    expect(e).toBeInstanceOf(TenantsFileError);
    return (e as Error).message;
  }
  throw new Error('expected the file to be refused');
}

describe('tenants file validation', () => {
  it('accepts the spec example in YAML', () => {
    const idx = new TenantIndex(
      parseTenantsText(
        `tenants:
  - id: acme
    subjects:
      claims: { org_id: acme-prod }
    rateLimit: { requestsPerSec: 2000, burst: 4000 }
    budget: { period: day, records: 500000000, bytes: 200000000000 }
    indexes: [payments, audit]
`,
        'tenants.yaml',
      ),
    );
    expect(idx.size).toBe(1);
    const t = idx.byId('acme')!;
    expect(t.decl.rateLimit).toEqual({ requestsPerSec: 2000, burst: 4000 });
    expect(t.decl.budget).toEqual({ period: 'day', records: 500000000, bytes: 200000000000 });
    expect([...t.decl.indexes!]).toEqual(['payments', 'audit']);
  });

  it('names the tenant and the field of every refusal', () => {
    expect(refusal({ tenants: [{ id: 'acme' }] })).toMatch(/tenant "acme" subjects: required: at least one selector/);
    expect(refusal({ tenants: [{ id: 'acme', subjects: {} }] })).toMatch(/tenant "acme" subjects: required/);
    expect(refusal({ tenants: [{ id: 'a b', subjects: { subs: ['x'] } }] })).toMatch(/tenants\[0\]\.id/);
    expect(refusal({ tenants: [{ id: 'logs', subjects: { subs: ['x'] } }] })).toMatch(/tenants\[0\]\.id.*reserved/);
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, colour: 'red' }] })).toMatch(/tenant "acme": unknown field "colour"/);
    expect(refusal({ tenants: [{ id: 'acme', subjects: { claims: { org: 7 } } }] })).toMatch(/tenant "acme" subjects\.claims\.org: the value must be a non-empty string/);
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, rateLimit: { requestsPerSec: 0 } }] })).toMatch(
      /tenant "acme" rateLimit\.requestsPerSec/,
    );
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, rateLimit: { requestsPerSec: 1, burst: 5000 } }] })).toMatch(
      /tenant "acme" rateLimit\.burst/,
    );
    // Within 1073 s of refill, past what the bucket can represent at that rate: refused by the file, naming
    // the tenant (it was refused only when the ingester built the bucket, with neither tenant nor file).
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, rateLimit: { requestsPerSec: 1_000_000, burst: 4_000_000 } }] })).toMatch(
      /tenant "acme" rateLimit\.burst: burst 4000000 is too large for ratePerSec 1000000/,
    );
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, budget: { period: 'week', records: 1 } }] })).toMatch(
      /tenant "acme" budget\.period/,
    );
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, budget: { period: 'day' } }] })).toMatch(
      /tenant "acme" budget: needs records and\/or bytes/,
    );
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, budget: { period: 'day', bytes: -1 } }] })).toMatch(
      /tenant "acme" budget\.bytes/,
    );
    expect(refusal({ tenants: [{ id: 'acme', subjects: { subs: ['x'] }, indexes: ['ok', 'not ok'] }] })).toMatch(/tenant "acme" indexes\[1\]/);
    expect(
      refusal({
        tenants: [
          { id: 'acme', subjects: { subs: ['x'] } },
          { id: 'acme', subjects: { subs: ['y'] } },
        ],
      }),
    ).toMatch(/tenant "acme": id declared twice/);
    expect(refusal('tenants: [ {', 'tenants.yaml')).toMatch(/not valid YAML/);
    expect(refusal({ tenant: [] })).toMatch(/unknown field "tenant"/);
  });

  it('refuses overlap decidable from the file, naming both tenants', () => {
    expect(
      refusal({
        tenants: [
          { id: 'a', subjects: { claims: { org: 'x' } } },
          { id: 'b', subjects: { claims: { org: 'x' } } },
        ],
      }),
    ).toMatch(/tenants "a" and "b" overlap: both select claim org = "x"/);
    expect(
      refusal({
        tenants: [
          { id: 'a', subjects: { groups: ['g1', 'g2'] } },
          { id: 'b', subjects: { groups: ['g2'] } },
        ],
      }),
    ).toMatch(/tenants "a" and "b" overlap: both select group "g2"/);
    expect(
      refusal({
        tenants: [
          { id: 'a', subjects: { subs: ['svc'] } },
          { id: 'b', subjects: { claims: { sub: 'svc' } } },
        ],
      }),
    ).toMatch(/"a" and "b" overlap/);
    expect(
      refusal({
        tenants: [
          { id: 'a', subjects: { claims: { org: 'x' } } },
          { id: 'b', subjects: { claims: { org: 'x', env: 'prod' } } },
        ],
      }),
    ).toMatch(/"a" and "b" overlap/);
    expect(
      refusal({
        tenants: [
          { id: 'a', subjects: { claims: { org: 'x', env: 'prod' } } },
          { id: 'b', subjects: { claims: { env: 'prod', org: 'x' } } },
        ],
      }),
    ).toMatch(/"a" and "b" overlap: their subjects are identical/);
  });
});

describe('resolution', () => {
  const idx = load({
    tenants: [
      { id: 'acme', subjects: { claims: { org_id: 'acme-prod' } } },
      { id: 'globex', subjects: { groups: ['globex-writers', 'globex-ops'] } },
      { id: 'initech', subjects: { subs: ['svc-a', 'svc-b'] } },
      { id: 'hooli', subjects: { issuers: ['https://idp.hooli'], claims: { env: 'prod' } } },
    ],
  });

  it('resolves each selector shape', () => {
    expect(idx.resolve({ sub: 'u', org_id: 'acme-prod' })).toBe(idx.byId('acme'));
    expect(idx.resolve({ sub: 'u', groups: ['x', 'globex-ops'] })).toBe(idx.byId('globex'));
    expect(idx.resolve({ sub: 'svc-b' })).toBe(idx.byId('initech'));
    expect(idx.resolve({ sub: 'u', iss: 'https://idp.hooli', env: 'prod' })).toBe(idx.byId('hooli'));
    expect(idx.resolvePrincipal({ sub: 'u', org_id: 'acme-prod' })).toEqual({ kind: 'tenant', tenant: 'acme' });
  });

  it('a principal matching nothing has no declared tenant', () => {
    expect(idx.resolve(undefined)).toBeNull();
    expect(idx.resolve({ sub: 'u', org_id: 'other' })).toBeNull();
    expect(idx.resolve({ sub: 'u', iss: 'https://idp.hooli', env: 'dev' })).toBeNull();
    expect(idx.resolve({ sub: 'u', groups: 'globex-nope' })).toBeNull();
    expect(idx.resolve({ sub: 'u', org_id: ['acme-prod'] })).toBeNull(); // a list is no claim value
    expect(idx.resolve({ sub: 'u', org_id: { v: 'acme-prod' } })).toBeNull();
    expect(idx.resolve({ sub: 'u', org_id: null })).toBeNull();
    expect(idx.resolvePrincipal({ sub: 'nobody' })).toEqual({ kind: 'none' });
  });

  it('a principal matching two tenants is ambiguous, whatever the declaration order', () => {
    const claims = { sub: 'svc-a', org_id: 'acme-prod' };
    expect(idx.resolve(claims)).toBe(AMBIGUOUS);
    expect(idx.resolve({ sub: 'u', org_id: 'acme-prod', groups: ['globex-writers'] })).toBe(AMBIGUOUS);
    expect(idx.resolve({ sub: 'svc-a', iss: 'https://idp.hooli', env: 'prod' })).toBe(AMBIGUOUS);
    expect(idx.resolvePrincipal(claims)).toEqual({ kind: 'ambiguous' });
    const reversed = load({
      tenants: [
        { id: 'initech', subjects: { subs: ['svc-a', 'svc-b'] } },
        { id: 'acme', subjects: { claims: { org_id: 'acme-prod' } } },
      ],
    });
    expect(reversed.resolve(claims)).toBe(AMBIGUOUS);
  });

  it('a number or boolean claim matches the file\'s quoted value; one group may come as a plain string', () => {
    // The file can only hold strings ("quote numbers"); a token's org_id 42 fell through to undeclared
    // routing (default, or the claim's own 403), escaping the tenant's bucket and budget.
    const n = load({
      tenants: [
        { id: 'num', subjects: { claims: { org_id: '42' } } },
        { id: 'flag', subjects: { claims: { beta: 'true', env: 'prod' } } },
        { id: 'grp', subjects: { groups: ['ops'] } },
        { id: 'grp2', subjects: { groups: ['dev'], issuers: ['https://idp'] } },
      ],
    });
    expect(n.resolve({ sub: 'u', org_id: 42 })).toBe(n.byId('num'));
    expect(n.resolve({ sub: 'u', org_id: '42' })).toBe(n.byId('num'));
    expect(n.resolve({ sub: 'u', org_id: 42.5 })).toBeNull();
    // Past 2^53 JSON.parse rounds: 9007199254740993 in a token reads as 9007199254740992. Such a
    // number matches nothing, or one org's token would match another's tenant.
    const big = load({ tenants: [{ id: 'acme', subjects: { claims: { org_id: '9007199254740992' } } }] });
    expect(big.resolve(JSON.parse('{"sub":"mallory","org_id":9007199254740993}') as Record<string, unknown>)).toBeNull();
    expect(big.resolve({ sub: 'u', org_id: '9007199254740992' })).toBe(big.byId('acme'));
    expect(n.resolve({ sub: 'u', org_id: 4.2e1 })).toBe(n.byId('num'));
    expect(n.resolve({ sub: 'u', org_id: 420 })).toBeNull();
    expect(n.resolve({ sub: 'u', beta: true, env: 'prod' })).toBe(n.byId('flag'));
    expect(n.resolve({ sub: 'u', beta: false, env: 'prod' })).toBeNull();
    // As the Kubernetes API server reads its groups claim: a string or a list of strings.
    expect(n.resolve({ sub: 'u', groups: 'ops' })).toBe(n.byId('grp'));
    expect(n.resolve({ sub: 'u', groups: 'dev', iss: 'https://idp' })).toBe(n.byId('grp2'));
    expect(idx.resolve({ sub: 'u', groups: 'globex-ops' })).toBe(idx.byId('globex'));
    expect(n.resolve({ sub: 'u', groups: 'ops', org_id: 42 })).toBe(AMBIGUOUS);
  });

  it('two groups of one tenant are not ambiguous', () => {
    expect(idx.resolve({ sub: 'u', groups: ['globex-writers', 'globex-ops'] })).toBe(idx.byId('globex'));
  });

  it('memoizes the answer per frozen claims object, and only for frozen ones', () => {
    // Verified claims are deep-frozen by the verifier; the memo returns what the walk returned.
    const frozen = Object.freeze({ sub: 'u', groups: Object.freeze(['globex-ops']) });
    expect(idx.resolve(frozen)).toBe(idx.byId('globex'));
    expect(idx.resolve(frozen)).toBe(idx.byId('globex'));
    const ambiguous = Object.freeze({ sub: 'svc-a', org_id: 'acme-prod' });
    expect(idx.resolve(ambiguous)).toBe(AMBIGUOUS);
    expect(idx.resolve(ambiguous)).toBe(AMBIGUOUS);
    const none = Object.freeze({ sub: 'nobody' });
    expect(idx.resolve(none)).toBeNull();
    expect(idx.resolve(none)).toBeNull();
    // A mutable object (or a mutable groups list) is walked every time: a change is seen.
    const claims: Record<string, unknown> = { sub: 'u', org_id: 'acme-prod' };
    expect(idx.resolve(claims)).toBe(idx.byId('acme'));
    claims['org_id'] = 'other';
    expect(idx.resolve(claims)).toBeNull();
    const groups = ['globex-ops'];
    const shallow = Object.freeze({ sub: 'u', groups });
    expect(idx.resolve(shallow)).toBe(idx.byId('globex'));
    groups[0] = 'nothing';
    expect(idx.resolve(shallow)).toBeNull();
    // A reload builds a new index: its own memo, its own answer for the same object.
    const next = load({ tenants: [{ id: 'other', subjects: { groups: ['globex-ops'] } }] });
    expect(next.resolve(frozen)).toBe(next.byId('other'));
    expect(idx.resolve(frozen)).toBe(idx.byId('globex'));
  });

  it('resolves 10,000 tenants of both indexed shapes', () => {
    const tenants = [];
    for (let i = 0; i < 5000; i++) tenants.push({ id: `c${i}`, subjects: { claims: { org: `org-${i}` } } });
    for (let i = 0; i < 5000; i++) tenants.push({ id: `g${i}`, subjects: { groups: [`grp-${i}`] } });
    const big = load({ tenants });
    expect(big.compoundSelectors).toBe(0);
    expect(big.resolvePrincipal({ sub: 'u', org: 'org-4321' })).toEqual({ kind: 'tenant', tenant: 'c4321' });
    expect(big.resolvePrincipal({ sub: 'u', groups: ['zz', 'grp-77'] })).toEqual({ kind: 'tenant', tenant: 'g77' });
  });
});
