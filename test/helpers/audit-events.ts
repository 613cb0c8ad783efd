// The audit stream's JSON lines (docs/tenants.md "Audit"), as a test reads them.

import fs from 'node:fs';

export type AuditEvent = Record<string, unknown>;

/** Every event in `file` so far ([] when it does not exist yet). */
export function auditEvents(file: string): AuditEvent[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AuditEvent);
}
