// `siglake <command> --help`: usage generated from the settings table, so the
// help can never drift from the flags a command accepts. Each command names
// the setting categories it reads (COMMANDS below: add a row for a new
// command, or a category to a row); the flags are grouped by category, each
// with its default in human units, its environment variable and the first
// sentence of its doc, fitted to the terminal width.

import { CATEGORY_TITLES } from './reference.js';
import { SETTINGS, envName, settingNames, type Category, type SettingName } from './settings.js';

/** A flag a command takes that is not a setting (`--once`, `--help`). */
export interface ExtraFlag {
  readonly flag: string;
  readonly value?: string;
  readonly doc: string;
}

export interface CommandHelp {
  readonly usage: readonly string[];
  readonly summary: string;
  /** The setting categories the command reads; 'all' takes every one, present and future. */
  readonly categories: readonly Category[] | 'all';
  /** Categories 'all' leaves out (those only another command reads). */
  readonly except?: readonly string[];
  /** Single settings the command reads beyond its categories (the query server's tenants file). */
  readonly also?: readonly SettingName[];
  readonly extra?: readonly ExtraFlag[];
  readonly subcommands?: readonly ExtraFlag[];
  readonly more?: readonly string[];
}

const HELP_FLAG: ExtraFlag = { flag: '--help', doc: 'Print this help and exit (also -h).' };
const CONFIG_FLAG: ExtraFlag = {
  flag: '--config',
  value: 'FILE',
  doc: 'YAML file of settings (keys as in docs/configuration.md); env SIGLAKE_CONFIG. Flags beat env vars beat the file.',
};

/** Command → what its help shows. Extend here when a command or a settings category is added. */
export const COMMANDS: Readonly<Record<string, CommandHelp>> = {
  ingest: {
    usage: ['siglake ingest [flags]'],
    summary: 'Run the ingester: OTLP/HTTP and OTLP/gRPC into per-tenant WALs, landed in Iceberg by the compactor.',
    categories: 'all',
    except: ['query'],
    extra: [CONFIG_FLAG, HELP_FLAG],
    more: ['Every flag is also an env var and a YAML key: docs/configuration.md (`siglake config reference`).'],
  },
  compact: {
    usage: ['siglake compact [--once] [--ingester-stopped] [flags]'],
    summary: 'Land sealed WAL segments in the Iceberg tables (docs/iceberg.md).',
    categories: ['iceberg', 'logging'],
    also: ['walDir'],
    extra: [
      { flag: '--once', doc: 'Run rounds until no sealed segment is left, then exit (0: all landed; 1: a table failed; 2: --wal-dir does not exist or is no WAL root). Without it: a round every --compact-interval-secs until SIGTERM.' },
      { flag: '--ingester-stopped', doc: "No ingester writes this WAL: seal each lane's highest segment too." },
      CONFIG_FLAG,
      HELP_FLAG,
    ],
  },
  wal: {
    usage: ['siglake wal verify DIR', 'siglake wal dump DIR'],
    summary: 'Offline, read-only tools for a WAL directory (the WAL root or one lane directory; docs/wal-format.md).',
    categories: [],
    extra: [HELP_FLAG],
    subcommands: [
      { flag: 'verify DIR', doc: "Check every segment. Exit 0 clean (a torn tail in a lane's last segment is allowed), 1 damage recovery would not repair, 2 DIR unreadable or no WAL directory (no root marker, lane or segment)." },
      { flag: 'dump DIR', doc: 'Print one JSON line per record (tenant, table, segment, offset, type, records, timeMs and time, texts). Safe to pipe into head.' },
    ],
  },
  query: {
    usage: ['siglake query [flags]'],
    summary: "Run the query server: SQL over the caller's own tenant namespace of the Iceberg tables (docs/query.md).",
    categories: ['query', 'auth', 'iceberg', 'logging'],
    also: ['tenantsFile', 'shutdownTimeoutSecs', 'requestTimeoutSecs'],
    extra: [CONFIG_FLAG, HELP_FLAG],
    more: [
      '--shutdown-timeout-secs bounds how long running queries may finish on SIGTERM; --request-timeout-secs how long a request (headers and body) may take to arrive (408); --tenants-file declares the tenants the query server admits (docs/tenants.md).',
    ],
  },
  drain: {
    usage: ['siglake drain [flags]'],
    summary:
      'Land every record a WAL volume holds in the Iceberg tables, once the ingester that wrote it has stopped (a pod scaled down). Exit 0 only when nothing is left: the volume may then go (docs/iceberg.md).',
    categories: ['iceberg', 'logging'],
    also: ['walDir'],
    extra: [CONFIG_FLAG, HELP_FLAG],
    more: ['A --wal-dir that does not exist or is no WAL root is refused (exit 2), never reported drained.'],
  },
  retention: {
    usage: ['siglake retention [--once] [flags]'],
    summary: "Enforce each table's retention over every namespace: drop old days, expire snapshots, delete unreferenced files (docs/iceberg.md).",
    categories: ['iceberg', 'logging'],
    extra: [{ flag: '--once', doc: 'Run one round and exit. Without it: a round every hour until SIGTERM.' }, CONFIG_FLAG, HELP_FLAG],
  },
  migrate: {
    usage: ['siglake migrate [--all-namespaces] [--dry-run] [flags]'],
    summary: 'Bring table schemas to this release (adds columns only; idempotent, safe while ingest and compaction run).',
    categories: ['iceberg', 'logging'],
    extra: [
      { flag: '--all-namespaces', doc: 'Every tenant_* namespace too (default: the tables of main only).' },
      { flag: '--dry-run', doc: 'Print what would change, change nothing.' },
      CONFIG_FLAG,
      HELP_FLAG,
    ],
  },
  index: {
    usage: [
      'siglake index create|update --file F [--tenant T] [flags]',
      'siglake index list [--tenant T] [flags]',
      'siglake index show|delete NAME [--tenant T] [flags]',
    ],
    summary: "Manage a tenant's indexes offline, straight against the catalog and the warehouse (docs/indexes.md).",
    categories: ['iceberg', 'logging'],
    extra: [
      { flag: '--file', value: 'F', doc: 'The YAML or JSON of an index definition (- for standard input).' },
      { flag: '--tenant', value: 'T', doc: 'The tenant (default: default, namespace main).' },
      CONFIG_FLAG,
      HELP_FLAG,
    ],
    subcommands: [
      { flag: 'create', doc: 'Create the index from --file; exit 1 with SIGLAKE_INDEX_EXISTS when the tenant has it.' },
      { flag: 'update', doc: 'Replace its definition (mapped columns may be added, never retyped).' },
      { flag: 'list', doc: "Print the tenant's indexes as JSON." },
      { flag: 'show NAME', doc: 'Print one index as JSON.' },
      { flag: 'delete NAME', doc: 'Drop the index from the catalog; what the WAL still holds for it is dropped, not landed.' },
    ],
  },
  config: {
    usage: ['siglake config reference'],
    summary: 'Print the configuration reference (Markdown, the text of docs/configuration.md): every setting as YAML key, flag and env var.',
    categories: [],
    extra: [HELP_FLAG],
  },
};

