// `siglake wal verify DIR` and `siglake wal dump DIR`: offline, read-only
// checks and prints of WAL segments (docs/wal-format.md). DIR is the WAL root
// or one lane directory. Exit codes: 0 clean (a torn tail in a lane's last
// segment is allowed, and reported), 1 damage recovery would not repair, 2 DIR
// cannot be read.

import { existsSync, readdirSync, realpathSync, statSync, type Dirent } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { KEPT_JOURNAL_RE, listJournalDirs, listJournalFiles, listKeptJournals, listUnreadJournalNames, unreadJournal } from './journal.js';
import { formatJournalName, isJournalDirName, JOURNAL_ROOT, type JournalEntry, type JournalStop } from './journal-format.js';
import { readJournalFile } from './journal-file.js';
import { enclosingWalRoot, INGESTER_LOCK, isWalRoot, linksInWal, listLaneDirs, locateLaneDir, subdirs, tableLabel, WAL_ROOT_MARKER, type WalTable } from './layout.js';
import { formatSegmentName, recordTypeName, type RecordType } from './format.js';
import { listLaneFiles, type LaneFiles, type SegmentFile } from './segment-files.js';
import { SegmentReader, type SegmentStop } from './segment-reader.js';
import { canBeTorn } from './repair.js';
import { kindOf } from './regular-file.js';
import { DEFAULT_TENANT, isValidIdentifier } from '../tenancy/identifier.js';
import { readSealedMarker } from './sealed-marker.js';
import { WAL_ID_FILE } from '../compactor/wal-identity.js';

/** Decodes a payload into short texts for dump (log bodies, span names). */
export type DescribePayload = (type: RecordType, payload: Uint8Array) => string[];

export const EXIT_OK = 0;
export const EXIT_DAMAGED = 1;
export const EXIT_UNREADABLE = 2;

interface Target {
  readonly dir: string;
  /** Null when a lane was given by a path that does not follow the layout. */
  readonly tenant: string | null;
  readonly table: WalTable | null;
}

export async function walVerify(dir: string, out: (line: string) => void): Promise<number> {
  const targets = resolveTargets(dir, out);
  if (targets === null) return EXIT_UNREADABLE;
  let segments = 0;
  let records = 0;
  let torn = 0;
  let problems = 0;
  const journals = scanJournals(dir);
  const held = heldFor(dir, journals);
  for (const t of targets) {
    const files = listLaneFiles(t.dir);
    const naming = namingProblems(files);
    const lines: string[] = [];
    for (const p of naming) lines.push(`  DAMAGED: ${p}`);
    for (const tmp of files.tmp) lines.push(`  leftover ${tmp.name} (recovery deletes it)`);
    for (const u of files.unknown) lines.push(`  unexpected entry ${u} (ignored)`);
    for (const f of files.notFiles) {
      lines.push(`  DAMAGED: ${f.name} is ${f.kind}, not a segment file: nothing reads or writes it (recovery skips its number; a journal entry naming it stops the start)`);
    }
    problems += naming.length + files.notFiles.length;
    let laneRecords = 0;
    let laneBytes = 0;
    const sealed = readSealedMarker(t.dir);
    files.segments.forEach((seg, i) => {
      const scan = SegmentReader.scan(seg.path);
      laneRecords += scan.records;
      laneBytes += scan.size;
      const last = i === files.segments.length - 1 && canBeTorn(seg, sealed, scan.stop);
      const verdict = judge(scan.stop, last);
      if (verdict !== 'ok' && isHeld(held, seg.path, scan.stop.offset)) {
        // `batch` mode after a machine crash: segments are synced only by a
        // checkpoint, and the journal holds the bytes from here on.
        torn++;
        lines.push(`  ${scan.stop.kind} in ${seg.name} at offset ${scan.stop.offset}: ${whyOf(scan.stop)}; the commit journal holds these bytes: start-up replay writes them back`);
      } else if (verdict === 'torn-ok') {
        torn++;
        lines.push(`  torn tail in ${seg.name} at offset ${scan.stop.offset}: ${whyOf(scan.stop)}; recovery cuts ${scan.size - scan.stop.offset} bytes`);
      } else if (verdict === 'damaged') {
        problems++;
        const what = scan.stop.kind === 'torn' ? `torn, but not an unsealed last segment: ${whyOf(scan.stop)}` : whyOf(scan.stop);
        lines.push(`  DAMAGED: ${seg.name} at offset ${scan.stop.offset}: ${what}`);
      }
    });
    segments += files.segments.length;
    records += laneRecords;
    out(`lane ${laneLabel(t)} ${t.dir}: ${files.segments.length} segments, ${laneRecords} records, ${laneBytes} bytes`);
    for (const l of lines) out(l);
  }
  for (const p of laneNamesNotDirs(dir, targets)) {
    problems++;
    out(`DAMAGED: ${p}`);
  }
  problems += journals.report(out);
  // Lanes reached through a symbolic link are read by nothing that lands the WAL.
  for (const link of targets.length === 0 || targets[0]!.dir !== dir ? linksInWal(dir) : []) {
    problems++;
    out(`NOT FOLLOWED: ${link} is a symbolic link; no lane is recovered or landed through it (start-up refuses it)`);
  }
  const verdict = problems === 0 ? 'OK' : 'FAILED';
  out(`verify: ${targets.length} lanes, ${segments} segments, ${records} records, ${torn} torn tails, ${problems} problems: ${verdict}`);
  return problems === 0 ? EXIT_OK : EXIT_DAMAGED;
}

