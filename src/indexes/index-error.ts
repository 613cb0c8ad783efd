// Refusals of the index registry (docs/indexes.md). Callers match on `code`;
// `status` is the HTTP status the index API answers with.

export type IndexErrorCode =
  /** The index definition (YAML/JSON of contract §6) breaks a rule. */
  | 'SIGLAKE_BAD_INDEX'
  /** The tenant has no index of that name (404 on the index API, 400 on ingest). */
  | 'SIGLAKE_UNKNOWN_INDEX'
  /** `index create` of a name the tenant already has. */
  | 'SIGLAKE_INDEX_EXISTS'
  /** An update that would retype or re-source an existing mapped column. */
  | 'SIGLAKE_INDEX_MAPPING_CONFLICT'
  /** The table of that name is not a Siglake log table (another engine's, or `traces`). */
  | 'SIGLAKE_INDEX_NOT_MANAGED'
  /** A create past query.maxIndexesPerTenant (the index API; the CLI is the operator's and has no limit). */
  | 'SIGLAKE_INDEX_LIMIT';

const STATUS: Readonly<Record<IndexErrorCode, number>> = {
  SIGLAKE_BAD_INDEX: 400,
  SIGLAKE_UNKNOWN_INDEX: 404,
  SIGLAKE_INDEX_EXISTS: 409,
  SIGLAKE_INDEX_MAPPING_CONFLICT: 409,
  SIGLAKE_INDEX_NOT_MANAGED: 409,
  SIGLAKE_INDEX_LIMIT: 409,
};

export class IndexError extends Error {
  readonly code: IndexErrorCode;

  constructor(code: IndexErrorCode, message: string) {
    super(message);
    this.name = 'IndexError';
    this.code = code;
  }

  get status(): number {
    return STATUS[this.code];
  }
}
