// The one table of settings. Flags, environment variables, YAML keys, the
// defaults, `siglake config reference` and docs/configuration.md are all
// derived from it, so none of them can drift from the code (contract §2).
//
// Naming rule, no exceptions: the env var is SIGLAKE_ + the flag without its
// leading dashes, upper-cased, with `-` turned into `_`.

import os from 'node:os';
import { ASYMMETRIC_ALGORITHMS } from '../auth/algorithms.js';
import { parseS3Uri } from '../iceberg/s3-uri.js';
import { isValidIdentifier } from '../tenancy/identifier.js';
import { MAX_REQUEST_BYTES_SETTING, MAX_SEGMENT_BYTES_SETTING } from '../wal/format.js';
import {
  boolean,
  integer,
  list,
  listenAddress,
  number,
  oneOf,
  string,
  url,
  ValueError,
  type ListenAddress,
  type Parser,
} from './parsers.js';

export type Category = 'server' | 'ingester' | 'wal' | 'iceberg' | 'tenancy' | 'limits' | 'auth' | 'logging' | 'query';

export interface SettingDef<T> {
  /** YAML key: the Helm-values path. */
  readonly key: string;
  readonly flag: string;
  readonly category: Category;
  readonly doc: string;
  readonly parse: Parser<T>;
  /**
   * The built-in default, or a function of the settings above it in the table
   * (computed in table order). `undefined` means unset: such a setting is
   * declared with optional() and its value may be undefined in Settings.
   */
  readonly default: T | undefined | ((s: ComputedFrom) => T | undefined);
  /** How the default is shown in the reference (for computed ones). */
  readonly defaultDoc?: string;
  /** Never printed: tokens and URLs with credentials. */
  readonly secret?: boolean;
  /** May be unset (its value in Settings may be undefined). Set by optional(). */
  readonly optional?: boolean;
}

/**
 * What the computed defaults read: settings above them in the table, resolved
 * first. Spelled out (Settings itself is derived from the table, so the table
 * cannot refer to it); `SettingsForComputedDefaults` below keeps each type in
 * step with the setting's own.
 */
interface ComputedFrom {
  readonly rateLimitPerSec?: number;
  readonly rateLimitBurst?: number;
  readonly rateLimitGlobalPerSec?: number;
  readonly oidcIssuer?: string | undefined;
}

function def<T>(d: SettingDef<T>): SettingDef<T> {
  return d;
}

/** A setting that may stay unset: Settings types its value `T | undefined`. */
function optional<T>(d: Omit<SettingDef<T>, 'optional'>): SettingDef<T> & { readonly optional: true } {
  return { ...d, optional: true };
}

/** `sqlite:<path>` or a `postgres://` / `postgresql://` URL (contract §10). */
const catalogUrl: Parser<string> = (raw) => {
  if (typeof raw !== 'string' || raw === '') throw new ValueError('must be sqlite:<path> or a postgres:// URL');
  if (raw.startsWith('sqlite:')) {
    if (raw.length === 'sqlite:'.length) throw new ValueError('sqlite: needs a file path, e.g. sqlite:./data/catalog.db');
    return raw;
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ValueError('must be sqlite:<path> or a postgres:// URL');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new ValueError('must be sqlite:<path> or a postgres:// URL');
  return raw;
};

/** A local directory, or `s3://<bucket>[/<prefix>]`. */
const warehousePath: Parser<string> = (raw) => {
  const p = string({ nonEmpty: true })(raw);
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(p)) return p;
  if (!p.startsWith('s3://')) throw new ValueError('must be a local directory or s3://<bucket>[/<prefix>]');
  try {
    parseS3Uri(p);
  } catch (e) {
    throw new ValueError((e as Error).message);
  }
  return p;
};

/**
 * A shared secret sent as an HTTP header value: printable ASCII with no blank
 * at either end (a header's ends are trimmed on the way, so such a token could
 * never match; a line break in one fails every request that carries it).
 * Its text is never echoed.
 */
export const headerToken: Parser<string> = (raw) => {
  const t = string({ nonEmpty: true })(raw);
  if (!/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(t)) {
    throw new ValueError('must be printable ASCII, no line break or other control character and no blank at either end (it is sent as an HTTP header)');
  }
  return t;
};

const defaultWorkers = Math.max(1, os.availableParallelism() - 1);


