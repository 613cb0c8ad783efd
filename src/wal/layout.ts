// Where a lane's segments live (contract §7, docs/wal-format.md "Directories").
//
// The default tenant's lanes sit at the WAL root; every other tenant has a
// directory of the same shape. Identifiers handed to laneDir are assumed to be
// validated already (src/tenancy/identifier.ts); listLaneDirs validates what
// it finds on disk, because a disk holds whatever was put there.

import { lstatSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Dirent } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { DEFAULT_TENANT, isValidIdentifier } from '../tenancy/identifier.js';
import { JOURNAL_ROOT } from './journal-format.js';
import { kindOf, readRegularFile } from './regular-file.js';

/** The table a lane feeds: the tenant's logs, its traces, or one of its managed indexes. */
export type WalTable =
  | { readonly kind: 'logs' }
  | { readonly kind: 'traces' }
  | { readonly kind: 'index'; readonly name: string };

export const LOGS_TABLE: WalTable = Object.freeze({ kind: 'logs' });
export const TRACES_TABLE: WalTable = Object.freeze({ kind: 'traces' });

export function indexTable(name: string): WalTable {
  return { kind: 'index', name };
}

/** One lane directory found on disk, with what it belongs to. */
export interface LaneLocation {
  readonly dir: string;
  readonly tenant: string;
  readonly table: WalTable;
}

const LOGS_DIR = 'logs';
const TRACES_DIR = 'traces';
const INDEXES_DIR = 'indexes';

/** The directory of the lane (tenant, table) under `walDir`. */
export function laneDir(walDir: string, tenant: string, table: WalTable): string {
  const base = tenant === DEFAULT_TENANT ? walDir : join(walDir, tenant);
  switch (table.kind) {
    case 'logs':
      return join(base, LOGS_DIR);
    case 'traces':
      return join(base, TRACES_DIR);
    case 'index':
      return join(base, INDEXES_DIR, table.name);
  }
}

/** A short stable label: `logs`, `traces` or `index:<name>`. */
export function tableLabel(table: WalTable): string {
  return table.kind === 'index' ? `index:${table.name}` : table.kind;
}

/**
 * Every lane directory under `walDir`, sorted by tenant (default first) then
 * table. Reserved names, hidden entries, a root directory named `default`,
 * non-directories and names that are not identifiers are skipped. A missing
 * `walDir` has no lanes.
 */
export function listLaneDirs(walDir: string): LaneLocation[] {
  const out: LaneLocation[] = [];
  const root = subdirs(walDir);
  collectTenant(walDir, DEFAULT_TENANT, root, out);
  for (const name of [...root].sort()) {
    // isValidIdentifier refuses the reserved names and anything starting with '.'.
    if (name === DEFAULT_TENANT || !isValidIdentifier(name)) continue;
    const base = join(walDir, name);
    collectTenant(base, name, subdirs(base), out);
  }
  return out;
}

function collectTenant(base: string, tenant: string, children: ReadonlySet<string>, out: LaneLocation[]): void {
  if (children.has(LOGS_DIR)) out.push({ dir: join(base, LOGS_DIR), tenant, table: LOGS_TABLE });
  if (children.has(TRACES_DIR)) out.push({ dir: join(base, TRACES_DIR), tenant, table: TRACES_TABLE });
  if (!children.has(INDEXES_DIR)) return;
  const indexes = join(base, INDEXES_DIR);
  for (const name of [...subdirs(indexes)].sort()) {
    if (isValidIdentifier(name)) out.push({ dir: join(indexes, name), tenant, table: indexTable(name) });
  }
}

/**
 * Symbolic links where listLaneDirs looks for a tenant, `indexes` or lane
 * directory, sorted. Nothing follows them: not recovery, not the compactor,
 * not `wal verify` (a link may point at another tenant's lanes, or loop), so
 * what a writer put through one would stay on disk and never land. Start-up
 * refuses a WAL that holds one, `wal verify` reports each, and a lane writer
 * refuses to open a lane reached through one.
 */
export function linksInWal(walDir: string): string[] {
  const out: string[] = [];
  const scan = (dir: string, wanted: (name: string) => boolean, then?: (child: string, name: string) => void): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    for (const e of entries) {
      if (!wanted(e.name)) continue;
      if (e.isSymbolicLink()) out.push(join(dir, e.name));
      else if (e.isDirectory()) then?.(join(dir, e.name), e.name);
    }
  };
  const laneParts = (base: string): void =>
    scan(base, (n) => n === LOGS_DIR || n === TRACES_DIR || n === INDEXES_DIR, (child, name) => {
      if (name === INDEXES_DIR) scan(child, isValidIdentifier);
    });
  laneParts(walDir);
  scan(walDir, (n) => n !== DEFAULT_TENANT && isValidIdentifier(n), laneParts);
  return out.sort();
}

