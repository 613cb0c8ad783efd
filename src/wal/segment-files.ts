// What a lane directory holds: its segments in number order, the `.seg.tmp`
// leftovers of unfinished creations, and anything else (reported, never
// read). Shared by repair, the writer's first open and the offline commands.

import { readdirSync, type Dirent } from 'node:fs';
import { join } from 'node:path';
import { parseSegmentName } from './format.js';
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
  /** Highest number among segments and tmp files; 0 when there are none. */
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
      return { segments: [], tmp: [], unknown: [], maxNumber: 0, exists: false };
    }
    throw err;
  }
  const segments: SegmentFile[] = [];
  const tmp: SegmentFile[] = [];
  const unknown: string[] = [];
  let maxNumber = 0;
  for (const e of entries) {
    // The writer's own marker (sealed-marker.ts), and its rename source if a crash left one.
    if (e.isFile() && (e.name === SEALED_MARKER || e.name === `${SEALED_MARKER}.tmp`)) continue;
    const parsed = e.isFile() ? parseSegmentName(e.name) : null;
    if (parsed === null) {
      unknown.push(e.name);
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
  return { segments, tmp, unknown, maxNumber, exists: true };
}