/** Segment path → the byte ranges [start, end) that live journal entries hold for it. */
type JournalHeld = Map<string, [number, number][]>;

/** What one read of a journal file found: its entries and records and where they stop, or why it could not be read. */
type JournalCount = { entries: number; records: number; stop: JournalStop } | { error: string };

/**
 * The commit journals under a WAL root (nothing when `dir` has none), each
 * file read once: what its entries hold, by segment (JournalHeld), and what
 * verify and dump say of it (report).
 *
 * Until stop 55 verify and dump read every journal file twice, once for the
 * bytes its entries hold and once to count and judge it: twice the reading
 * of a long file, and a file changed between the two reads (a checkpoint of
 * a live ingester retiring it, say) was judged on other bytes than those
 * that excused a segment's torn tail.
 */
interface JournalScan {
  readonly held: JournalHeld;
  /** Prints what verify says of the journals (`damage` gets the problems' lines); returns the problems. */
  report(out: (line: string) => void, damage?: (line: string) => void): number;
}

function scanJournals(dir: string, heldOnly = false): JournalScan {
  const held: JournalHeld = new Map();
  let shards: string[];
  try {
    shards = listJournalDirs(dir);
  } catch (err) {
    // `.journal` that is not a directory: start-up refuses it.
    const message = (err as Error).message;
    return {
      held,
      report: (out, damage = out) => {
        damage(`  DAMAGED: ${message}`);
        return 1;
      },
    };
  }
  // Replay writes an entry back only into the lane its tag names exactly: a tag that is none
  // (`bob/../acme/logs`, a lane that is gone) excuses nothing, though join() would make it a path.
  const lanes = new Map<string, string>();
  if (shards.length > 0) for (const l of listLaneDirs(dir)) lanes.set(relative(dir, l.dir).split(sep).join('/'), l.dir);
  const nonDirs = nonDirShards(dir);
  // Damaged journal files start-up replayed up to the damage and kept aside (never replayed
  // again): the entries after the damage may be acknowledged records nothing else holds.
  const kept = (heldOnly ? [] : listKeptJournals(dir)).map((name) => ({ name, count: countJournal(join(dir, JOURNAL_ROOT, name), Number(KEPT_JOURNAL_RE.exec(name)![2])) }));
  const perShard = shards.map((shard) => {
    const shardDir = join(dir, JOURNAL_ROOT, shard);
    let numbers: number[];
    try {
      numbers = listJournalFiles(shardDir);
    } catch (err) {
      return { shard, listError: (err as Error).message, files: [], unread: [] };
    }
    // Only `shard-<k>-of-<W>` directories hold bytes replay writes back: replay reads no other, so
    // entries elsewhere (a copy an operator left, say) write nothing back and must not hide damage.
    const replayed = isJournalDirName(shard);
    const files = (heldOnly && !replayed ? [] : numbers).map((n) => ({
      n,
      count: countJournal(join(shardDir, formatJournalName(n)), n, (e) => {
        if (!replayed) return;
        const laneDir = lanes.get(e.tag);
        if (laneDir === undefined) return;
        const seg = resolve(laneDir, formatSegmentName(e.segment));
        let ranges = held.get(seg);
        if (ranges === undefined) held.set(seg, (ranges = []));
        ranges.push([e.offset, e.offset + e.body.length]);
      }),
    }));
    // What start-up neither replays nor deletes.
    const unread = (heldOnly ? [] : listUnreadJournalNames(shardDir)).map((entry) => ({ entry, held: unreadJournal(join(shardDir, entry)) }));
    return { shard, listError: null as string | null, files, unread };
  });
  return {
    held,
    report: (out, damage = out) => {
      let problems = 0;
      for (const name of nonDirs) {
        problems++;
        damage(`  DAMAGED: ${JOURNAL_ROOT}/${name} is not a directory: an ingester whose shard it is refuses to start`);
      }
      for (const { name, count: j } of kept) {
        problems++;
        const what = 'error' in j ? j.error : `${j.entries} entries, ${j.records} records before the damage at offset ${j.stop.offset} (${j.stop.kind === 'end' ? 'none' : j.stop.why})`;
        damage(
          `  DAMAGED: journal ${JOURNAL_ROOT}/${name}: a damaged commit journal file start-up kept aside: ${what}; the entries before the damage were replayed, those after it were not (docs/runbooks.md "A commit journal file kept aside as damaged"; remove the file once dealt with)`,
        );
      }
      for (const { shard, listError, files, unread } of perShard) {
        if (listError !== null) {
          problems++;
          damage(`  DAMAGED: journal directory ${JOURNAL_ROOT}/${shard}: ${listError}`);
          continue;
        }
        for (const { n, count: j } of files) {
          const name = `${JOURNAL_ROOT}/${shard}/${formatJournalName(n)}`;
          if ('error' in j) {
            problems++;
            damage(`  DAMAGED: journal ${name}: ${j.error}`);
            continue;
          }
          const stop = j.stop;
          const end =
            stop.kind === 'end'
              ? 'ends cleanly'
              : stop.kind === 'torn'
                ? `ends torn at offset ${stop.offset} (${stop.why}); start-up replays the entries before it`
                : `corrupt at offset ${stop.offset}: ${stop.why}`;
          if (stop.kind === 'corrupt') {
            problems++;
            damage(`  DAMAGED: journal ${name}: ${j.entries} entries, ${j.records} records, ${end}`);
          } else {
            out(`journal ${name}: ${j.entries} entries, ${j.records} records, ${end}`);
          }
        }
        // Said as a lane's unknown entries are; a journal file's name that spells a number
        // other than the writer does is damage, as a segment's is.
        for (const { entry, held: h } of unread) {
          const name = `${JOURNAL_ROOT}/${shard}/${entry}`;
          const holds = h === null ? '' : `: a commit journal file holding ${h.entries} entries, ${h.records} records, which start-up neither replays nor deletes`;
          const m = /^(\d+)\.jnl$/.exec(entry);
          const n = m === null ? 0 : Number(m[1]);
          if (Number.isSafeInteger(n) && n >= 1) {
            problems++;
            damage(`  DAMAGED: non-canonical journal file name ${name} (the writer spells it ${formatJournalName(n)})${holds}`);
          } else {
            out(`  unexpected entry ${name} (ignored)${holds}`);
          }
        }
      }
      return problems;
    },
  };
}