export const SETTINGS = {
  httpListen: def<ListenAddress>({
    key: 'server.httpListen',
    flag: '--http-listen',
    category: 'server',
    default: { host: '0.0.0.0', port: 4318 },
    defaultDoc: '0.0.0.0:4318',
    doc: 'Address for OTLP/HTTP and the admin endpoints (/healthz, /readyz, and /metrics unless server.metricsListen is set). Port 0 picks a free port. A host name is resolved once at start (one that does not resolve is refused) and listened on at its first address (docs/operations.md).',
    parse: listenAddress,
  }),
  metricsListen: optional<ListenAddress>({
    key: 'server.metricsListen',
    flag: '--metrics-listen',
    category: 'server',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'Address for /metrics alone, apart from the OTLP ports; the OTLP/HTTP port then answers /metrics 404. Its series name tenants and indexes (the compactor\'s counters per namespace and table, the declared tenants\' siglake_tenant_*), which any caller of the OTLP/HTTP port could read without credentials: set it wherever tenants can reach that port, and let only Prometheus reach this one. Unset: /metrics is served on server.httpListen. Port 0 picks a free port. A host name is resolved once at start (one that does not resolve is refused) and listened on at its first address (docs/operations.md).',
    parse: listenAddress,
  }),
  grpcListen: def<ListenAddress>({
    key: 'server.grpcListen',
    flag: '--grpc-listen',
    category: 'server',
    default: { host: '0.0.0.0', port: 4317 },
    defaultDoc: '0.0.0.0:4317',
    doc: 'Address for OTLP/gRPC. Port 0 picks a free port. A host name is resolved once at start (one that does not resolve is refused) and listened on at its first address (docs/operations.md).',
    parse: listenAddress,
  }),
  maxRequestBytes: def<number>({
    key: 'server.maxRequestBytes',
    flag: '--max-request-bytes',
    category: 'server',
    default: 16 * 1024 * 1024,
    doc: 'Request body cap in bytes, enforced while the body streams in and again after gzip decompression (413).',
    parse: integer({ min: 1024, max: MAX_REQUEST_BYTES_SETTING }),
  }),
  requestTimeoutSecs: def<number>({
    key: 'server.requestTimeoutSecs',
    flag: '--request-timeout-secs',
    category: 'server',
    default: 30,
    doc: 'A request body must arrive whole within this many seconds, or the connection is answered 408 and closed. Connections idle for 10 s are closed by the HTTP server itself.',
    parse: integer({ min: 1, max: 3600 }),
  }),
  shutdownTimeoutSecs: def<number>({
    key: 'server.shutdownTimeoutSecs',
    flag: '--shutdown-timeout-secs',
    category: 'server',
    default: 25,
    doc: 'On SIGTERM, how long to wait for queued requests to be written before exiting anyway.',
    parse: integer({ min: 1, max: 3600 }),
  }),
  allowUwsFallback: def<boolean>({
    key: 'server.allowUwsFallback',
    flag: '--allow-uws-fallback',
    category: 'server',
    default: false,
    doc: "Start even when uWebSockets.js's native binary cannot load, on its slow JavaScript fallback. Off: start-up fails.",
    parse: boolean,
  }),
  workers: def<number>({
    key: 'ingester.workers',
    flag: '--workers',
    category: 'ingester',
    default: defaultWorkers,
    defaultDoc: 'cores − 1, at least 1',
    doc: 'Writer worker threads. Each owns a shard of the (tenant, index) lanes and their WAL files.',
    parse: integer({ min: 1, max: 256 }),
  }),
  workerYoungGenerationMib: def<number>({
    key: 'ingester.workerYoungGenerationMib',
    flag: '--worker-young-generation-mib',
    category: 'ingester',
    default: 6,
    doc: "Each writer worker's V8 young generation, MiB (the worker's resourceLimits.maxYoungGenerationSizeMb; about a third of it is one semi-space). A worker's garbage is short-lived, so a small one costs little CPU and keeps memory from growing with the worker count (with V8's own default, about 12 MiB more a busy worker: 661 against 479 MiB with 15 workers, docs/performance.md \"On 16 cores\"). 0: V8's default.",
    parse: integer({ min: 0, max: 1024 }),
  }),
  otlpWalk: def<'auto' | 'native' | 'js'>({
    key: 'ingester.otlpWalk',
    flag: '--otlp-walk',
    category: 'ingester',
    default: 'auto',
    doc: "The fast protobuf walk that validates every OTLP body before the exact one (which words refusals): `native`, the C addon `npm run build` compiles (about twice as fast on large bodies; start-up fails when it does not load); `js`, the JavaScript walk; `auto`, the addon when it loads, else the JavaScript walk with a warning. Both accept and refuse exactly the same bodies.",
    parse: oneOf(['auto', 'native', 'js'] as const),
  }),
  walDir: def<string>({
    key: 'ingester.walDir',
    flag: '--wal-dir',
    category: 'wal',
    default: './data/wal',
    doc: 'WAL root directory; its layout is in docs/wal-format.md.',
    parse: string({ nonEmpty: true }),
  }),
  walFsync: def<'batch' | 'interval' | 'never'>({
    key: 'ingester.wal.fsync',
    flag: '--wal-fsync',
    category: 'wal',
    default: 'batch',
    doc: '`batch`: acknowledge after fdatasync (group commit); `interval`: acknowledge after write, fdatasync every --wal-fsync-interval-ms; `never`: leave flushing to the OS.',
    parse: oneOf(['batch', 'interval', 'never'] as const),
  }),
  walFsyncIntervalMs: def<number>({
    key: 'ingester.wal.fsyncIntervalMs',
    flag: '--wal-fsync-interval-ms',
    category: 'wal',
    default: 100,
    doc: 'fdatasync period in `interval` mode: the window of acknowledged data a machine crash can lose.',
    parse: integer({ min: 1, max: 60_000 }),
  }),
  walRoundsInFlight: def<number>({
    key: 'ingester.wal.roundsInFlight',
    flag: '--wal-rounds-in-flight',
    category: 'wal',
    default: 1,
    doc: '`batch` mode: rounds a writer worker keeps in flight. 2 writes the next round while the last one\'s commit-journal fdatasync runs (on the thread pool), for disks whose fdatasync is slow next to a round\'s work (network block storage); on a local disk with a fast fdatasync it measured slower (docs/performance.md). Acknowledgement still follows each round\'s own fdatasync. (A direct round, --wal-direct-round-kib, is always synced on the pool while the next round is written when requests wait.)',
    parse: integer({ min: 1, max: 2 }),
  }),
  walDirectRoundKib: def<number>({
    key: 'ingester.wal.directRoundKib',
    flag: '--wal-direct-round-kib',
    category: 'wal',
    default: 1024,
    doc: "`batch` mode: a round that writes at least this many KiB, all to one lane, skips the commit journal: the writer fdatasyncs that lane's segments (and its directory, when the round created a segment) instead, so its bytes reach the disk once rather than twice (journal, then segment). Rounds of many lanes, and smaller ones, are journaled as before. 0: every round is journaled.",
    parse: integer({ min: 0, max: 64 * 1024 }),
  }),
  walDeferLaneWrites: def<boolean>({
    key: 'ingester.wal.deferLaneWrites',
    flag: '--wal-defer-lane-writes',
    category: 'wal',
    default: true,
    doc: "`batch` mode: a lane whose live segment's descriptor the LRU has closed (more lanes are written than --wal-max-open-files holds) writes a round's records to the commit journal only; the next checkpoint reads them back from the journal and writes them to the lane's segment, once per lane, before it syncs it. A round then opens no lane file, and the checkpoint writes each lane once instead of once per request. The lane segments of those lanes lag the journal by up to one checkpoint (every acknowledged record is durable in the journal meanwhile, and a restart replays it). Lanes whose descriptor is open write as before. `--wal-defer-lane-writes=false` writes every round to its lanes.",
    parse: boolean,
  }),
  walDropSyncedPages: def<boolean>({
    key: 'ingester.wal.dropSyncedPages',
    flag: '--wal-drop-synced-pages',
    category: 'wal',
    default: true,
    doc: "Once a WAL segment's bytes are durable, drop their pages from the page cache (posix_fadvise DONTNEED, as PostgreSQL does for its WAL): segments are written once and read again only by the compactor, which then reads them from disk. Needs the native addon `npm run build` compiles; without it (a warning at start-up) pages are left to the kernel. `--wal-drop-synced-pages=false` turns it off.",
    parse: boolean,
  }),
  walJournalRecycle: def<boolean>({
    key: 'ingester.wal.journalRecycle',
    flag: '--wal-journal-recycle',
    category: 'wal',
    default: true,
    doc: "`batch` mode: a checkpoint keeps up to two retired commit-journal files per worker as spares, and the next files reuse them, instead of deleting them. A round's fdatasync then overwrites allocated blocks (on ext4 about half the time of an append's), and no checkpoint frees a large file's blocks (with the `discard` mount option that held every other fdatasync for the trim). Costs up to two journal files of disk per worker (each at most about 256 MiB, the size at which a journal file gives way to the next). Off on copy-on-write file systems (btrfs, ZFS), where reusing blocks gains nothing.",
    parse: boolean,
  }),
  walJournalPrefillMib: def<number>({
    key: 'ingester.wal.journalPrefillMib',
    flag: '--wal-journal-prefill-mib',
    category: 'wal',
    default: 32,
    doc: "`batch` mode: the first spare of each worker's commit journal (until recycling provides them) is a file of this many MiB of zeros, written and fdatasynced on the thread pool once a journal file of the life holds 1 MiB. 0: the journal appends to new files until the first checkpoint retires one.",
    parse: integer({ min: 0, max: 1024 }),
  }),
  walSegmentBytes: def<number>({
    key: 'ingester.wal.segmentBytes',
    flag: '--wal-segment-bytes',
    category: 'wal',
    default: 64 * 1024 * 1024,
    doc: 'Segment rotation size in bytes. A record never crosses segments.',
    parse: integer({ min: 4096, max: MAX_SEGMENT_BYTES_SETTING }),
  }),
  walSegmentMaxAgeSecs: def<number>({
    key: 'ingester.wal.segmentMaxAgeSecs',
    flag: '--wal-segment-max-age-secs',
    category: 'wal',
    default: 60,
    doc: "A lane's live segment is sealed at this age (and at shutdown) so the compactor can take it. 0 seals only by size.",
    parse: integer({ min: 0 }),
  }),
  walMaxOpenFiles: def<number>({
    key: 'ingester.wal.maxOpenFiles',
    flag: '--wal-max-open-files',
    category: 'wal',
    default: 1024,
    doc: "Open WAL segment files across all workers (an LRU). Bounds file descriptors however many lanes exist. In batch mode it includes each worker's commit journal and checkpoint syncs.",
    parse: integer({ min: 1, max: 1_000_000 }),
  }),
  catalogUrl: def<string>({
    key: 'catalog.url',
    flag: '--catalog-url',
    category: 'iceberg',
    default: 'sqlite:./data/catalog.db',
    doc: 'The Iceberg SQL catalog (the JdbcCatalog / pyiceberg SqlCatalog schema): `sqlite:<path>` (embedded) or `postgres://…` for a catalog shared with other engines.',
    parse: catalogUrl,
    secret: true,
  }),
  catalogName: def<string>({
    key: 'catalog.name',
    flag: '--catalog-name',
    category: 'iceberg',
    default: 'siglake',
    doc: 'The `catalog_name` column value of every row Siglake writes in the catalog tables.',
    parse: string({ nonEmpty: true }),
  }),
  warehousePath: def<string>({
    key: 'warehouse.path',
    flag: '--warehouse',
    category: 'iceberg',
    default: './data/warehouse',
    doc: 'Root of the table locations: `<warehouse>/<namespace>/<table>/{data,metadata}`. A local directory, or `s3://<bucket>[/<prefix>]` for an S3-compatible store (see warehouse.s3.*; credentials come from the AWS environment/profile/web-identity chain, never from this file).',
    parse: warehousePath,
  }),
  warehouseS3Endpoint: def<string>({
    key: 'warehouse.s3.endpoint',
    flag: '--warehouse-s3-endpoint',
    category: 'iceberg',
    default: undefined,
    defaultDoc: 'unset (AWS S3)',
    doc: 'Endpoint of an S3-compatible store (SeaweedFS, MinIO, Ceph RGW…), e.g. `http://seaweedfs:8333`. Needs an `s3://` warehouse.path.',
    parse: url(['http:', 'https:']),
  }),
  warehouseS3Region: def<string>({
    key: 'warehouse.s3.region',
    flag: '--warehouse-s3-region',
    category: 'iceberg',
    default: undefined,
    defaultDoc: 'unset (AWS_REGION, then the profile)',
    doc: 'Region of the bucket (signing region of an S3-compatible store). Needs an `s3://` warehouse.path.',
    parse: string({ nonEmpty: true }),
  }),
  warehouseS3ForcePathStyle: def<boolean>({
    key: 'warehouse.s3.forcePathStyle',
    flag: '--warehouse-s3-force-path-style',
    category: 'iceberg',
    default: false,
    doc: 'Path-style requests (`<endpoint>/<bucket>/<key>`) instead of virtual-hosted ones; most self-hosted stores need it.',
    parse: boolean,
  }),
  compactorEnabled: def<boolean>({
    key: 'compactor.enabled',
    flag: '--compactor',
    category: 'iceberg',
    default: true,
    doc: 'Run the compactor (sealed WAL segments to Iceberg tables) with `siglake ingest`, where --compactor-placement says. Off: run `siglake compact` instead.',
    parse: boolean,
  }),
  compactorPlacement: def<'process-idle' | 'process' | 'thread'>({
    key: 'compactor.placement',
    flag: '--compactor-placement',
    category: 'iceberg',
    default: 'process-idle',
    doc: "Where the compactor of `siglake ingest` runs. `process-idle`: a child process whose threads all run at Linux's SCHED_IDLE, so a compaction round uses only CPU time the ingest path leaves (on a small machine it no longer delays acknowledgements; while ingestion keeps every core busy it waits). `process`: the same child at normal priority. `thread`: a worker thread of the ingester, sharing its garbage-collection threads. Without the native addon `process-idle` runs at normal priority and says so.",
    parse: oneOf(['process-idle', 'process', 'thread'] as const),
  }),
  compactorIdleMaxLagSecs: def<number>({
    key: 'compactor.idleMaxLagSecs',
    flag: '--compactor-idle-max-lag-secs',
    category: 'iceberg',
    default: 300,
    doc: "`compactor.placement: process-idle` only: a compactor at SCHED_IDLE that falls this many seconds behind (siglake_compactor_lag_seconds over it, or no word from it for that long because it gets no CPU at all) is restarted at normal priority, and goes back to SCHED_IDLE once its lag is under half of this. So a host that ingestion keeps busy still lands its WAL, at some cost to ingestion, instead of growing it without bound. 0: never leave SCHED_IDLE.",
    parse: integer({ min: 0, max: 86_400 }),
  }),
  compactIntervalSecs: def<number>({
    key: 'compactor.intervalSecs',
    flag: '--compact-interval-secs',
    category: 'iceberg',
    default: 30,
    doc: 'Seconds between compaction rounds; a round that left work behind (a backlog past its byte budget) and committed something is followed at once by the next; a round whose every table failed waits for the next interval.',
    parse: integer({ min: 1, max: 86_400 }),
  }),
  compactMaxRoundBytes: def<number>({
    key: 'compactor.maxRoundBytes',
    flag: '--compact-max-round-bytes',
    category: 'iceberg',
    default: 64 * 1024 * 1024,
    doc: "WAL bytes one compaction round reads at most (the rest is the next round's). Bounds the compactor's memory, which counts toward the memory breaker: about 4x this at peak.",
    parse: integer({ min: 1024 * 1024, max: 16 * 1024 * 1024 * 1024 }),
  }),
  compactMaxRoundRows: def<number>({
    key: 'compactor.maxRoundRows',
    flag: '--compact-max-round-rows',
    category: 'iceberg',
    default: 262_144,
    doc: "Rows one compaction round lands at most, a span counting 1 + its events + its links, and any row 1 more for every 64 map entries (resource, scope and record attributes) it carries (the rest is the next round's, which starts at the next lane). A round's time is mostly per row, so this bounds how long one tenant's request of many tiny records or span events holds every other tenant's landing. A round that reaches it stops inside the segment, and inside the request if need be.",
    parse: integer({ min: 1, max: 1024 * 1024 * 1024 }),
  }),
  compactMaxValueChars: def<number>({
    key: 'compactor.maxValueChars',
    flag: '--compact-max-value-chars',
    category: 'iceberg',
    default: 128 * 1024 * 1024,
    doc: "Characters one value of a landed row holds at most: a string (a body, a span name, an attribute key or value) is cut at this many of its UTF-8 bytes, bytes at the base64 of three quarters of it, an array or key-value list's JSON at this many characters; each cut value is counted in siglake_compactor_truncated_values_total{table}. The default cuts nothing a request under 16 MiB holds; it keeps a value that --max-request-bytes raised toward 512 MiB lets in from making the compactor fail (or die) on it every round (docs/iceberg.md).",
    parse: integer({ min: 1024, max: 128 * 1024 * 1024 }),
  }),
  compactMaxFailingSecs: def<number>({
    key: 'compactor.maxFailingSecs',
    flag: '--compact-max-failing-secs',
    category: 'iceberg',
    default: 300,
    doc: 'When every compaction round with work to do has failed for longer than this many seconds, `/readyz` of `siglake ingest` answers 503 with the last error (and siglake_compactor_not_ready is 1) until a round succeeds. 0: the compactor never affects readiness.',
    parse: integer({ min: 0, max: 7 * 86_400 }),
  }),
  drainOnShutdown: def<boolean>({
    key: 'compactor.drainOnShutdown',
    flag: '--drain-on-shutdown',
    category: 'iceberg',
    default: false,
    doc: 'At SIGTERM, after the graceful stop, land every WAL record in the tables (`siglake drain`) before exiting; exit 1 if any is left. For pods whose WAL volume goes with them (scale-down): the termination grace period must cover the drain.',
    parse: boolean,
  }),
  tenantClaim: optional<string>({
    key: 'ingester.tenantClaim',
    flag: '--tenant-claim',
    category: 'tenancy',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'JWT claim that names the tenant. Needs OIDC. Wins over --trust-tenant-header when both are set.',
    parse: string({ nonEmpty: true }),
  }),
  trustTenantHeader: def<boolean>({
    key: 'ingester.trustTenantHeader',
    flag: '--trust-tenant-header',
    category: 'tenancy',
    default: false,
    doc: 'Route by X-Scope-OrgID as set by a trusted gateway that strips caller-supplied values.',
    parse: boolean,
  }),
  allowedTenants: def<string[]>({
    key: 'ingester.allowedTenants',
    flag: '--allowed-tenants',
    category: 'tenancy',
    default: [],
    defaultDoc: '[] (open)',
    doc: 'Only these tenants may write (403 not_allowed otherwise). Comma list on the flag and env var.',
    parse: list((raw) => {
      const id = string({ nonEmpty: true })(raw);
      if (!isValidIdentifier(id)) throw new ValueError(`${JSON.stringify(id)} is not a valid tenant identifier (docs/multi-tenancy.md)`);
      return id;
    }),
  }),
  maxTenants: def<number>({
    key: 'ingester.maxTenants',
    flag: '--max-tenants',
    category: 'tenancy',
    default: 0,
    defaultDoc: '0 (unbounded)',
    doc: 'Distinct tenants this process admits, first come, empty at every start (403 at_capacity past it). 0 keeps no set.',
    parse: integer({ min: 0 }),
  }),
  maxLanes: def<number>({
    key: 'ingester.maxLanes',
    flag: '--ingest-max-lanes',
    category: 'ingester',
    default: 4096,
    doc: 'Distinct (tenant, index) lanes per process. A novel lane past it gets 503 without Retry-After.',
    parse: integer({ min: 1, max: 1_000_000 }),
  }),
  queueCapacity: def<number>({
    key: 'ingester.backpressure.capacity',
    flag: '--ingest-queue-capacity',
    category: 'ingester',
    default: 1024,
    doc: "Commands queued per lane. A full lane refuses only its own requests with 503 + Retry-After: 1.",
    parse: integer({ min: 1, max: 1_000_000 }),
  }),
  maxInflightMib: def<number>({
    key: 'ingester.maxInflightMib',
    flag: '--ingest-max-inflight-mib',
    category: 'limits',
    default: 512,
    doc: 'MiB of request bodies being received or queued for a writer at once; past it a request is refused 503 + Retry-After: 1 before its body is read. The memory breaker counts them too.',
    parse: integer({ min: 1, max: 1_048_576 }),
  }),
  grpcMaxStreamsPerConnection: def<number>({
    key: 'server.grpcMaxStreamsPerConnection',
    flag: '--grpc-max-streams-per-connection',
    category: 'limits',
    default: 100,
    doc: 'Concurrent gRPC calls (HTTP/2 streams) one connection may open; the client is told in SETTINGS and HTTP/2 refuses more.',
    parse: integer({ min: 1, max: 100_000 }),
  }),
  grpcMaxStreams: def<number>({
    key: 'server.grpcMaxStreams',
    flag: '--grpc-max-streams',
    category: 'limits',
    default: 2048,
    doc: 'Concurrent gRPC calls over all connections, shared fairly by tenant; past it a new call is refused UNAVAILABLE + retry-after: 1 (SIGLAKE_TOO_MANY_STREAMS) before its message is read, unless its tenant holds less than its fair share: then it takes the slot of the largest holder\'s oldest call still waiting for its message, which is refused the same way. Clients retry both (a Collector\'s otlp_grpc exporter on its retry_on_failure backoff).',
    parse: integer({ min: 1, max: 10_000_000 }),
  }),
  memBreakerLimitMib: def<number>({
    key: 'ingester.memBreaker.limitMib',
    flag: '--mem-breaker-limit-mib',
    category: 'limits',
    default: 0,
    defaultDoc: '0 (off)',
    doc: 'RSS in MiB at or above which every ingest request is shed with 503 + Retry-After: 1.',
    parse: integer({ min: 0 }),
  }),
  memBreakerSampleSecs: def<number>({
    key: 'ingester.memBreaker.sampleSecs',
    flag: '--mem-breaker-sample-secs',
    category: 'limits',
    default: 1,
    doc: 'RSS sampling period in seconds (reads /proc/self/status; never trips where /proc is missing).',
    parse: number({ min: 0.05, max: 3600 }),
  }),
  rateLimitPerSec: def<number>({
    key: 'ingester.rateLimit.ratePerSec',
    flag: '--rate-limit-per-sec',
    category: 'limits',
    default: 0,
    defaultDoc: '0 (off)',
    doc: 'Token refill rate in requests per second of each tenant bucket. 0 turns the limiter off. It never makes a global bucket: that is --rate-limit-global-per-sec alone.',
    parse: number({ min: 0, max: 1_000_000 }),
  }),
  rateLimitBurst: def<number>({
    key: 'ingester.rateLimit.burst',
    flag: '--rate-limit-burst',
    category: 'limits',
    default: (s) => Math.max(1, Math.ceil(s.rateLimitPerSec ?? 0)),
    defaultDoc: 'ratePerSec rounded up, at least 1',
    doc: 'Bucket size: requests admitted at once from a full tenant bucket.',
    parse: integer({ min: 1, max: 100_000_000 }),
  }),
  rateLimitGlobalPerSec: def<number>({
    key: 'ingester.rateLimit.globalRatePerSec',
    flag: '--rate-limit-global-per-sec',
    category: 'limits',
    default: 0,
    defaultDoc: '0 (no global bucket)',
    doc: 'Token refill rate in requests per second of the global bucket, which every request spends before authentication; 0 means no global bucket. Needs ratePerSec > 0. Set it above the sum of the tenants\' rates so that a tenant bucket, not the global one, refuses a busy tenant.',
    parse: number({ min: 0, max: 1_000_000 }),
  }),
  rateLimitGlobalBurst: def<number>({
    key: 'ingester.rateLimit.globalBurst',
    flag: '--rate-limit-global-burst',
    category: 'limits',
    default: (s) => Math.max(1, Math.ceil(s.rateLimitGlobalPerSec ?? 0)),
    defaultDoc: 'globalRatePerSec rounded up, at least 1',
    doc: 'Global bucket size: requests admitted at once from a full global bucket.',
    parse: integer({ min: 1, max: 100_000_000 }),
  }),
  rateLimitMaxTenantBuckets: def<number>({
    key: 'ingester.rateLimit.maxTenantBuckets',
    flag: '--rate-limit-max-tenant-buckets',
    category: 'limits',
    default: 65536,
    doc: 'Tenant buckets kept in memory; the longest-idle one is evicted (an idle bucket is full anyway).',
    parse: integer({ min: 1, max: 10_000_000 }),
  }),
  redisUrl: optional<string>({
    key: 'redis.url',
    flag: '--redis-url',
    category: 'limits',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'Share rate buckets across replicas through this Redis (redis:// or rediss://). A Redis failure admits and counts siglake_rate_budget_backend_errors_total.',
    parse: url(['redis:', 'rediss:']),
    secret: true,
  }),
  redisTimeoutMs: def<number>({
    key: 'redis.timeoutMs',
    flag: '--redis-timeout-ms',
    category: 'limits',
    default: 100,
    doc: 'Timeout of one Redis command; past it the request is admitted and counted as a backend error.',
    parse: integer({ min: 1, max: 60_000 }),
  }),
  authBearerTokens: def<string[]>({
    key: 'auth.bearerTokens',
    flag: '--auth-bearer-tokens',
    category: 'auth',
    default: [],
    defaultDoc: 'unset',
    doc: 'Comma list of static bearer tokens. Prefer --auth-bearer-tokens-file so tokens stay out of process listings.',
    parse: list(),
    secret: true,
  }),
  authBearerTokensFile: optional<string>({
    key: 'auth.bearerTokensFile',
    flag: '--auth-bearer-tokens-file',
    category: 'auth',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'File with one static bearer token per line (blank lines and # comments ignored).',
    parse: string({ nonEmpty: true }),
  }),
  oidcIssuer: optional<string>({
    key: 'auth.oidc.issuer',
    flag: '--oidc-issuer',
    category: 'auth',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'Enables OIDC: the required `iss`. Takes precedence over static tokens.',
    parse: string({ nonEmpty: true }),
  }),
  oidcAudience: optional<string>({
    key: 'auth.oidc.audience',
    flag: '--oidc-audience',
    category: 'auth',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'The required `aud`.',
    parse: string({ nonEmpty: true }),
  }),
  oidcJwksUrl: optional<string>({
    key: 'auth.oidc.jwksUrl',
    flag: '--oidc-jwks-url',
    category: 'auth',
    default: (s) =>
      s.oidcIssuer === undefined ? undefined : `${s.oidcIssuer.replace(/\/+$/, '')}/.well-known/jwks.json`,
    defaultDoc: '<issuer>/.well-known/jwks.json',
    doc: 'JWKS URL: fetched, cached, refetched on an unknown `kid` at most once per --oidc-jwks-cooldown-secs.',
    parse: url(['http:', 'https:']),
  }),
  oidcJwksFile: optional<string>({
    key: 'auth.oidc.jwksFile',
    flag: '--oidc-jwks-file',
    category: 'auth',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'A static JWKS file instead of the URL.',
    parse: string({ nonEmpty: true }),
  }),
  oidcAlgorithms: def<string[]>({
    key: 'auth.oidc.algorithms',
    flag: '--oidc-algorithms',
    category: 'auth',
    default: [...ASYMMETRIC_ALGORITHMS],
    defaultDoc: ASYMMETRIC_ALGORITHMS.join(','),
    doc: 'Accepted JWS algorithms. `none` and HMAC (HS*) are refused.',
    parse: list(oneOf(ASYMMETRIC_ALGORITHMS)),
  }),
  oidcClockSkewSecs: def<number>({
    key: 'auth.oidc.clockSkewSecs',
    flag: '--oidc-clock-skew-secs',
    category: 'auth',
    default: 30,
    doc: 'Tolerance in seconds for `exp` and `nbf`.',
    parse: integer({ min: 0, max: 3600 }),
  }),
  oidcJwksCooldownSecs: def<number>({
    key: 'auth.oidc.jwksCooldownSecs',
    flag: '--oidc-jwks-cooldown-secs',
    category: 'auth',
    default: 30,
    doc: 'Minimum seconds between JWKS refetches triggered by an unknown `kid`.',
    parse: integer({ min: 1, max: 86_400 }),
  }),
  oidcJwksTimeoutMs: def<number>({
    key: 'auth.oidc.jwksTimeoutMs',
    flag: '--oidc-jwks-timeout-ms',
    category: 'auth',
    default: 5000,
    doc: 'Timeout of one JWKS fetch.',
    parse: integer({ min: 1, max: 120_000 }),
  }),
  oidcTokenCacheSize: def<number>({
    key: 'auth.oidc.tokenCacheSize',
    flag: '--oidc-token-cache-size',
    category: 'auth',
    default: 10_000,
    doc: 'Verified tokens kept (never past `exp`), so the hot path does not pay a signature check per request.',
    parse: integer({ min: 0, max: 10_000_000 }),
  }),
  logLevel: def<'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'>({
    key: 'log.level',
    flag: '--log-level',
    category: 'logging',
    default: 'info',
    doc: 'Log level. Telemetry and token text never appear at info or above.',
    parse: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const),
  }),
  queryListen: def<ListenAddress>({
    key: 'query.listen',
    flag: '--query-listen',
    category: 'query',
    default: { host: '0.0.0.0', port: 4380 },
    defaultDoc: '0.0.0.0:4380',
    doc: '`siglake query`: address of the SQL API and its admin endpoints (/metrics, /healthz, /readyz). Port 0 picks a free port. A host name is resolved once at start (one that does not resolve is refused) and listened on at its first address (docs/operations.md).',
    parse: listenAddress,
  }),
  queryTenantClaim: optional<string>({
    key: 'query.oidc.tenantClaim',
    flag: '--query-tenant-claim',
    category: 'query',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'JWT claim naming the tenant a query reads. Needs OIDC. Unset: every accepted query reads `main` (the default tenant).',
    parse: string({ nonEmpty: true }),
  }),
  queryAllowedTenants: def<string[]>({
    key: 'query.allowedTenants',
    flag: '--query-allowed-tenants',
    category: 'query',
    default: [],
    defaultDoc: '[] (every usable claim)',
    doc: 'Exact allow-list of query tenants (403 unlisted otherwise). Non-empty needs query.oidc.tenantClaim. Never reads ingester.allowedTenants.',
    parse: list((raw) => {
      const id = string({ nonEmpty: true })(raw);
      if (!isValidIdentifier(id)) throw new ValueError(`${JSON.stringify(id)} is not a valid tenant identifier (contract §5)`);
      return id;
    }),
  }),
  queryShards: def<string[]>({
    key: 'query.shards',
    flag: '--query-shards',
    category: 'query',
    default: [],
    defaultDoc: '[]',
    doc: 'Base URLs of query workers. Non-empty makes this server a coordinator: each tenant is routed to one of them by rendezvous hashing.',
    parse: list(url(['http:', 'https:'])),
  }),
  queryShardToken: optional<string>({
    key: 'query.shardToken',
    flag: '--query-shard-token',
    category: 'query',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'Shared secret a coordinator presents to /api/v1/sql/shard (X-Siglake-Shard-Token). Required on both sides when shards are used. Prefer --query-shard-token-file.',
    parse: headerToken,
    secret: true,
  }),
  queryShardTokenFile: optional<string>({
    key: 'query.shardTokenFile',
    flag: '--query-shard-token-file',
    category: 'query',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'File holding the shard token (first line, surrounding blanks ignored).',
    parse: string({ nonEmpty: true }),
  }),
  queryTimeoutSecs: def<number>({
    key: 'query.timeoutSecs',
    flag: '--query-timeout-secs',
    category: 'query',
    default: 30,
    doc: 'A query still running after this many seconds is interrupted in the engine and answered 504. A table listing or an index API call past it is answered 504 too; its catalog and warehouse work keeps the tenant\'s slot until it ends.',
    parse: integer({ min: 1, max: 86_400 }),
  }),
  queryMaxRows: def<number>({
    key: 'query.maxRows',
    flag: '--query-max-rows',
    category: 'query',
    default: 10_000,
    doc: 'Rows returned at most; the answer says `truncated: true` (NDJSON: header X-Siglake-Truncated) when there were more.',
    parse: integer({ min: 1, max: 10_000_000 }),
  }),
  queryMaxResultMib: def<number>({
    key: 'query.maxResultMib',
    flag: '--query-max-result-mib',
    category: 'query',
    default: 64,
    doc: 'MiB of rows one answer holds at most (their JSON text, estimated); past it the answer is truncated (`truncated: true`, NDJSON: X-Siglake-Truncated) as at query.maxRows. The rows are held in the query server\'s one JavaScript heap, which every tenant shares: without a bound, one tenant\'s wide rows could end the process.',
    parse: integer({ min: 1, max: 4096 }),
  }),
  queryMemoryLimitMib: def<number>({
    key: 'query.memoryLimitMib',
    flag: '--query-memory-limit-mib',
    category: 'query',
    default: 1024,
    doc: "Engine memory limit in MiB of one tenant context (DuckDB memory_limit), which that tenant's running queries share; nothing spills to disk, so a query that needs more fails (500).",
    parse: integer({ min: 16, max: 1_048_576 }),
  }),
  queryMaxConcurrentPerTenant: def<number>({
    key: 'query.maxConcurrentPerTenant',
    flag: '--query-max-concurrent-per-tenant',
    category: 'query',
    default: 4,
    doc: 'Requests one tenant may have this server work on at once: queries, table listings (GET /api/v1/tables) and index API calls together; one more is answered 429 + Retry-After: 1. A slot is held until the work ends: a query answered 504 while its tables are still being read keeps it until the read ends.',
    parse: integer({ min: 1, max: 1024 }),
  }),
  queryMaxIndexesPerTenant: def<number>({
    key: 'query.maxIndexesPerTenant',
    flag: '--query-max-indexes-per-tenant',
    category: 'query',
    default: 100,
    doc: 'Indexes one tenant may create through the index API; one more is 409 SIGLAKE_INDEX_LIMIT. Each index name is a label value of per-table metrics (siglake_compactor_mapping_errors_total{table}, siglake_retention_files_deleted_total{table}), so this bounds what a tenant adds to them. `siglake index create` (the operator\'s) is not limited.',
    parse: integer({ min: 1, max: 100_000 }),
  }),
  // Declared tenants (declared-tenants.md, src/tenants): appended, additive.
  tenantsFile: optional<string>({
    key: 'tenants.file',
    flag: '--tenants-file',
    category: 'tenancy',
    default: undefined,
    defaultDoc: 'unset',
    doc: 'Declared tenants (YAML, or JSON when the name ends in .json; docs/tenants.md). Validated strictly at start-up (exit 2) and reloaded on SIGHUP and when the file changes; a bad reload keeps the previous set.',
    parse: string({ nonEmpty: true }),
  }),
  auditFile: optional<string>({
    key: 'audit.file',
    flag: '--audit-file',
    category: 'logging',
    default: undefined,
    defaultDoc: 'unset (off)',
    doc: 'Audit stream, JSON lines appended to this file (`-` for stdout). `siglake ingest`: every refusal (with its tenant, verified subject, reason and peer, as far as admission got), first admission of a declared tenant and of a lane, tenants reloads. `siglake query`: every caller it refuses (401, 403, a refused statement, over concurrency; never the SQL), every index change through its index API, tenants reloads and the index subsets they change (with `tenants.file`). `siglake index`: every create, update and delete. Never a token. The servers reopen it on SIGHUP (logrotate); a FIFO never blocks start-up or a stop (docs/tenants.md).',
    parse: string({ nonEmpty: true }),
  }),
  rateLimitPerPrincipalPerSec: def<number>({
    key: 'ingester.rateLimit.perPrincipalPerSec',
    flag: '--rate-limit-per-principal-per-sec',
    category: 'limits',
    default: 0,
    defaultDoc: '0 (off)',
    doc: "Token refill rate of one bucket per verified subject (JWT `sub`), checked after the tenant's bucket (widest first); the bucket holds one second of tokens. Shared by every replica through Redis when `redis.url` is set (docs/tenants.md). 0 turns it off.",
    parse: number({ min: 0, max: 1_000_000 }),
  }),
  serverBudgetPeriod: def<'day' | 'month'>({
    key: 'server.budget.period',
    flag: '--server-budget-period',
    category: 'limits',
    default: 'day',
    doc: 'UTC period of the server-wide budget (--server-budget-records / --server-budget-bytes).',
    parse: oneOf(['day', 'month'] as const),
  }),
  serverBudgetRecords: def<number>({
    key: 'server.budget.records',
    flag: '--server-budget-records',
    category: 'limits',
    default: 0,
    defaultDoc: '0 (unlimited)',
    doc: "Records (log records + spans) this replica writes per period for every tenant together; charged after the index and tenant budgets. Exhausted: 429 + Retry-After to the period's end. Per replica unless shared.",
    parse: integer({ min: 0 }),
  }),
  serverBudgetBytes: def<number>({
    key: 'server.budget.bytes',
    flag: '--server-budget-bytes',
    category: 'limits',
    default: 0,
    defaultDoc: '0 (unlimited)',
    doc: 'OTLP protobuf bytes (as stored in the WAL) this replica writes per period for every tenant together. 0: unlimited.',
    parse: integer({ min: 0 }),
  }),
  queryCacheDir: def<string>({
    key: 'query.cacheDir',
    flag: '--query-cache-dir',
    category: 'query',
    default: './data/query-cache',
    doc: 'Local directory of the query file cache: the copies of an `s3://` warehouse\'s data files that the engine reads (docs/query.md). Unused with a local warehouse.',
    parse: string({ nonEmpty: true }),
  }),
  queryCacheMaxMib: def<number>({
    key: 'query.cacheMaxMib',
    flag: '--query-cache-max-mib',
    category: 'query',
    default: 10240,
    doc: 'Bound in MiB of the query file cache; least recently used copies go first. Files of running queries stay until they end, so the cache may exceed it while they need more.',
    parse: integer({ min: 1, max: 1_073_741_824 }),
  }),
  indexesRefreshSecs: def<number>({
    key: 'ingester.indexes.refreshSecs',
    flag: '--ingest-indexes-refresh-secs',
    category: 'ingester',
    default: 10,
    doc: 'Seconds between reads of the index registry (the catalog) by `siglake ingest`: a new index is accepted at most this long after it was created; `x-siglake-index` naming an index the tenant does not have is 400 SIGLAKE_UNKNOWN_INDEX.',
    parse: integer({ min: 1, max: 3600 }),
  }),
  retentionLogsDays: def<number>({
    key: 'retention.logsDays',
    flag: '--retention-logs-days',
    category: 'iceberg',
    default: 0,
    doc: 'Days of `logs` tables kept (whole UTC days by `time_day` partition; 0 = forever). Enforced by `siglake retention` (docs/iceberg.md "Retention"). An index keeps its own `retentionDays`.',
    parse: integer({ min: 0, max: 36_500 }),
  }),
  retentionTracesDays: def<number>({
    key: 'retention.tracesDays',
    flag: '--retention-traces-days',
    category: 'iceberg',
    default: 0,
    doc: 'Days of `traces` tables kept (0 = forever).',
    parse: integer({ min: 0, max: 36_500 }),
  }),
  retentionSnapshotMaxAgeHours: def<number>({
    key: 'retention.snapshotMaxAgeHours',
    flag: '--retention-snapshot-max-age-hours',
    category: 'iceberg',
    default: 24,
    doc: 'A retention round expires snapshots replaced longer ago than this (the current one, those a branch or tag names and the newest `history.expire.min-snapshots-to-keep` of each branch are always kept; a table\'s `history.expire.max-snapshot-age-ms`, or a branch\'s `max-snapshot-age-ms`, keeps its snapshots longer, never shorter) and deletes the files no kept snapshot references. The same round removes each branch or tag but `main` whose snapshot is older than its `max-ref-age-ms` (the ref\'s own, else the table\'s `history.expire.max-ref-age-ms`; unset: never), as Iceberg\'s `expire_snapshots` does; the snapshots only it kept then expire by these rules. The age counts from when a snapshot stopped being current, so a query planned on it reads its files for this long after; clock skew between hosts shortens or lengthens it (docs/runbooks.md "Clocks and retention").',
    parse: integer({ min: 0, max: 87_600 }),
  }),
} as const;

type ValueOf<D> = D extends SettingDef<infer T> ? T : never;
/** The settings declared with optional(), derived from the table. */
type Optional = { [K in keyof typeof SETTINGS]: (typeof SETTINGS)[K] extends { readonly optional: true } ? K : never }[keyof typeof SETTINGS];

export type SettingName = keyof typeof SETTINGS;
export type Settings = {
  readonly [K in Exclude<SettingName, Optional>]: ValueOf<(typeof SETTINGS)[K]>;
} & {
  readonly [K in Optional]: ValueOf<(typeof SETTINGS)[K]> | undefined;
};

/** Compile-time check: Settings provides every ComputedFrom field with the same type. */
type Provides<T extends ComputedFrom> = T;
export type SettingsForComputedDefaults = Provides<Settings>;

/** Environment variable of a flag: SIGLAKE_ + flag without dashes, upper case, `-` → `_`. */
export function envName(flag: string): string {
  return 'SIGLAKE_' + flag.replace(/^--/, '').toUpperCase().replace(/-/g, '_');
}

export function settingNames(): SettingName[] {
  return Object.keys(SETTINGS) as SettingName[];
}
