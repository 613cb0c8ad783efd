// Query tenant routing (contract query §4, seed "Query routing"): which
// tenant's namespace a query reads, or why it is refused, decided from the
// verified token alone, before any planning, tenant context or engine
// connection exists.
//
//   no claim configured  every accepted query reads `main` (the default tenant),
//                        whatever the authentication mode
//   query.oidc.tenantClaim  the claim, under the ingest identifier rule:
//                        absent → 403 missing; not a usable identifier → 403 invalid;
//                        outside a non-empty query.allowedTenants → 403 unlisted
//
// With declared tenants (--tenants-file, declared-tenants.md §2) the verified
// principal is resolved through the tenants file first: a declared tenant is
// the query's (then the allow-list); a principal matching two tenants is a
// 403 SIGLAKE_TENANT_AMBIGUOUS; one matching none takes the claim routing
// above, exactly as without a file.
//
// The tenants file is reloaded on SIGHUP and when it changes, as on ingest
// (tenants-reloader.ts): replaceDeclared swaps the index in one reference; a
// request resolved before the swap keeps the tenant it got, the next one
// resolves against the new set. A file that does not load leaves the old set.
//
// The allow-list is the query server's own: ingester.allowedTenants is never
// read, so a tenant stopped from writing still reads within its retention.
//
// A declared tenant's `indexes` subset (indexesOf) hides its other indexes
// from every query API: its SQL, the table and index listings, the index API
// (declared-tenants.md §3: indistinguishable from an index that does not exist).

import { ConfigError } from '../errors.js';
import { DEFAULT_TENANT, isValidIdentifier } from '../tenancy/identifier.js';
import { TenantIndex } from '../tenants/tenant-index.js';
import type { TenantDecl } from '../tenants/tenants-file.js';
import { QueryError, type QueryDeniedReason } from './query-error.js';

export interface TenantGateOptions {
  readonly tenantClaim: string | undefined;
  readonly allowedTenants: readonly string[];
  /** The declared tenants (--tenants-file); undefined: none declared. */
  readonly declared?: TenantIndex | undefined;
}

export class TenantGate {
  readonly #claim: string | undefined;
  readonly #allowed: ReadonlySet<string> | undefined;
  #declared: TenantIndex | undefined;
  readonly #ambiguous = new QueryError(
    'SIGLAKE_TENANT_AMBIGUOUS',
    'tenant ambiguous: the verified principal matches more than one declared tenant; the operator must make the tenants file unambiguous',
  );
  readonly #denied: Readonly<Record<QueryDeniedReason, QueryError>> = {
    missing: new QueryError('SIGLAKE_TENANT_DENIED', 'tenant denied (missing): the verified token has no tenant claim', { reason: 'missing' }),
    invalid: new QueryError('SIGLAKE_TENANT_DENIED', 'tenant denied (invalid): the tenant claim is not a valid tenant identifier', {
      reason: 'invalid',
    }),
    unlisted: new QueryError('SIGLAKE_TENANT_DENIED', 'tenant denied (unlisted): the tenant is not in query.allowedTenants', { reason: 'unlisted' }),
  };

  constructor(opts: TenantGateOptions) {
    if (opts.allowedTenants.length > 0 && opts.tenantClaim === undefined) {
      throw new ConfigError('query.allowedTenants: needs query.oidc.tenantClaim (without a claim every query reads main)');
    }
    for (const t of opts.allowedTenants) {
      if (!isValidIdentifier(t)) throw ConfigError.ofSetting('query.allowedTenants', `${JSON.stringify(t)} is not a valid tenant identifier`);
    }
    this.#claim = opts.tenantClaim;
    this.#allowed = opts.allowedTenants.length === 0 ? undefined : new Set(opts.allowedTenants);
    this.#declared = opts.declared;
  }

  /** Tenants declared now (0 without a tenants file). */
  get declaredCount(): number {
    return this.#declared?.size ?? 0;
  }

  /**
   * A reloaded tenants file (already validated by readTenantsFile) in force
   * from the next request on. The index is built first: an overlap throws and
   * leaves the old set in force.
   */
  replaceDeclared(decls: readonly TenantDecl[]): { added: string[]; removed: string[] } {
    const next = new TenantIndex(decls);
    const before = new Set((this.#declared?.tenants ?? []).map((t) => t.id));
    const after = new Set(next.tenants.map((t) => t.id));
    this.#declared = next;
    return { added: [...after].filter((id) => !before.has(id)), removed: [...before].filter((id) => !after.has(id)) };
  }

  /** Each declared tenant's index subset (undefined: all of its indexes), for a reload's index_change events. */
  declaredSubsets(): Map<string, ReadonlySet<string> | undefined> {
    return new Map((this.#declared?.tenants ?? []).map((t) => [t.id, t.decl.indexes] as const));
  }

  /**
   * The declared index subset of `tenant` (declared-tenants.md §3), however
   * the tenant was resolved; undefined: all of its indexes (not declared, or
   * declared without `indexes`). Read per request, so a reload applies to the
   * next one.
   */
  indexesOf(tenant: string): ReadonlySet<string> | undefined {
    return this.#declared?.byId(tenant)?.decl.indexes;
  }

  /** The tenant of a query from its verified claims (undefined when not OIDC), or throws the 403. */
  resolve(claims: Readonly<Record<string, unknown>> | undefined): string {
    if (this.#declared !== undefined && claims !== undefined) {
      const r = this.#declared.resolvePrincipal(claims);
      if (r.kind === 'ambiguous') throw this.#ambiguous;
      if (r.kind === 'tenant') {
        if (this.#allowed !== undefined && !this.#allowed.has(r.tenant)) throw this.#denied.unlisted;
        return r.tenant;
      }
    }
    if (this.#claim === undefined) return DEFAULT_TENANT;
    if (claims === undefined || !Object.hasOwn(claims, this.#claim)) throw this.#denied.missing;
    const tenant = claims[this.#claim];
    if (typeof tenant !== 'string' || !isValidIdentifier(tenant)) throw this.#denied.invalid;
    if (this.#allowed !== undefined && !this.#allowed.has(tenant)) throw this.#denied.unlisted;
    return tenant;
  }
}