/** True when argv asks for help (`--help` or `-h` anywhere). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** 16777216 → "16 MiB"; 1000 → "1000 B"; exact multiples only, so nothing is rounded away. */
export function humanBytes(n: number): string {
  let v = n;
  let u = 0;
  while (u < UNITS.length - 1 && v >= 1024 && v % 1024 === 0) {
    v /= 1024;
    u++;
  }
  return `${v.toLocaleString('en-US')} ${UNITS[u]}`;
}

/** The default of a setting as a person reads it: units from the flag's suffix. */
export function humanDefault(name: SettingName): string {
  const d = SETTINGS[name];
  if (d.defaultDoc !== undefined) return d.defaultDoc;
  const v = d.default;
  if (v === undefined) return 'unset';
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.join(',');
  if (typeof v === 'number') {
    const f = d.flag;
    if (f.endsWith('-bytes')) return humanBytes(v);
    if (f.endsWith('-kib')) return v === 0 ? '0 (off)' : humanBytes(v * 1024);
    if (f.endsWith('-mib')) return v === 0 ? '0 (off)' : humanBytes(v * 1024 * 1024);
    if (f.endsWith('-secs')) return `${v.toLocaleString('en-US')} s`;
    if (f.endsWith('-ms')) return `${v.toLocaleString('en-US')} ms`;
    return v.toLocaleString('en-US');
  }
  if (typeof v === 'boolean') return v ? 'on' : 'off';
  return String(v);
}

/** The first sentence of a doc (up to the first ". " outside backticks, or all of it). */
export function firstSentence(doc: string): string {
  let ticks = false;
  for (let i = 0; i < doc.length; i++) {
    const c = doc[i];
    if (c === '`') ticks = !ticks;
    else if (!ticks && c === '.' && doc[i + 1] === ' ') return doc.slice(0, i + 1);
  }
  return doc;
}

/** Word-wraps `text` to `width` columns, every line after the first (and the first) indented by `indent`. */
export function wrap(text: string, width: number, indent: number): string[] {
  const room = Math.max(10, width - indent);
  const lines: string[] = [];
  let line = '';
  const words: string[] = [];
  for (const w of text.split(/\s+/).filter(Boolean)) {
    // A word wider than the room is cut, after a comma or slash where there is one.
    let rest = w;
    while (rest.length > room) {
      const head = rest.slice(0, room);
      const at = Math.max(head.lastIndexOf(','), head.lastIndexOf('/'));
      const cut = at > room / 2 ? at + 1 : room;
      words.push(rest.slice(0, cut));
      rest = rest.slice(cut);
    }
    words.push(rest);
  }
  for (const word of words) {
    if (line === '') line = word;
    else if (line.length + 1 + word.length <= room) line += ` ${word}`;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line !== '') lines.push(line);
  const pad = ' '.repeat(indent);
  return lines.map((l) => pad + l);
}

