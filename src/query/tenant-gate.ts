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
// The allow-list is the query server's own: ingester.allowedTenants is never
// read, so a tenant stopped from writing still reads within its retention.

import { ConfigError } from '../errors.js';
import { DEFAULT_TENANT, isValidIdentifier } from '../tenancy/identifier.js';
import { QueryError, type QueryDeniedReason } from './query-error.js';

export interface TenantGateOptions {
  readonly tenantClaim: string | undefined;
  readonly allowedTenants: readonly string[];
}

export class TenantGate {
  readonly #claim: string | undefined;
  readonly #allowed: ReadonlySet<string> | undefined;
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
  }

  /** The tenant of a query from its verified claims (undefined when not OIDC), or throws the 403. */
  resolve(claims: Readonly<Record<string, unknown>> | undefined): string {
    if (this.#claim === undefined) return DEFAULT_TENANT;
    if (claims === undefined || !Object.hasOwn(claims, this.#claim)) throw this.#denied.missing;
    const tenant = claims[this.#claim];
    if (typeof tenant !== 'string' || !isValidIdentifier(tenant)) throw this.#denied.invalid;
    if (this.#allowed !== undefined && !this.#allowed.has(tenant)) throw this.#denied.unlisted;
    return tenant;
  }
}
