// A WAL write that did not happen: the batch it belonged to is dropped and its
// requests are refused (contract §6): 503 / UNAVAILABLE + Retry-After when the
// disk refused it (code SIGLAKE_WAL_DISK: full, quota, read-only, I/O error,
// permission), 500 / INTERNAL for anything else (SIGLAKE_WAL_WRITE, a bug).
// The segment it was written to stays valid: a failed append is cut back.

import { IngestError, walFailureCode } from '../errors.js';
import { errnoCode } from './file-ops.js';

/** The step that failed. A closed set, safe as a log field or a metric label. */
export type WalWriteOp = 'mkdir' | 'create' | 'open' | 'write' | 'truncate' | 'fdatasync' | 'closed' | 'symlink' | 'notdir';

export class WalWriteError extends IngestError {
  readonly op: WalWriteOp;
  readonly path: string;
  /** The errno code of the cause (`ENOSPC`, `EIO`), when there is one. */
  readonly errno: string | undefined;

  constructor(op: WalWriteOp, path: string, cause?: unknown) {
    const errno = errnoCode(cause);
    super(
      // Something on disk that is not a directory where a tenant's or a lane's directory lives
      // (`<walDir>/acme` a regular file): the environment refuses the write, as a full or
      // read-only disk does, not a bug (it was answered 500 SIGLAKE_WAL_WRITE, ENOTDIR).
      op === 'notdir' || errno === 'ENOTDIR' ? 'SIGLAKE_WAL_DISK' : walFailureCode(errno),
      op === 'symlink'
        ? `wal lane not opened: ${path} is a symbolic link, which nothing that lands the WAL follows (mount the disk at that path instead)`
        : op === 'notdir'
          ? `wal lane not opened: ${path} is ${(cause as Error | undefined)?.message ?? 'not a directory'}, where a tenant's or a lane's directory lives (move it out of the WAL root)`
          : `wal ${op} failed${errno ? ` (${errno})` : ''}: ${path}`,
    );
    this.name = 'WalWriteError';
    this.op = op;
    this.path = path;
    this.errno = errno;
    if (cause !== undefined) this.cause = cause;
  }
}
