// Failures of the Iceberg landing. Callers match on `code`, never on the
// message (the undici habit the rest of Siglake follows).

export type IcebergErrorCode =
  /** Another writer moved the table's metadata_location first: reload and retry. */
  | 'SIGLAKE_ICEBERG_COMMIT_CONFLICT'
  /** The commit kept conflicting past the retry budget. */
  | 'SIGLAKE_ICEBERG_COMMIT_RETRIES'
  /** The SQL catalog failed or holds something this writer refuses to touch. */
  | 'SIGLAKE_ICEBERG_CATALOG'
  /** A metadata file, manifest or manifest list breaks the Iceberg spec as this writer reads it. */
  | 'SIGLAKE_ICEBERG_METADATA'
  /** The warehouse storage failed (write, read, delete). */
  | 'SIGLAKE_ICEBERG_STORAGE'
  /** A bad argument: a location outside the warehouse, a catalog URL of an unknown kind. */
  | 'SIGLAKE_ICEBERG_ARGUMENT';

export class IcebergError extends Error {
  readonly code: IcebergErrorCode;

  constructor(code: IcebergErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'IcebergError';
    this.code = code;
  }
}
