// The `.sealed` marker of a lane directory: the highest segment number the
// writer has sealed (fdatasync'd, closed, never to be appended to again).
// The compactor may land every segment up to it even while the ingester runs
// and the lane has gone quiet (its last segment is still the highest).
//
// Written with a rename, so a reader sees the old number or the new one. Not
// fsync'd: a marker lost in a machine crash only makes the compactor wait for
// the lane's next segment or the next start, never take an unsealed one.
//
// In `batch` mode (the commit journal) a seal takes no sync: the checkpoint
// writes the marker, after it made the segment durable (fdatasync, directory
// fsync) and deleted the journal files that held its records
// (docs/wal-format.md "Checkpoint").

import fs from 'node:fs';
import path from 'node:path';

export const SEALED_MARKER = '.sealed';

export function writeSealedMarker(dir: string, segment: number): void {
  const target = path.join(dir, SEALED_MARKER);
  const tmp = `${target}.tmp`;
  fs.writeFileSync(tmp, `${segment}\n`);
  fs.renameSync(tmp, target);
}

/** writeSealedMarker on the libuv thread pool (a checkpoint's). */
export async function writeSealedMarkerAsync(dir: string, segment: number): Promise<void> {
  const target = path.join(dir, SEALED_MARKER);
  const tmp = `${target}.tmp`;
  await fs.promises.writeFile(tmp, `${segment}\n`);
  await fs.promises.rename(tmp, target);
}

/** The sealed segment number, or 0 when there is no (readable, well-formed) marker. */
export function readSealedMarker(dir: string): number {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dir, SEALED_MARKER), 'utf8');
  } catch {
    return 0;
  }
  const m = /^(\d{1,15})\n$/.exec(text);
  return m === null ? 0 : Number(m[1]);
}
