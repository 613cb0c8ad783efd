// The public surface of the WAL module.

export * from './format.js';
export * from './layout.js';
export { FdCache, type FdHandle } from './fd-cache.js';
export { IOV_MAX, NODE_FILE_OPS, writevAll, type FileOps } from './file-ops.js';
export { LaneWriter, type LaneWriterOptions } from './lane-writer.js';
export { SegmentReader, type SegmentScan, type SegmentStop, type WalRecord } from './segment-reader.js';
export { listLaneFiles, type LaneFiles, type SegmentFile } from './segment-files.js';
export { repairLane, type LaneRecovery, type RepairOptions, type TailCut } from './repair.js';
export { recoverWal, type LaneRecoveryEntry, type WalRecovery } from './recovery.js';
export { walDump, walVerify, EXIT_DAMAGED, EXIT_OK, EXIT_UNREADABLE, type DescribePayload } from './commands.js';
export { WalWriteError, type WalWriteOp } from './wal-write-error.js';
export { WalArgumentError } from './wal-argument-error.js';
