// Resolution of a verified principal to at most one declared tenant
// (declared-tenants.md §2). Built once per load of the tenants file, immutable
// afterwards, so a reload swaps one reference and a request in flight keeps
// the set it started with.
//
// Two indexed selector shapes, keyed from opposite sides:
//   claim index  claim name → (required value → tenant): keyed by what the
//                tenant requires. A request reads each indexed claim name
//                once (a handful of names however many tenants) and looks
//                its value up: cost independent of the number of tenants.
//                `subs: [x]` and `issuers: [x]` are claim selectors on
//                `sub` and `iss`.
//   group index  group → tenant: keyed by what the principal holds. A
//                request looks up each group its `groups` claim lists.
// Everything else (several keys in one `subjects`, or several claims) is a
// compound selector, scanned after the indexes: keep those in the tens.
//
// Overlap decidable from the file (the same claim and value, the same group,
// two identical compound selectors, a compound selector that requires an
// indexed claim value or its only group) refuses the load and names both
// tenants. Overlap only a real principal reveals is reported per request as
// AMBIGUOUS, never settled by declaration order. Resolving allocates nothing
// but one memo entry on the first request of a token.
//
// Memo: verified claims are deep-frozen and the token cache hands the same
// object back for every request of a token, so the answer for one claims
// object never changes within one index. resolve() keeps it in a WeakMap keyed
// by the claims object (identity hash: no string hashing, one small table
// that stays in cache however many tenants are declared) and walks the
// indexes only on the first request of a token. A reload builds a new index,
// so a new memo; an entry goes when its claims object is collected (the token
// left the cache). Only frozen claims (and a frozen `groups` list) are
// memoized: a caller passing a mutable object gets a fresh resolution each time.

import { GROUPS_CLAIM, TenantsFileError, type SubjectsDecl, type TenantDecl } from './tenants-file.js';

export interface DeclaredTenant {
  readonly id: string;
  /** Position in the file (0-based); stable only within one snapshot. */
  readonly ord: number;
  readonly decl: TenantDecl;
}

/** Returned by resolve() when the principal matches two or more tenants. */
export const AMBIGUOUS: unique symbol = Symbol('ambiguous tenant');
export type Resolution = DeclaredTenant | null | typeof AMBIGUOUS;

/** The transport-agnostic answer, for callers off the hot path (the query server). */
export type ResolveResult =
  | { kind: 'tenant'; tenant: string }
  | { kind: 'none' }
  | { kind: 'ambiguous' };

interface Compound {
  readonly tenant: DeclaredTenant;
  readonly claimNames: readonly string[];
  readonly claimValues: readonly string[];
  readonly groups: readonly string[];
  readonly issuers: readonly string[];
  readonly subs: readonly string[];
}

function indexedShape(s: SubjectsDecl): { claim: string; values: readonly string[] } | { group: readonly string[] } | undefined {
  const kinds = (s.claims.size > 0 ? 1 : 0) + (s.groups.length > 0 ? 1 : 0) + (s.issuers.length > 0 ? 1 : 0) + (s.subs.length > 0 ? 1 : 0);
  if (kinds !== 1) return undefined;
  if (s.claims.size === 1) {
    const [k, v] = s.claims.entries().next().value as [string, string];
    return { claim: k, values: [v] };
  }
  if (s.claims.size > 1) return undefined;
  if (s.groups.length > 0) return { group: s.groups };
  if (s.subs.length > 0) return { claim: 'sub', values: s.subs };
  return { claim: 'iss', values: s.issuers };
}