/** The whole doc when it fits two lines, else its first sentence. */
function docLine(doc: string, width: number): string {
  return wrap(doc, width, 6).length <= 2 ? doc : firstSentence(doc);
}

function valueHint(name: SettingName): string {
  const d = SETTINGS[name];
  if (typeof d.default === 'boolean') return '';
  if (d.flag.endsWith('-bytes')) return ' BYTES';
  if (d.flag.endsWith('-secs')) return ' SECS';
  if (d.flag.endsWith('-ms')) return ' MS';
  if (d.flag.endsWith('-mib')) return ' MIB';
  if (d.flag.endsWith('-kib')) return ' KIB';
  if (d.flag.endsWith('-listen')) return ' HOST:PORT';
  if (d.flag.endsWith('-url') || d.flag.endsWith('-endpoint')) return ' URL';
  // A computed default (a function) says nothing of its type: the bursts are counts.
  if (d.flag.endsWith('-burst')) return ' N';
  if (d.flag.endsWith('-file') || d.flag === '--wal-dir' || d.flag === '--warehouse') return ' PATH';
  if (Array.isArray(d.default)) return ' A,B';
  if (typeof d.default === 'number') return ' N';
  return ' VALUE';
}

/** One flag as a block: the flag line (flag, default, env var), then the doc, indented. */
function flagBlock(flag: string, meta: string, doc: string, width: number): string[] {
  const head = `  ${flag}`;
  const out: string[] = [];
  if (meta === '') out.push(head);
  else if (head.length + 2 + meta.length <= width) out.push(`${head}  ${meta}`);
  else out.push(head, ...wrap(meta, width, 6));
  out.push(...wrap(doc, width, 6));
  return out;
}

/**
 * The settings `command` reads: its categories' and its `also`. A flag of any
 * other setting is refused on its command line (src/config/load.ts); env vars
 * and a YAML file shared by the fleet may hold them all. Undefined for an
 * unknown command.
 */
export function commandSettings(command: string): ReadonlySet<SettingName> | undefined {
  const c = COMMANDS[command];
  if (c === undefined) return undefined;
  const cats = (n: SettingName): boolean => {
    const cat = SETTINGS[n].category;
    return c.categories === 'all' ? !(c.except ?? []).includes(cat) : c.categories.includes(cat);
  };
  return new Set(settingNames().filter((n) => cats(n) || (c.also ?? []).includes(n)));
}

/** The help text of `command`, fitted to `width` columns. Undefined for an unknown command. */
export function commandHelp(command: string, width = 80): string | undefined {
  const c = COMMANDS[command];
  if (c === undefined) return undefined;
  const w = Math.max(40, Math.min(width, 120));
  const lines: string[] = [];
  c.usage.forEach((u, i) => {
    const [first, ...more] = wrap(u, w - 7, 0);
    lines.push(`${i === 0 ? 'usage: ' : '       '}${first}`, ...more.map((m) => `       ${m}`));
  });
  lines.push('', ...wrap(c.summary, w, 0));
  for (const m of c.more ?? []) lines.push('', ...wrap(m, w, 0));
  if (c.subcommands !== undefined) {
    lines.push('', 'Commands:');
    for (const e of c.subcommands) lines.push(...flagBlock(e.flag, '', e.doc, w));
  }
  const reads = commandSettings(command)!;
  const names = settingNames().filter((n) => reads.has(n));
  for (const cat of new Set(names.map((n) => SETTINGS[n].category))) {
    lines.push('', `${(CATEGORY_TITLES as Record<string, string>)[cat] ?? cat}:`);
    for (const n of names.filter((m) => SETTINGS[m].category === cat)) {
      const d = SETTINGS[n];
      lines.push(...flagBlock(`${d.flag}${valueHint(n)}`, `default ${humanDefault(n)} · ${envName(d.flag)}`, docLine(d.doc, w), w));
    }
  }
  if (c.extra !== undefined && c.extra.length > 0) {
    lines.push('', 'Other flags:');
    for (const e of c.extra) lines.push(...flagBlock(`${e.flag}${e.value !== undefined ? ` ${e.value}` : ''}`, '', e.doc, w));
  }
  return lines.join('\n') + '\n';
}

/** Terminal width of stdout, 80 when it is not a terminal. */
export function terminalWidth(): number {
  const cols = process.stdout.columns;
  return typeof cols === 'number' && cols > 0 ? cols : 80;
}
