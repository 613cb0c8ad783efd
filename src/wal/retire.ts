// Retiring a WAL segment whose records have landed elsewhere (the compactor,
// once every table it fed has committed), next to the rule it must keep: a
// lane's segment numbers only grow, and a number is never handed out twice.
// So a segment with a higher one beside it is deleted, but the lane's highest
// segment is cut to zero bytes instead: the empty file keeps its number, and
// the writer (or recovery, after a restart) continues after it
// (docs/wal-format.md "Directories").

import { closeSync, fstatSync, fsyncSync, openSync, readSync, statSync, truncateSync, unlinkSync } from 'node:fs';
import { decodeSegmentHeader, SEGMENT_HEADER_SIZE } from './format.js';

export interface RetiredSegment {
  /** The lane directory holding the segment (fsynced after the change). */
  readonly laneDir: string;
  readonly path: string;
  /** Its size when it was read. */
  readonly size: number;
  /** Whether the lane has a segment with a higher number. */
  readonly hasHigher: boolean;
}

/**
 * Retires one segment: deletes it when a higher one exists, else truncates it
 * to an empty segment that keeps its number; then fsyncs the file and the
 * directory. Returns false when there was nothing to do (already empty, or
 * gone) or when it must not (its size is not the size it was read at);
 * throws the file system's error otherwise.
 */
export function retireSegment(seg: RetiredSegment): boolean {
  try {
    // Grown since it was read: something still writes it (a compactor that took a live segment as
    // sealed, beside an ingester it could not see). Its new records have not landed: keep it.
    if (seg.size > 0 && statSync(seg.path).size !== seg.size) return false;
    if (seg.hasHigher) {
      unlinkSync(seg.path);
    } else {
      if (seg.size === 0) return false;
      truncateSync(seg.path, 0);
      fsyncPath(seg.path, 'r+');
    }
    fsyncPath(seg.laneDir, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  return true;
}

function fsyncPath(path: string, flags: string): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The creation time in a segment's header, or null for an empty or unreadable segment. */
export function segmentCreatedMs(path: string): number | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    if (fstatSync(fd).size <= SEGMENT_HEADER_SIZE) return null;
    const b = Buffer.alloc(SEGMENT_HEADER_SIZE);
    if (readSync(fd, b, 0, SEGMENT_HEADER_SIZE, 0) !== SEGMENT_HEADER_SIZE) return null;
    const h = decodeSegmentHeader(b, 0, 0);
    return typeof h === 'string' ? null : h.createdMs;
  } finally {
    closeSync(fd);
  }
}
