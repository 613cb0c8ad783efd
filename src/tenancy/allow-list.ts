// `--allowed-tenants` (contract §4 step 5): an exact set of tenants this
// ingester accepts once resolution has named one. Empty means open.

import { ConfigError, tenantDenied, type IngestError } from '../errors.js';
import { isValidIdentifier } from './identifier.js';

export class AllowList {
  readonly #allowed: ReadonlySet<string> | undefined;
  readonly #denied: IngestError = tenantDenied('not_allowed', 'the tenant is not in --allowed-tenants');

  /** @param allowedTenants exact tenant ids (case-sensitive); empty means every tenant is allowed. */
  constructor(allowedTenants: readonly string[]) {
    for (const t of allowedTenants) {
      if (typeof t !== 'string' || !isValidIdentifier(t)) {
        throw ConfigError.ofSetting('ingester.allowedTenants', `${JSON.stringify(t)} is not a valid tenant identifier`);
      }
    }
    this.#allowed = allowedTenants.length === 0 ? undefined : new Set(allowedTenants);
  }

  /** True when no list is configured. */
  get open(): boolean {
    return this.#allowed === undefined;
  }

  /** True when `tenant` may write. */
  allows(tenant: string): boolean {
    return this.#allowed === undefined || this.#allowed.has(tenant);
  }

  /** Throws the 403 `not_allowed` denial when `tenant` is outside the list. */
  check(tenant: string): void {
    if (this.#allowed !== undefined && !this.#allowed.has(tenant)) throw this.#denied;
  }
}
