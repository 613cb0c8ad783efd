// A WAL write that did not happen: the batch it belonged to is dropped and its
// requests are answered 500 / INTERNAL (code SIGLAKE_WAL_WRITE, contract §6).
// The segment it was written to stays valid: a failed append is cut back.

import { IngestError } from '../errors.js';
import { errnoCode } from './file-ops.js';

/** The step that failed. A closed set, safe as a log field or a metric label. */
export type WalWriteOp = 'mkdir' | 'create' | 'open' | 'write' | 'truncate' | 'fdatasync' | 'closed';

export class WalWriteError extends IngestError {
  readonly op: WalWriteOp;
  readonly path: string;
  /** The errno code of the cause (`ENOSPC`, `EIO`), when there is one. */
  readonly errno: string | undefined;

  constructor(op: WalWriteOp, path: string, cause?: unknown) {
    const errno = errnoCode(cause);
    super('SIGLAKE_WAL_WRITE', `wal ${op} failed${errno ? ` (${errno})` : ''}: ${path}`);
    this.name = 'WalWriteError';
    this.op = op;
    this.path = path;
    this.errno = errno;
    if (cause !== undefined) this.cause = cause;
  }
}