function canonical(s: SubjectsDecl): string {
  const claims = [...s.claims.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return JSON.stringify([claims, [...s.groups].sort(), [...s.issuers].sort(), [...s.subs].sort()]);
}

export class TenantIndex {
  readonly tenants: readonly DeclaredTenant[];
  readonly #byId = new Map<string, DeclaredTenant>();
  readonly #claimNames: string[] = [];
  readonly #claimMaps: Map<string, DeclaredTenant>[] = [];
  readonly #groups = new Map<string, DeclaredTenant>();
  readonly #compound: Compound[] = [];
  readonly #memo: WeakMap<object, Resolution> | null;

  /** `opts.memo` false: no per-claims memo (perf/tenants-resolve.bench.ts compares both). */
  constructor(decls: readonly TenantDecl[], opts?: { memo?: boolean }) {
    this.#memo = opts?.memo === false ? null : new WeakMap();
    const tenants: DeclaredTenant[] = decls.map((decl, ord) => ({ id: decl.id, ord, decl }));
    this.tenants = tenants;
    const claimIdx = new Map<string, Map<string, DeclaredTenant>>();
    const compounds: DeclaredTenant[] = [];
    for (const t of tenants) {
      this.#byId.set(t.id, t);
      const shape = indexedShape(t.decl.subjects);
      if (shape === undefined) {
        compounds.push(t);
      } else if ('group' in shape) {
        for (const g of shape.group) {
          const other = this.#groups.get(g);
          if (other !== undefined) throw overlap(other, t, `both select group "${g}"`);
          this.#groups.set(g, t);
        }
      } else {
        let m = claimIdx.get(shape.claim);
        if (m === undefined) claimIdx.set(shape.claim, (m = new Map()));
        for (const v of shape.values) {
          const other = m.get(v);
          if (other !== undefined) throw overlap(other, t, `both select claim ${shape.claim} = "${v}"`);
          m.set(v, t);
        }
      }
    }
    for (const [name, m] of claimIdx) {
      this.#claimNames.push(name);
      this.#claimMaps.push(m);
    }
    if (compounds.length > 256) {
      throw new TenantsFileError(`${compounds.length} compound selectors (several keys in one subjects): at most 256, they are scanned per request`);
    }
    const seen = new Map<string, DeclaredTenant>();
    for (const t of compounds) {
      const s = t.decl.subjects;
      const key = canonical(s);
      const same = seen.get(key);
      if (same !== undefined) throw overlap(same, t, 'their subjects are identical');
      seen.set(key, t);
      // A compound selector requiring a value an indexed tenant selects on
      // can never match a principal that tenant does not also match.
      for (const [k, v] of s.claims) {
        const other = claimIdx.get(k)?.get(v);
        if (other !== undefined) throw overlap(other, t, `every principal of "${t.id}" has claim ${k} = "${v}", which "${other.id}" selects`);
      }
      const single: [string, readonly string[]][] = [
        ['sub', s.subs],
        ['iss', s.issuers],
      ];
      for (const [k, vals] of single) {
        const other = vals.length === 1 ? claimIdx.get(k)?.get(vals[0]!) : undefined;
        if (other !== undefined) throw overlap(other, t, `every principal of "${t.id}" has ${k} = "${vals[0]}", which "${other.id}" selects`);
      }
      if (s.groups.length === 1) {
        const other = this.#groups.get(s.groups[0]!);
        if (other !== undefined) throw overlap(other, t, `every principal of "${t.id}" holds group "${s.groups[0]}", which "${other.id}" selects`);
      }
      this.#compound.push({
        tenant: t,
        claimNames: [...s.claims.keys()],
        claimValues: [...s.claims.values()],
        groups: s.groups,
        issuers: s.issuers,
        subs: s.subs,
      });
    }
  }

  get size(): number {
    return this.tenants.length;
  }

  get compoundSelectors(): number {
    return this.#compound.length;
  }

  byId(id: string): DeclaredTenant | undefined {
    return this.#byId.get(id);
  }

  /**
   * The declared tenant of a verified principal: the tenant, null when it
   * matches none (routed as before tenants existed), or AMBIGUOUS. Allocates
   * nothing once the claims object was seen (see Memo above).
   */
  resolve(claims: Readonly<Record<string, unknown>> | undefined): Resolution {
    if (claims === undefined) return null;
    const memo = this.#memo;
    if (memo === null) return this.#walk(claims);
    const known = memo.get(claims);
    if (known !== undefined) return known;
    const r = this.#walk(claims);
    if (immutable(claims)) memo.set(claims, r);
    return r;
  }

  /** Resolution through the indexes and the compound scan. */
  #walk(claims: Readonly<Record<string, unknown>>): Resolution {
    let found: DeclaredTenant | null = null;
    const names = this.#claimNames;
    for (let i = 0; i < names.length; i++) {
      const v = claimText(claims[names[i]!]);
      if (v === undefined) continue;
      const t = this.#claimMaps[i]!.get(v);
      if (t === undefined) continue;
      if (found !== null && found !== t) return AMBIGUOUS;
      found = t;
    }
    if (this.#groups.size > 0) {
      const held = claims[GROUPS_CLAIM];
      if (Array.isArray(held)) {
        for (let i = 0; i < held.length; i++) {
          const g: unknown = held[i];
          if (typeof g !== 'string') continue;
          const t = this.#groups.get(g);
          if (t === undefined) continue;
          if (found !== null && found !== t) return AMBIGUOUS;
          found = t;
        }
      } else if (typeof held === 'string') {
        // An identity provider's one group as a plain string (some send a list only for two or more).
        const t = this.#groups.get(held);
        if (t !== undefined) {
          if (found !== null && found !== t) return AMBIGUOUS;
          found = t;
        }
      }
    }
    const comp = this.#compound;
    for (let i = 0; i < comp.length; i++) {
      const c = comp[i]!;
      if (c.tenant === found || !matches(c, claims)) continue;
      if (found !== null) return AMBIGUOUS;
      found = c.tenant;
    }
    return found;
  }

  /** resolve() as a plain value, for callers off the hot path. */
  resolvePrincipal(claims: Readonly<Record<string, unknown>> | undefined): ResolveResult {
    const r = this.resolve(claims);
    if (r === AMBIGUOUS) return { kind: 'ambiguous' };
    if (r === null) return { kind: 'none' };
    return { kind: 'tenant', tenant: r.id };
  }
}