/**
 * The bytes the journals replay writes back hold, by segment: for a root its
 * own scan's; for a tenant's or a lane's directory inside a root, the root's
 * (its journal files read for that alone, their lines left to a verify of
 * the root). Until stop 55 a lane given alone was judged without them: a
 * torn segment whose bytes the journal holds, which verify of the root
 * passed, failed verify of the lane (exit 1).
 */
function heldFor(dir: string, journals: JournalScan): JournalHeld {
  if (isWalRoot(dir)) return journals.held;
  const root = enclosingWalRoot(dir);
  return root === null ? journals.held : scanJournals(root, true).held;
}

/** Whether a stop at `offset` in `seg` falls in bytes a journal entry holds (replay rewrites them). */
function isHeld(held: JournalHeld, seg: string, offset: number): boolean {
  for (const [start, end] of held.get(resolve(seg)) ?? []) if (start <= offset && offset < end) return true;
  return false;
}

/**
 * A journal file's entries and records, read once, a piece at a time (not
 * through a link, never blocking on a FIFO), and where they stop; `each`
 * sees every whole entry. A file that cannot be read gives why.
 */
function countJournal(path: string, expected: number, each?: (e: JournalEntry) => void): JournalCount {
  let entries = 0;
  let records = 0;
  try {
    const r = readJournalFile(path, expected, (e) => {
      entries++;
      records += e.records;
      each?.(e);
    });
    return { entries, records, stop: r.stop! };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/**
 * Given a WAL root: where a lane (or `indexes`) directory lives, at the root
 * or in a tenant's directory, something that is not a directory (a regular
 * file, a FIFO; links are reported as NOT FOLLOWED). The ingester refuses
 * every request of that lane (ENOTDIR), so it must not verify as clean.
 */
function laneNamesNotDirs(dir: string, targets: readonly Target[]): string[] {
  if (targets.length > 0 && targets[0]!.dir === dir) return []; // DIR is a lane
  const out: string[] = [];
  const check = (base: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(base, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if ((e.name === 'logs' || e.name === 'traces' || e.name === 'indexes') && !e.isDirectory() && !e.isSymbolicLink()) {
        out.push(`${join(base, e.name)} is ${kindOf(e) === 'not a regular file' ? 'a file' : kindOf(e)} where a lane directory lives: the ingester refuses every request of that lane (ENOTDIR)`);
      }
    }
  };
  check(dir);
  // A tenant's name at the root held by something else (a regular file, a FIFO): that tenant's
  // writes all fail (ENOTDIR), refused 503 SIGLAKE_WAL_DISK. It passed verify.
  let rootEntries: Dirent[] = [];
  try {
    rootEntries = readdirSync(dir, { withFileTypes: true });
  } catch {
    // unreadable: the lanes' reads say so
  }
  for (const e of rootEntries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (e.name === DEFAULT_TENANT || !isValidIdentifier(e.name) || e.isDirectory() || e.isSymbolicLink()) continue;
    out.push(`${join(dir, e.name)} is ${kindOf(e) === 'not a regular file' ? 'a file' : kindOf(e)} where tenant ${e.name}'s directory lives: the ingester refuses every request of that tenant (503 SIGLAKE_WAL_DISK, ENOTDIR)`);
  }
  for (const name of [...subdirs(dir)].sort()) if (name !== DEFAULT_TENANT && isValidIdentifier(name)) check(join(dir, name));
  return out;
}

/** Entries of `.journal` named as a shard's directory (`shard-<k>-of-<W>`) that are not directories. */
function nonDirShards(dir: string): string[] {
  try {
    return readdirSync(join(dir, JOURNAL_ROOT), { withFileTypes: true })
      .filter((e) => !e.isDirectory() && isJournalDirName(e.name))
      .map((e) => e.name)
      .sort();
  } catch {
    return [];
  }
}

/**
 * Prints one JSON line per record (and one per early stop); returns the exit
 * code verify would. When there is no record to print because the compactor
 * landed and retired the segments, `note` (stderr) says how many.
 */
export async function walDump(dir: string, out: (line: string) => void, describe: DescribePayload, note: (line: string) => void = () => {}): Promise<number> {
  const targets = resolveTargets(dir, (line) => out(JSON.stringify({ error: line })));
  if (targets === null) return EXIT_UNREADABLE;
  let damaged = false;
  let printed = 0;
  const journals = scanJournals(dir);
  const held = heldFor(dir, journals);
  let landed = 0;
  for (const t of targets) {
    const files = listLaneFiles(t.dir);
    if (namingProblems(files).length > 0 || files.notFiles.length > 0) damaged = true;
    landed += retiredSegments(files);
    const prefix = lanePrefix(t);
    const sealed = readSealedMarker(t.dir);
    files.segments.forEach((seg, i) => {
      const reader = new SegmentReader(seg.path);
      try {
        for (let r = reader.next(); r !== null; r = reader.next()) {
          let texts: string[] = [];
          let describeError: string | undefined;
          try {
            texts = describe(r.type, r.payload);
          } catch (err) {
            describeError = err instanceof Error ? err.message : String(err);
          }
          out(
            JSON.stringify({
              ...prefix,
              segment: seg.name,
              offset: r.offset,
              type: recordTypeName(r.type),
              records: r.count,
              timeMs: r.timeMs,
              time: isoTime(r.timeMs),
              texts,
              ...(describeError === undefined ? {} : { describeError }),
            }),
          );
          printed++;
        }
        const stop = reader.stop as SegmentStop;
        if (stop.kind !== 'end') {
          out(JSON.stringify({ ...prefix, segment: seg.name, offset: stop.offset, stop: stop.kind, why: whyOf(stop) }));
          const last = i === files.segments.length - 1 && canBeTorn(seg, sealed, stop);
          if (judge(stop, last) === 'damaged' && !isHeld(held, seg.path, stop.offset)) damaged = true;
        }
      } finally {
        reader.close();
      }
    });
  }
  for (const p of laneNamesNotDirs(dir, targets)) {
    damaged = true;
    note(`DAMAGED: ${p}`);
  }
  // Its exit code follows verify's, which counts a damaged commit journal too.
  if (journals.report(() => {}, (line) => note(line.trim())) > 0) damaged = true;
  if (printed === 0 && landed > 0) note(`no records: ${landed} segment${landed === 1 ? '' : 's'} landed in Iceberg and retired by the compactor`);
  return damaged ? EXIT_DAMAGED : EXIT_OK;
}

/** A record's time as ISO 8601 (UTC); null for a time no Date can hold. */
function isoTime(ms: number): string | null {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

/**
 * Segments of a lane the compactor landed and retired: numbers are taken from
 * 1 up and never reused, so each number below the highest with no file was
 * retired (deleted), and an empty file is a retired lane head kept for its
 * number (docs/iceberg.md).
 */
function retiredSegments(files: LaneFiles): number {
  let empty = 0;
  for (const s of files.segments) {
    try {
      if (statSync(s.path).size === 0) empty++;
    } catch {
      // gone meanwhile: counted as missing below
    }
  }
  const numbers = new Set(files.segments.map((s) => s.number));
  return empty + Math.max(0, files.maxNumber - numbers.size);
}

function judge(stop: SegmentStop, last: boolean): 'ok' | 'torn-ok' | 'damaged' {
  if (stop.kind === 'end') return 'ok';
  if (stop.kind === 'torn' && last) return 'torn-ok';
  return 'damaged';
}

function whyOf(stop: SegmentStop): string {
  return stop.kind === 'torn' ? stop.why : stop.kind === 'corrupt' ? stop.error.why : 'end';
}

/** Naming problems of a lane: non-canonical names and numbers held by two files. */
function namingProblems(files: LaneFiles): string[] {
  const problems: string[] = [];
  let prev: SegmentFile | null = null;
  for (const s of files.segments) {
    if (!s.canonical) problems.push(`non-canonical segment name ${s.name}`);
    if (prev !== null && prev.number === s.number) problems.push(`segment number ${s.number} used twice: ${prev.name}, ${s.name}`);
    if (s.number === Number.MAX_SAFE_INTEGER) problems.push(`segment number ${s.number} is the highest the format allows: the lane has no number left for a new segment`);
    prev = s;
  }
  return problems;
}

function lanePrefix(t: Target): Record<string, string | null> {
  const table = t.table;
  if (table === null) return { tenant: t.tenant, table: null };
  if (table.kind === 'index') return { tenant: t.tenant, table: 'index', index: table.name };
  return { tenant: t.tenant, table: table.kind };
}

function laneLabel(t: Target): string {
  return `${t.tenant ?? '?'} ${t.table === null ? '?' : tableLabel(t.table)}`;
}

/**
 * `dir` as a path under `root` (`root` joined with what lies between), or null
 * when the two differ on disk: a symbolic link (or a `..` through one) on the
 * way from the root down to `dir`. The root itself may be a link.
 */
function belowRoot(root: string, dir: string): string | null {
  const lexical = join(root, relative(root, resolve(dir)));
  try {
    return realpathSync(dir) === join(realpathSync(root), relative(root, lexical)) ? lexical : null;
  } catch {
    return lexical; // unreadable: the caller's reads say why
  }
}

/**
 * The lanes DIR stands for: itself when it holds segment files (or is an
 * empty directory whose path reads as a lane), else every lane beneath it as
 * a WAL root. Null (after a line to `say`) when DIR cannot be read.
 */
function resolveTargets(dir: string, say: (line: string) => void): Target[] | null {
  try {
    if (!statSync(dir).isDirectory()) {
      say(`${dir}: not a directory`);
      return null;
    }
  } catch (err) {
    say(`${dir}: ${(err as Error).message}`);
    return null;
  }
  const own = listLaneFiles(dir);
  const root = isWalRoot(dir) ? null : enclosingWalRoot(dir);
  if (root !== null) {
    // DIR inside a WAL root: a tenant's directory, an `indexes` directory or a lane. Read as a root
    // of its own, a tenant's lanes were printed as the default tenant's, and a lane reached through
    // a symbolic link (another tenant's, say) under this one's name.
    const below = belowRoot(root, dir);
    if (below === null) {
      say(`${dir}: reached through a symbolic link below the WAL root ${root}, which nothing that lands the WAL follows: not read`);
      return null;
    }
    const rootLanes = listLaneDirs(root);
    // A lane of the root: its tenant and table are the root's to say. Read from the path alone, a
    // tenant's lane in a root holding no other lane was printed as the default tenant's.
    const lane = rootLanes.find((l) => l.dir === below);
    if (lane !== undefined) return [{ dir, tenant: lane.tenant, table: lane.table }];
    if (own.segments.length + own.tmp.length === 0) {
      const under = rootLanes.filter((l) => l.dir === below || l.dir.startsWith(below + sep));
      if (under.length > 0) return under.map((l) => ({ dir: l.dir, tenant: l.tenant, table: l.table }));
    }
  }
  const lanes = own.segments.length + own.tmp.length > 0 ? [] : listLaneDirs(dir);
  if (lanes.length > 0) return lanes.map((l) => ({ dir: l.dir, tenant: l.tenant, table: l.table }));
  const loc = locateLaneDir(dir);
  if (loc !== null) return [{ dir, tenant: loc.tenant, table: loc.table }];
  if (own.segments.length + own.tmp.length > 0) return [{ dir, tenant: null, table: null }];
  // An empty WAL root (an ingester started, nothing written yet) holds no lane; a directory that is
  // neither root nor lane (a mistyped path, a volume not mounted) must not verify as clean.
  // (A root of a release before the marker, not in batch mode, shows itself by the compactor's WAL
  // id or a running ingester's lock, which only a root holds.)
  if (isWalRoot(dir) || [WAL_ID_FILE, INGESTER_LOCK].some((f) => existsSync(join(dir, f)))) return [];
  say(`${dir}: not a WAL directory (no ${WAL_ROOT_MARKER}, no ${JOURNAL_ROOT}, no lane, no segment)`);
  return null;
}
