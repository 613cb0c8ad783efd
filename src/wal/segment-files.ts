// What a lane directory holds: its segments in number order, the `.seg.tmp`
// leftovers of unfinished creations, and anything else (reported, never
// read). Shared by repair, the writer's first open and the offline commands.

import { readdirSync, type Dirent } from 'node:fs';
import { join } from 'node:path';
import { parseSegmentName } from './format.js';
import { kindOf } from './regular-file.js';
import { SEALED_MARKER } from './sealed-marker.js';

export interface SegmentFile {
  readonly name: string;
  readonly path: string;
  readonly number: number;
  /** Spelled as the writer spells it (`%08d.seg`). */
  readonly canonical: boolean;
}

export interface LaneFiles {
  /** `.seg` files, by number then name. */
  readonly segments: readonly SegmentFile[];
  /** `.seg.tmp` files. */
  readonly tmp: readonly SegmentFile[];
  /** Entries that are neither (including directories), the writer's `.sealed` marker aside. */
  readonly unknown: readonly string[];
  /**
   * Entries named as a segment or a `.seg.tmp` that are not regular files (a
   * directory, a symbolic link, a FIFO, …), with what they are. Nothing reads
   * or writes them, but their numbers count in `maxNumber`: a writer that
   * took such a number was refused (EEXIST, EISDIR) on every request.
   */
  readonly notFiles: readonly { readonly name: string; readonly number: number; readonly kind: string }[];
  /** Highest number among segments, tmp files and `notFiles`; 0 when there are none. */
  readonly maxNumber: number;
  /** Whether the directory exists. */
  readonly exists: boolean;
}

export function listLaneFiles(dir: string): LaneFiles {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      return { segments: [], tmp: [], unknown: [], notFiles: [], maxNumber: 0, exists: false };
    }
    throw err;
  }
  const segments: SegmentFile[] = [];
  const tmp: SegmentFile[] = [];
  const unknown: string[] = [];
  const notFiles: { name: string; number: number; kind: string }[] = [];
  let maxNumber = 0;
  for (const e of entries) {
    // The writer's own marker (sealed-marker.ts), and its rename source if a crash left one.
    if (e.isFile() && (e.name === SEALED_MARKER || e.name === `${SEALED_MARKER}.tmp`)) continue;
    const parsed = parseSegmentName(e.name);
    if (parsed === null) {
      unknown.push(e.name);
      continue;
    }
    if (!e.isFile()) {
      notFiles.push({ name: e.name, number: parsed.number, kind: kindOf(e) });
      if (parsed.number > maxNumber) maxNumber = parsed.number;
      continue;
    }
    const file = { name: e.name, path: join(dir, e.name), number: parsed.number, canonical: parsed.canonical };
    (parsed.tmp ? tmp : segments).push(file);
    if (parsed.number > maxNumber) maxNumber = parsed.number;
  }
  const order = (a: SegmentFile, b: SegmentFile) => a.number - b.number || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  segments.sort(order);
  tmp.sort(order);
  unknown.sort();
  notFiles.sort((a, b) => a.number - b.number || (a.name < b.name ? -1 : 1));
  return { segments, tmp, unknown, notFiles, maxNumber, exists: true };
}
