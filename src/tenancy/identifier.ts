// The identifier rule shared by tenant ids and managed index names (contract §5):
// a non-empty string of at most 128 characters from A-Z a-z 0-9 _ -, and not a
// reserved WAL directory name (contract §7), compared case-insensitively.

export const MAX_IDENTIFIER_LENGTH = 128;

/** Directory names under the WAL root that can never be a tenant (contract §7). */
export const RESERVED_NAMES: readonly string[] = [
  'logs',
  'traces',
  'metrics',
  'indexes',
  'tmp',
  'checkpoints',
  'archive',
  'lost+found',
];

const RESERVED_LOWER: readonly string[] = RESERVED_NAMES.map((n) => n.toLowerCase());

/** Case-insensitive match against the reserved names, without allocating. */
function isReserved(s: string): boolean {
  const n = s.length;
  outer: for (const name of RESERVED_LOWER) {
    if (name.length !== n) continue;
    for (let i = 0; i < n; i++) {
      let c = s.charCodeAt(i);
      if (c >= 65 && c <= 90) c += 32;
      if (c !== name.charCodeAt(i)) continue outer;
    }
    return true;
  }
  return false;
}

export const DEFAULT_TENANT = 'default';

/** True when `s` is a usable identifier. Allocates nothing. */
export function isValidIdentifier(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > MAX_IDENTIFIER_LENGTH) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    const ok =
      (c >= 97 && c <= 122) || // a-z
      (c >= 65 && c <= 90) || // A-Z
      (c >= 48 && c <= 57) || // 0-9
      c === 95 || // _
      c === 45; // -
    if (!ok) return false;
  }
  return !isReserved(s);
}

/** The Iceberg namespace of a tenant: `main` for the default tenant, `tenant_<id>` otherwise. */
export function namespaceOf(tenant: string): string {
  return tenant === DEFAULT_TENANT ? 'main' : `tenant_${tenant}`;
}
