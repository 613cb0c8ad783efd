// Tenant resolution (contract §4 step 4, §5): which tenant an authenticated
// request writes to, or why it is refused.
//
// Mode, fixed at construction:
//   default  neither option: always `default`; an X-Scope-OrgID other than
//            exactly `default` is a 403 header_not_trusted.
//   header   trustTenantHeader: X-Scope-OrgID as set by a trusted gateway, or
//            `default` when absent; a value that breaks the identifier rule is
//            a 400 (a bad request, not a denial).
//   claim    tenantClaim (wins when both are set): the verified JWT's claim.
//            Absent: 403 claim_missing. Not a string, or not a valid
//            identifier: 403 claim_invalid (never sanitised, never defaulted).
//            X-Scope-OrgID present and not exactly the claim: 403 header_mismatch.
//
// Raw header problems come first and are a 400 in every mode: X-Scope-OrgID
// sent more than once (two fields, or a comma list: `acme,beta` is what a
// proxy or Node's HTTP/2 layer makes of two fields, and a comma is never part
// of an identifier), an empty value, or control characters (0x00-0x1F, 0x7F).
// None of them counts as a denial, on either transport (contract §5). An empty header is a 400 even in default mode, where any other
// non-`default` value is a 403: it names no tenant, so it is malformed rather
// than an attempt to route, and one rule for every mode keeps clients' errors
// predictable. Characters outside ASCII (a Cyrillic look-alike, say) are not
// raw-header faults; they simply fail the identifier rule, with each mode's
// usual answer (403 in default and claim mode, 400 in header mode).
//
// Every refusal is a prebuilt IngestError: resolving allocates nothing, and
// refusing a flood allocates nothing either. Messages never echo a value.

import { ConfigError, IngestError, tenantDenied } from '../errors.js';
import { DEFAULT_TENANT, isValidIdentifier } from './identifier.js';

export interface TenantResolverOptions {
  /** Route by X-Scope-OrgID as set by a trusted gateway. */
  trustTenantHeader: boolean;
  /** The verified JWT claim that names the tenant; wins over trustTenantHeader. */
  tenantClaim?: string;
}

export type TenantMode = 'default' | 'header' | 'claim';

/** 0: fine; 1: empty; 2: control character; 3: a comma (two values folded into one). */
function rawProblem(v: string): number {
  const n = v.length;
  if (n === 0) return 1;
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return 2;
    if (c === 0x2c) return 3;
  }
  return 0;
}

export class TenantResolver {
  readonly #mode: TenantMode;
  readonly #claim: string;
  readonly #twoOrgIds = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: X-Scope-OrgID sent more than once');
  readonly #emptyOrgId = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: X-Scope-OrgID is empty');
  readonly #controlOrgId = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: X-Scope-OrgID holds control characters');
  readonly #invalidOrgId = new IngestError(
    'SIGLAKE_BAD_HEADER',
    'bad header: X-Scope-OrgID is not a valid tenant identifier (1-128 of A-Z a-z 0-9 _ -, not a reserved name)',
  );
  readonly #twoIndexes = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: x-siglake-index sent more than once');
  readonly #invalidIndex = new IngestError(
    'SIGLAKE_BAD_HEADER',
    'bad header: x-siglake-index is not a valid index name (1-128 of A-Z a-z 0-9 _ -, not a reserved name)',
  );
  readonly #headerNotTrusted = tenantDenied(
    'header_not_trusted',
    'X-Scope-OrgID names a tenant other than default and this ingester does not route by it',
  );
  readonly #claimMissing = tenantDenied('claim_missing', 'the verified token has no tenant claim');
  readonly #claimInvalid = tenantDenied('claim_invalid', 'the tenant claim is not a valid tenant identifier');
  readonly #headerMismatch = tenantDenied('header_mismatch', 'X-Scope-OrgID differs from the tenant claim');

  constructor(opts: TenantResolverOptions) {
    if (opts.tenantClaim !== undefined) {
      if (typeof opts.tenantClaim !== 'string' || opts.tenantClaim === '') {
        throw ConfigError.ofSetting('ingester.tenantClaim', 'must be a non-empty claim name');
      }
      this.#mode = 'claim';
      this.#claim = opts.tenantClaim;
    } else {
      this.#mode = opts.trustTenantHeader ? 'header' : 'default';
      this.#claim = '';
    }
  }

  get mode(): TenantMode {
    return this.#mode;
  }

  /**
   * The tenant of a request, or throws: 400 SIGLAKE_BAD_HEADER for a malformed
   * header, 403 SIGLAKE_TENANT_DENIED (with `reason`) for a denial.
   *
   * @param orgIdHeader the X-Scope-OrgID value, undefined when absent
   * @param headerCount how many X-Scope-OrgID fields the request carried
   * @param claims the verified JWT claims (undefined when not authenticated by OIDC)
   */
  resolve(orgIdHeader: string | undefined, headerCount: number, claims: Record<string, unknown> | undefined): string {
    if (headerCount > 1) throw this.#twoOrgIds;
    if (orgIdHeader !== undefined) {
      const raw = rawProblem(orgIdHeader);
      if (raw !== 0) throw raw === 1 ? this.#emptyOrgId : raw === 2 ? this.#controlOrgId : this.#twoOrgIds;
    }
    switch (this.#mode) {
      case 'default':
        if (orgIdHeader === undefined || orgIdHeader === DEFAULT_TENANT) return DEFAULT_TENANT;
        throw this.#headerNotTrusted;
      case 'header':
        if (orgIdHeader === undefined) return DEFAULT_TENANT;
        if (isValidIdentifier(orgIdHeader)) return orgIdHeader;
        throw this.#invalidOrgId;
      case 'claim': {
        if (claims === undefined || !Object.hasOwn(claims, this.#claim)) throw this.#claimMissing;
        const tenant = claims[this.#claim];
        if (typeof tenant !== 'string' || !isValidIdentifier(tenant)) throw this.#claimInvalid;
        if (orgIdHeader !== undefined && orgIdHeader !== tenant) throw this.#headerMismatch;
        return tenant;
      }
    }
  }

  /**
   * The managed index named by `x-siglake-index`, undefined when absent (the
   * signal's default table). Same identifier rule as tenants; anything else,
   * including an empty value or a repeated header, is a 400.
   */
  resolveIndex(value: string | undefined, headerCount?: number): string | undefined {
    if (headerCount !== undefined && headerCount > 1) throw this.#twoIndexes;
    if (value === undefined) return undefined;
    if (isValidIdentifier(value)) return value;
    throw this.#invalidIndex;
  }
}
