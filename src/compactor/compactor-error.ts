// Failures of the compactor itself (its arguments, its WAL identity file).
// Iceberg-side failures are IcebergError; both carry stable codes.

export type CompactorErrorCode = 'SIGLAKE_COMPACTOR_ARGUMENT' | 'SIGLAKE_COMPACTOR_WAL_ID' | 'SIGLAKE_COMPACTOR_RETIRE';

export class CompactorError extends Error {
  readonly code: CompactorErrorCode;

  constructor(code: CompactorErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CompactorError';
    this.code = code;
  }
}
