// The tenants file (declared-tenants.md §1): YAML or JSON, validated strictly
// at load. Every message names the tenant (by id, or by position when the id
// itself is the problem) and the field, so an operator can fix the file from
// the one log line a failed reload writes. Nothing here is on the request path.

import { parse as parseYaml } from 'yaml';
import { bucketProblem } from '../limits/token-bucket-table.js';
import { isValidIdentifier } from '../tenancy/identifier.js';

export type BudgetPeriod = 'day' | 'month';

export interface BudgetDecl {
  readonly period: BudgetPeriod;
  /** Records (log records + spans) per period; undefined: not limited. */
  readonly records: number | undefined;
  /** OTLP protobuf bytes stored (the WAL's payload, whatever the transport and encoding) per period; undefined: not limited. */
  readonly bytes: number | undefined;
}

export interface RateDecl {
  readonly requestsPerSec: number;
  readonly burst: number;
}

export interface SubjectsDecl {
  /** Claim name → required value (every one must hold). */
  readonly claims: ReadonlyMap<string, string>;
  /** The principal holds any one of these (claim `groups`). */
  readonly groups: readonly string[];
  /** `iss` is any one of these. */
  readonly issuers: readonly string[];
  /** `sub` is any one of these. */
  readonly subs: readonly string[];
}

export interface TenantDecl {
  readonly id: string;
  readonly subjects: SubjectsDecl;
  readonly rateLimit: RateDecl | undefined;
  readonly budget: BudgetDecl | undefined;
  /** The declared index subset; undefined = all of the tenant's indexes. */
  readonly indexes: ReadonlySet<string> | undefined;
  /** Budgets of single indexes (an `indexes` entry written as `{ name, budget }`). */
  readonly indexBudgets: ReadonlyMap<string, BudgetDecl>;
}

export class TenantsFileError extends Error {
  readonly code = 'SIGLAKE_TENANTS_FILE';
  /** What is wrong, without the file's name (a start-up refusal puts the setting, its source and the file before it). */
  readonly detail: string;
  constructor(message: string, detail?: string) {
    super(message);
    this.name = 'TenantsFileError';
    this.detail = detail ?? message;
  }
}

/** More than this many tenants in one file is refused (the indexes hold far more; this bounds a runaway generator). */
export const MAX_TENANTS = 100_000;
/** Compound selectors are scanned per request: more than this is refused. */
export const MAX_COMPOUND_SELECTORS = 256;
const MAX_RATE_PER_SEC = 1_000_000;
/** burst / requestsPerSec must fit the bucket word's horizon (token-bucket-table.ts). */
const MAX_BURST_SECS = 1073;
const MAX_BUDGET = Number.MAX_SAFE_INTEGER;
export const GROUPS_CLAIM = 'groups';

const TOP_KEYS = new Set(['tenants']);
const TENANT_KEYS = new Set(['id', 'subjects', 'rateLimit', 'budget', 'indexes']);
const SUBJECT_KEYS = new Set(['claims', 'groups', 'issuers', 'subs']);
const RATE_KEYS = new Set(['requestsPerSec', 'burst']);
const BUDGET_KEYS = new Set(['period', 'records', 'bytes']);
const INDEX_KEYS = new Set(['name', 'budget']);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function unknownKeys(where: string, obj: Record<string, unknown>, allowed: Set<string>): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.has(k)) throw new TenantsFileError(`${where}: unknown field "${k}" (allowed: ${[...allowed].join(', ')})`);
  }
}

function stringList(where: string, v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0) throw new TenantsFileError(`${where}: must be a non-empty list of strings`);
  const seen = new Set<string>();
  for (const s of v) {
    if (typeof s !== 'string' || s === '') throw new TenantsFileError(`${where}: every entry must be a non-empty string`);
    if (seen.has(s)) throw new TenantsFileError(`${where}: "${s}" is listed twice`);
    seen.add(s);
  }
  return v as string[];
}