/**
 * The first entry on the way from `root` down to `dir` (`dir` itself
 * included) that a lane's directory cannot go through, or null. Components
 * that do not exist yet are fine. Lstat of at most three components: a lane
 * is `[tenant/]logs`, `[tenant/]traces` or `[tenant/]indexes/<name>`.
 *
 * - `link`: a symbolic link, never followed (linksInWal).
 * - otherwise `kind` names what is there instead of a directory: a regular
 *   file named as a tenant (`<walDir>/acme`) or as a lane
 *   (`<walDir>/acme/logs`) makes every write of the lanes below it fail with
 *   ENOTDIR, the environment's doing, refused as the disk's
 *   (SIGLAKE_WAL_DISK).
 */
export function obstacleOnLanePath(root: string, dir: string): { path: string; link: boolean; kind: string } | null {
  const rel = relative(root, dir);
  if (rel === '' || rel.startsWith('..')) return null;
  let at = root;
  for (const part of rel.split(sep)) {
    at = join(at, part);
    try {
      const st = lstatSync(at);
      if (st.isDirectory()) continue;
      if (st.isSymbolicLink()) return { path: at, link: true, kind: 'a symbolic link' };
      return { path: at, link: false, kind: st.isFile() ? 'a regular file' : kindOf(st) };
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }
  return null;
}

/**
 * A file `siglake ingest` writes at its WAL root when it starts. With the
 * batch mode's `.journal` directory it tells a root from a tenant's (or a
 * lane's) directory, which never holds either.
 */
export const WAL_ROOT_MARKER = '.siglake-wal-root';

/** Writes the root marker unless it is there (`dir` exists). */
export function markWalRoot(dir: string): void {
  try {
    writeFileSync(join(dir, WAL_ROOT_MARKER), 'siglake WAL root: tenant and lane directories lie below (docs/wal-format.md)\n', { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * The WAL root that `dir` lies inside, or null: `dir` given as a root is then
 * a tenant's directory (`<root>/<tenant>`), an `indexes` directory or a lane.
 * An ingester started there would write the default tenant's lanes into that
 * tenant's, and a compactor would land that tenant's lanes as the default
 * tenant's. Looks up to three levels up for the root marker or a `.journal`
 * directory. (Two WAL roots side by side, `/data/wal/a` and `/data/wal/b`,
 * hold neither above them, so are not mistaken for tenants.)
 */
export function enclosingWalRoot(dir: string): string | null {
  let at = resolve(dir);
  for (let i = 0; i < 3; i++) {
    const up = dirname(at);
    if (up === at) return null;
    at = up;
    if (isWalRoot(at)) return at;
  }
  return null;
}

/**
 * Why `walDir` cannot be a WAL root, or null: it lies inside another root
 * (enclosingWalRoot), or, with `links`, holds symbolic links where lanes live
 * (linksInWal). `siglake ingest` refuses to start on either (exit 2);
 * `siglake compact` on the first, and logs the links it will not follow.
 */
export function walRootProblem(walDir: string, links = true): string | null {
  const outer = enclosingWalRoot(walDir);
  if (outer !== null) {
    return `ingester.walDir ${walDir} lies inside the WAL root ${outer} (it is a tenant's, an index's or a lane's directory there): its lanes would be taken for the default tenant's; give the root itself`;
  }
  const found = links ? linksInWal(walDir) : [];
  if (found.length === 0) return null;
  const named = found.length > 5 ? `${found.slice(0, 5).join(', ')} and ${found.length - 5} more` : found.join(', ');
  return `ingester.walDir ${walDir} holds a symbolic link where a tenant or lane directory lives (${named}): nothing that lands the WAL follows one, so what is written through it would never land; mount the disk at that path instead`;
}

/** The file a running `siglake ingest` keeps at its WAL root: who writes it now. */
export const INGESTER_LOCK = '.siglake-ingester';

interface IngesterLock {
  readonly pid: number;
  readonly host: string;
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): a reused pid is not it. */
  readonly started: string | null;
}

function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Writes the lock of this process at the root (replacing one a crashed ingester left). */
export function lockWalRoot(dir: string): void {
  const lock: IngesterLock = { pid: process.pid, host: hostname(), started: processStart(process.pid) };
  // Written beside and renamed over the name: whatever stands there is replaced, never written
  // through (a FIFO under the name held the start for ever in open(); a link would be followed).
  const target = join(dir, INGESTER_LOCK);
  const tmp = `${target}.tmp`;
  rmSync(tmp, { force: true });
  writeFileSync(tmp, `${JSON.stringify(lock)}\n`, { flag: 'wx' });
  renameSync(tmp, target);
}

/** Removes this process's lock (a stop that finished). */
export function unlockWalRoot(dir: string): void {
  rmSync(join(dir, INGESTER_LOCK), { force: true });
}

/**
 * The ingester that writes `walDir` now, as a sentence, or null: a lock of a
 * live process on this host with the same start time. A lock of another host
 * cannot be checked from here (a pod gone, its volume mounted by a drain Job
 * elsewhere): it is not taken as live.
 */
export function liveIngester(walDir: string): string | null {
  let lock: IngesterLock;
  try {
    lock = JSON.parse(readRegularFile(join(walDir, INGESTER_LOCK), 4096).toString('utf8')) as IngesterLock;
  } catch {
    return null;
  }
  if (lock.host !== hostname() || !Number.isSafeInteger(lock.pid)) return null;
  try {
    process.kill(lock.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return null;
  }
  if (lock.started !== null && processStart(lock.pid) !== lock.started) return null;
  return `an ingester (pid ${lock.pid}) writes ${walDir}: stop it first`;
}

/**
 * Why `walDir` cannot be drained, or null: a drain (or `compact
 * --ingester-stopped`) that found nothing to land says "drained", the signal
 * that the volume may go, so a path that is not a WAL root must be refused,
 * not read as an empty WAL (a mount in another place, a typo). A root is a
 * directory with the marker an ingester writes at start, the batch mode's
 * `.journal`, or lanes (a WAL older than the marker).
 */
export function drainRootProblem(walDir: string): string | null {
  const inside = walRootProblem(walDir, false);
  if (inside !== null) return inside;
  // Beside a live writer a drain takes its live segments as sealed, lands them and truncates them
  // while it still appends: acknowledged records lost, a segment left with a zeroed header.
  const live = liveIngester(walDir);
  if (live !== null) return `${live} (a drain, or compact --ingester-stopped, beside it lands and retires segments it still appends to)`;
  return absentRootProblem(walDir, 'nothing to drain there, and nothing that says the volume may go');
}

/**
 * Why `compact --once` cannot land `walDir`, or null: as a drain's check
 * without the live writer (landing sealed segments beside one is its job).
 * It exited 0 for a directory that does not exist or holds no WAL, the
 * answer of a WAL with nothing sealed: a volume mounted elsewhere went
 * unnoticed by the cron job that ran it.
 */
export function onceRootProblem(walDir: string): string | null {
  return walRootProblem(walDir, false) ?? absentRootProblem(walDir, 'nothing to land there');
}

function absentRootProblem(walDir: string, absent: string): string | null {
  if (!exists(walDir, true)) return `ingester.walDir ${walDir} does not exist: ${absent}`;
  if (isWalRoot(walDir) || listLaneDirs(walDir).length > 0) return null;
  return `ingester.walDir ${walDir} is not a WAL root (no ${WAL_ROOT_MARKER}, no .journal, no lane): is the volume mounted there?`;
}

/** The directory is a WAL root an ingester made: it holds the root marker, or batch mode's `.journal`. */
export function isWalRoot(dir: string): boolean {
  return exists(join(dir, WAL_ROOT_MARKER), false) || exists(join(dir, JOURNAL_ROOT), true);
}

function exists(path: string, dir: boolean): boolean {
  try {
    const st = statSync(path);
    return dir ? st.isDirectory() : st.isFile();
  } catch {
    return false;
  }
}

/**
 * Reads a lane directory's tenant and table from its path, for commands given
 * one lane instead of the root. The table comes from the last components
 * (`…/logs`, `…/traces`, `…/indexes/<name>`); null when they are none of
 * these. The directory above the table part is taken as a tenant directory
 * when its parent looks like a WAL root holding other lanes (see
 * docs/wal-format.md); otherwise the lane is the default tenant's.
 */
export function locateLaneDir(dir: string): LaneLocation | null {
  const abs = resolve(dir);
  const name = basename(abs);
  const parent = dirname(abs);
  let table: WalTable;
  let above: string;
  if (name === LOGS_DIR) {
    table = LOGS_TABLE;
    above = parent;
  } else if (name === TRACES_DIR) {
    table = TRACES_TABLE;
    above = parent;
  } else if (basename(parent) === INDEXES_DIR && isValidIdentifier(name)) {
    table = indexTable(name);
    above = dirname(parent);
  } else {
    return null;
  }
  const tenant = basename(above);
  const isTenant = tenant !== DEFAULT_TENANT && isValidIdentifier(tenant) && looksLikeRoot(dirname(above), tenant);
  return { dir, tenant: isTenant ? tenant : DEFAULT_TENANT, table };
}

/** Whether `root` holds lanes of its own, or of a tenant other than `except`. */
function looksLikeRoot(root: string, except: string): boolean {
  const children = subdirs(root);
  if (children.has(LOGS_DIR) || children.has(TRACES_DIR) || children.has(INDEXES_DIR)) return true;
  for (const c of children) {
    if (c === except || c === DEFAULT_TENANT || !isValidIdentifier(c)) continue;
    const inner = subdirs(join(root, c));
    if (inner.has(LOGS_DIR) || inner.has(TRACES_DIR) || inner.has(INDEXES_DIR)) return true;
  }
  return false;
}

/** Names of the sub-directories of `dir` (not following symlinks); empty when `dir` is unreadable. */
export function subdirs(dir: string): Set<string> {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if (isNotFound(err)) return new Set();
    throw err;
  }
  const names = new Set<string>();
  for (const e of entries) if (e.isDirectory()) names.add(e.name);
  return names;
}

function isNotFound(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
