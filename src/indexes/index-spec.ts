// An index definition (contract §6, docs/indexes.md): its name, its retention
// and its mapping (typed columns extracted at compaction). Parsed from the
// YAML or JSON a user writes; every rule is checked here, with a message that
// names the offending field, before anything touches the catalog.

import { parse as parseYaml } from 'yaml';
import { TableSchema } from '../iceberg/table-schema.js';
import { isValidIdentifier } from '../tenancy/identifier.js';
import { IndexError } from './index-error.js';

export const MAPPED_TYPES = ['string', 'long', 'double', 'boolean', 'timestamp'] as const;
export type MappedType = (typeof MAPPED_TYPES)[number];

export interface MappingEntry {
  readonly column: string;
  /** `attributes.<key>`, `resource.<key>`, `scope.<key>` or `body`. */
  readonly from: string;
  readonly type: MappedType;
}

export interface IndexSpec {
  readonly name: string;
  /** 0 = keep forever. */
  readonly retentionDays: number;
  readonly mapping: readonly MappingEntry[];
}

export const MAX_MAPPED_COLUMNS = 200;
export const MAX_RETENTION_DAYS = 36_500;
export const MAX_SOURCE_KEY_LENGTH = 256;
/** Names a mapped column can never take: the base `logs` columns, and the partition field. */
const BASE_COLUMNS = new Set([...TableSchema.LOGS.columns.map((c) => c.name.toLowerCase()), 'time_day']);
const COLUMN_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const SOURCE_RE = /^(attributes|resource|scope)\.(.+)$/s;

function bad(message: string): IndexError {
  return new IndexError('SIGLAKE_BAD_INDEX', message);
}

/** Whether `name` can name an index: the identifier rule, and not a base table. */
export function isValidIndexName(name: string): boolean {
  return isValidIdentifier(name);
}

/** The YAML (or JSON, a subset) text of an index definition, as a value to validate. */
export function parseIndexText(text: string): unknown {
  try {
    return parseYaml(text, { maxAliasCount: 0 });
  } catch (e) {
    throw bad(`index definition is not valid YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * Validates a parsed definition. `pathName`, when given (the `{name}` of the
 * URL, the NAME of the command), must agree with a `name` field if the
 * definition has one.
 */
export function validateIndexSpec(value: unknown, pathName?: string): IndexSpec {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw bad('index definition must be an object');
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'name' && k !== 'retentionDays' && k !== 'mapping') throw bad(`unknown field "${k}" (name, retentionDays, mapping)`);
  }
  let name = o['name'];
  if (name === undefined) name = pathName;
  if (typeof name !== 'string' || !isValidIndexName(name)) {
    throw bad('name must be 1-128 of A-Z a-z 0-9 _ - and not a reserved name (logs, traces, metrics, indexes, tmp, checkpoints, archive)');
  }
  if (pathName !== undefined && name !== pathName) throw bad(`name "${name}" differs from the index named in the request ("${pathName}")`);
  const rd = o['retentionDays'] ?? 0;
  if (typeof rd !== 'number' || !Number.isInteger(rd) || rd < 0 || rd > MAX_RETENTION_DAYS) {
    throw bad(`retentionDays must be an integer from 0 (keep forever) to ${MAX_RETENTION_DAYS}`);
  }
  const rawMapping = o['mapping'] ?? [];
  if (!Array.isArray(rawMapping)) throw bad('mapping must be a list of {column, from, type}');
  if (rawMapping.length > MAX_MAPPED_COLUMNS) throw bad(`mapping has ${rawMapping.length} columns, at most ${MAX_MAPPED_COLUMNS}`);
  const seen = new Set<string>();
  const mapping: MappingEntry[] = rawMapping.map((m: unknown, i: number) => {
    const where = `mapping[${i}]`;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw bad(`${where} must be an object {column, from, type}`);
    const e = m as Record<string, unknown>;
    for (const k of Object.keys(e)) if (k !== 'column' && k !== 'from' && k !== 'type') throw bad(`${where}: unknown field "${k}" (column, from, type)`);
    const column = e['column'];
    if (typeof column !== 'string' || !COLUMN_RE.test(column)) throw bad(`${where}.column must match [A-Za-z_][A-Za-z0-9_]* (at most 128)`);
    const lower = column.toLowerCase();
    if (BASE_COLUMNS.has(lower)) throw bad(`${where}.column "${column}" is a base column of logs`);
    if (seen.has(lower)) throw bad(`${where}.column "${column}" appears twice`);
    seen.add(lower);
    const from = e['from'];
    if (typeof from !== 'string' || !isValidSource(from)) {
      throw bad(`${where}.from must be attributes.<key>, resource.<key>, scope.<key> or body (key 1-${MAX_SOURCE_KEY_LENGTH} characters)`);
    }
    const type = e['type'];
    if (typeof type !== 'string' || !(MAPPED_TYPES as readonly string[]).includes(type)) throw bad(`${where}.type must be one of ${MAPPED_TYPES.join(', ')}`);
    return { column, from, type: type as MappedType };
  });
  return { name, retentionDays: rd, mapping };
}

function isValidSource(from: string): boolean {
  if (from === 'body') return true;
  const m = SOURCE_RE.exec(from);
  return m !== null && m[2]!.length >= 1 && m[2]!.length <= MAX_SOURCE_KEY_LENGTH;
}

/** The Iceberg primitive type of a mapped column. */
export function icebergTypeOf(t: MappedType): string {
  return t === 'timestamp' ? 'timestamptz' : t;
}