/** Parse a budget object (shared with server.budget in the settings). */
export function parseBudget(where: string, v: unknown): BudgetDecl {
  if (!isObject(v)) throw new TenantsFileError(`${where}: must be an object { period, records?, bytes? }`);
  unknownKeys(where, v, BUDGET_KEYS);
  if (v['period'] !== 'day' && v['period'] !== 'month') {
    throw new TenantsFileError(`${where}.period: must be "day" or "month" (UTC)`);
  }
  const amount = (k: 'records' | 'bytes'): number | undefined => {
    const x = v[k];
    if (x === undefined) return undefined;
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 1 || x > MAX_BUDGET) {
      throw new TenantsFileError(`${where}.${k}: must be a whole number ≥ 1`);
    }
    return x;
  };
  const records = amount('records');
  const bytes = amount('bytes');
  if (records === undefined && bytes === undefined) {
    throw new TenantsFileError(`${where}: needs records and/or bytes`);
  }
  return { period: v['period'], records, bytes };
}

function parseRate(where: string, v: unknown): RateDecl {
  if (!isObject(v)) throw new TenantsFileError(`${where}: must be an object { requestsPerSec, burst? }`);
  unknownKeys(where, v, RATE_KEYS);
  const rate = v['requestsPerSec'];
  if (typeof rate !== 'number' || !Number.isFinite(rate) || rate <= 0 || rate > MAX_RATE_PER_SEC) {
    throw new TenantsFileError(`${where}.requestsPerSec: must be a number in (0, ${MAX_RATE_PER_SEC}]`);
  }
  const burst = v['burst'] ?? Math.max(1, Math.ceil(rate));
  if (typeof burst !== 'number' || !Number.isInteger(burst) || burst < 1) {
    throw new TenantsFileError(`${where}.burst: must be a whole number ≥ 1`);
  }
  if (burst / rate > MAX_BURST_SECS) {
    throw new TenantsFileError(`${where}.burst: burst / requestsPerSec must be at most ${MAX_BURST_SECS} s`);
  }
  // The bucket's own bounds (a period of at least 512 ticks, burst·period within 2^30 ticks): a burst
  // of a few million at a high rate. Refused here, naming the tenant (it was refused only when the
  // ingester built the bucket: at start-up a line naming neither the setting, the file nor the tenant,
  // on a reload a log line without the file, and the query server loaded the file the ingester refused).
  const problem = bucketProblem(rate, burst);
  if (problem !== undefined) throw new TenantsFileError(`${where}.burst: ${problem}`);
  return { requestsPerSec: rate, burst };
}

function parseSubjects(where: string, v: unknown): SubjectsDecl {
  if (!isObject(v)) {
    throw new TenantsFileError(`${where}: required: at least one selector (claims, groups, issuers or subs); a tenant without one would capture every caller`);
  }
  unknownKeys(where, v, SUBJECT_KEYS);
  const claims = new Map<string, string>();
  if (v['claims'] !== undefined) {
    const c = v['claims'];
    if (!isObject(c) || Object.keys(c).length === 0) throw new TenantsFileError(`${where}.claims: must be a non-empty map of claim → value`);
    for (const [k, val] of Object.entries(c)) {
      if (k === '') throw new TenantsFileError(`${where}.claims: a claim name is empty`);
      if (k === GROUPS_CLAIM) throw new TenantsFileError(`${where}.claims.${k}: select groups with subjects.groups`);
      if (typeof val !== 'string' || val === '') {
        throw new TenantsFileError(`${where}.claims.${k}: the value must be a non-empty string (quote numbers)`);
      }
      claims.set(k, val);
    }
  }
  const groups = v['groups'] === undefined ? [] : stringList(`${where}.groups`, v['groups']);
  const issuers = v['issuers'] === undefined ? [] : stringList(`${where}.issuers`, v['issuers']);
  const subs = v['subs'] === undefined ? [] : stringList(`${where}.subs`, v['subs']);
  if (claims.size === 0 && groups.length === 0 && issuers.length === 0 && subs.length === 0) {
    throw new TenantsFileError(`${where}: required: at least one selector (claims, groups, issuers or subs)`);
  }
  return { claims, groups, issuers, subs };
}