/** Whether the answer for `claims` can never change: the object and its `groups` list are frozen. */
function immutable(claims: Readonly<Record<string, unknown>>): boolean {
  if (!Object.isFrozen(claims)) return false;
  const g = claims[GROUPS_CLAIM];
  return g === null || typeof g !== 'object' || Object.isFrozen(g);
}

/**
 * A claim's value as the file's (string) values are compared with it: a
 * string as it is, a safe integer or a boolean in its JSON spelling
 * (`org_id: 42` in a token matches `org_id: "42"` in the file, the only way
 * the file can write it); anything else (a fraction, an integer past 2^53,
 * an object, a list, null) matches nothing.
 */
function claimText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  // Only a safe integer: JSON.parse rounds a larger one, or a long decimal, to a double that
  // another number's text shares (9007199254740993 reads as 9007199254740992), and a token
  // naming one org would match another's tenant.
  if ((typeof v === 'number' && Number.isSafeInteger(v)) || typeof v === 'boolean') return String(v);
  return undefined;
}

function includes(list: readonly string[], v: unknown): boolean {
  if (typeof v !== 'string') return false;
  for (let i = 0; i < list.length; i++) if (list[i] === v) return true;
  return false;
}

function matches(c: Compound, claims: Readonly<Record<string, unknown>>): boolean {
  for (let i = 0; i < c.claimNames.length; i++) {
    if (claimText(claims[c.claimNames[i]!]) !== c.claimValues[i]) return false;
  }
  if (c.issuers.length > 0 && !includes(c.issuers, claims['iss'])) return false;
  if (c.subs.length > 0 && !includes(c.subs, claims['sub'])) return false;
  if (c.groups.length > 0) {
    const held = claims[GROUPS_CLAIM];
    if (typeof held === 'string') return includes(c.groups, held);
    if (!Array.isArray(held)) return false;
    let any = false;
    for (let i = 0; i < held.length && !any; i++) any = includes(c.groups, held[i]);
    if (!any) return false;
  }
  return true;
}

function overlap(a: DeclaredTenant, b: DeclaredTenant, why: string): TenantsFileError {
  return new TenantsFileError(`tenants "${a.id}" and "${b.id}" overlap: ${why} (a principal belongs to at most one tenant)`);
}