function parseIndexes(where: string, v: unknown): { set: Set<string>; budgets: Map<string, BudgetDecl> } {
  if (!Array.isArray(v) || v.length === 0) throw new TenantsFileError(`${where}: must be a non-empty list of index names (omit it for all indexes)`);
  const set = new Set<string>();
  const budgets = new Map<string, BudgetDecl>();
  v.forEach((e: unknown, i) => {
    let name: unknown = e;
    if (isObject(e)) {
      unknownKeys(`${where}[${i}]`, e, INDEX_KEYS);
      name = e['name'];
      if (e['budget'] !== undefined && typeof name === 'string') budgets.set(name, parseBudget(`${where}[${i}].budget`, e['budget']));
    }
    if (typeof name !== 'string' || !isValidIdentifier(name)) {
      throw new TenantsFileError(`${where}[${i}]: not a valid index name (1-128 of A-Z a-z 0-9 _ -, not a reserved name)`);
    }
    if (set.has(name)) throw new TenantsFileError(`${where}: "${name}" is listed twice`);
    set.add(name);
  });
  return { set, budgets };
}

function parseTenant(i: number, v: unknown): TenantDecl {
  if (!isObject(v)) throw new TenantsFileError(`tenants[${i}]: must be an object with id and subjects`);
  const id = v['id'];
  if (typeof id !== 'string' || !isValidIdentifier(id)) {
    throw new TenantsFileError(
      `tenants[${i}].id: required, 1-128 of A-Z a-z 0-9 _ - and not a reserved name (ingest-contract.md §5)`,
    );
  }
  const where = `tenant "${id}"`;
  unknownKeys(where, v, TENANT_KEYS);
  const subjects = parseSubjects(`${where} subjects`, v['subjects']);
  const rateLimit = v['rateLimit'] === undefined ? undefined : parseRate(`${where} rateLimit`, v['rateLimit']);
  const budget = v['budget'] === undefined ? undefined : parseBudget(`${where} budget`, v['budget']);
  const idx = v['indexes'] === undefined ? undefined : parseIndexes(`${where} indexes`, v['indexes']);
  return { id, subjects, rateLimit, budget, indexes: idx?.set, indexBudgets: idx?.budgets ?? new Map() };
}

/** Parse and validate the text of a tenants file; `name` decides JSON (`.json`) or YAML (anything else). */
export function parseTenantsText(text: string, name: string): TenantDecl[] {
  let doc: unknown;
  try {
    doc = name.endsWith('.json') ? JSON.parse(text) : parseYaml(text, { uniqueKeys: true, maxAliasCount: 100 });
  } catch (e) {
    throw new TenantsFileError(`not valid ${name.endsWith('.json') ? 'JSON' : 'YAML'}: ${(e as Error).message.split('\n')[0]}`);
  }
  if (!isObject(doc)) throw new TenantsFileError('the file must hold an object with a "tenants" list');
  unknownKeys('file', doc, TOP_KEYS);
  const list = doc['tenants'];
  if (!Array.isArray(list)) throw new TenantsFileError('tenants: required, a list (it may be empty)');
  if (list.length > MAX_TENANTS) throw new TenantsFileError(`tenants: at most ${MAX_TENANTS} tenants, got ${list.length}`);
  const out: TenantDecl[] = [];
  const ids = new Map<string, number>();
  for (let i = 0; i < list.length; i++) {
    const t = parseTenant(i, list[i]);
    const prev = ids.get(t.id);
    if (prev !== undefined) throw new TenantsFileError(`tenant "${t.id}": id declared twice (tenants[${prev}] and tenants[${i}])`);
    ids.set(t.id, i);
    out.push(t);
  }
  return out;
}
