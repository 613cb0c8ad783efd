// The compactor: sealed WAL segments in, Iceberg append snapshots out, then
// the segments retired (docs/iceberg.md "The compactor").
//
// One round:
//   1. For every lane, the sealed segments (SealRule), oldest first, up to a
//      byte budget per round.
//   2. Each record goes to its table (logs → `logs` or the index table,
//      spans → `traces`, in the tenant's namespace) unless that table already
//      records this segment as committed; its rows are buffered by day and
//      written as Parquet row groups (TableBuilder).
//   3. One append snapshot per table. Its summary records, for every lane
//      that gave it rows, `siglake.wal.<walId>.<lane>` = the highest segment
//      read: the table's own record of how far that WAL lane is in it.
//   4. A segment is retired only after every table it gave rows to has
//      committed: deleted, or, when it is its lane's highest, cut to an empty
//      segment so its number is never handed out again.
//
// Exactly once across crashes: a crash before 3 leaves unreferenced data
// files and every segment in place; a crash between 3 and 4 leaves segments
// that the tables already record, so the next round routes none of their
// rows again and retires them. Nothing is deleted before its commit is visible.

import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { SqlCatalog } from '../iceberg/sql-catalog.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { TableAppender, type LoadedTable } from '../iceberg/table-appender.js';
import { TableSchema } from '../iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../iceberg/zstd-codec.js';
import { namespaceOf } from '../tenancy/identifier.js';
import { RecordType } from '../wal/format.js';
import { listLaneDirs, type LaneLocation } from '../wal/layout.js';
import { retireSegment, segmentCreatedMs } from '../wal/retire.js';
import { LaneKey } from '../shard/lane-key.js';
import { readSealedMarker } from '../wal/sealed-marker.js';
import { hasShardJournal } from '../wal/journal.js';
import { listLaneFiles, type SegmentFile } from '../wal/segment-files.js';
import { SegmentReader, type WalRecord } from '../wal/segment-reader.js';
import { canBeTorn } from '../wal/repair.js';
import { CompactorStats } from './compactor-stats.js';
import type { Row } from './otlp-row-decoder.js';
import { OtlpWireRows } from './otlp-wire-rows.js';
import type { SealRule } from './seal-rule.js';
import { TableBuilder, type TableBuilderLimits } from './table-builder.js';
import { WalIdentity } from './wal-identity.js';
// Index registry hooks (src/indexes): mapped columns, labelled counters.
import { LabelledCounts } from '../indexes/labelled-counts.js';
import { mappedSchemaOf, type RowMapper } from '../indexes/mapping.js';
import { OtlpWireError } from './otlp-wire-rows.js';
import { deletedIndexProperty } from '../indexes/index-names.js';
import { behindSchemaOf } from '../migrate/migrate.js';

export interface CompactorOptions {
  readonly walDir: string;
  readonly catalog: SqlCatalog;
  readonly storage: ObjectStorage;
  readonly sealRule: SealRule;
  readonly log: Logger;
  readonly stats?: CompactorStats;
  readonly limits?: Partial<TableBuilderLimits>;
  /** WAL bytes one round reads at most (whole segments; at least one). Default 64 MiB (DEFAULT_MAX_ROUND_WAL_BYTES). */
  readonly maxRoundWalBytes?: number;
  /** Rows one round lands at most, a span counting 1 + its events + its links; a round that reaches it stops inside its segment, even inside one record (DEFAULT_MAX_ROUND_ROWS). */
  readonly maxRoundRows?: number;
  /** Characters one value of a row holds at most (otlp-wire-rows.ts MAX_VALUE_CHARS, the default); past it, cut and counted. */
  readonly maxValueChars?: number;
  readonly now?: () => number;
  /** Called after each table commit, before any segment is retired (crash tests hook here). */
  readonly afterCommit?: (namespace: string, table: string) => void | Promise<void>;
  /** Called with a commit's files written, before its catalog swap (crash tests hook here). */
  readonly beforeCommit?: () => void | Promise<void>;
}

export interface RoundResult {
  readonly segmentsRead: number;
  readonly walBytes: number;
  readonly rows: number;
  readonly files: number;
  readonly commits: number;
  readonly failedTables: number;
  readonly retired: number;
  /** Sealed segments were left for the next round (the byte or row budget ran out). */
  readonly backlog: boolean;
  /** The first table failure's message, when a table's data files or commit failed (not when abandoned). */
  readonly firstError?: string;
}

/** One table's work in a round. */
/** How long a lane that failed its round sits out before it is tried again. */
const QUARANTINE_MS = 60_000;

/**
 * How far a table holds a segment that a round stopped inside (its row budget
 * ran out): the records before `offset` and the first `rows` rows of the
 * record at `offset`.
 */
interface PartialAt {
  readonly segment: number;
  readonly offset: number;
  readonly rows: number;
}

class TableWork {
  /** Lane key → highest segment read whole this round, for lanes that gave this table rows. */
  readonly progress = new Map<string, number>();
  /** Lane key → where this round stopped inside a segment that gave this table rows. */
  readonly cut = new Map<string, PartialAt>();
  /** Lane key → lowest segment that gave this table rows. */
  readonly firstRouted = new Map<string, number>();
  committed = false;
  constructor(
    readonly builder: TableBuilder,
    readonly loaded: LoadedTable | null,
    /** Lane key → segment through which the table already holds that lane (at load). */
    readonly known: Map<string, number>,
    /** An index's mapped columns (src/indexes/mapping.ts), appended to each row; null when none. */
    readonly mapper: RowMapper | null = null,
    /** An unmigrated table's base column count: rows are cut to it (src/migrate); null when current. */
    readonly baseWidth: number | null = null,
    /**
     * [deleted indexes] WAL records with an ingest time at or before this are
     * dropped, not landed: the index was deleted after they were written
     * (Infinity while no table of the name exists); null: none.
     */
    readonly dropThroughMs: number | null = null,
    /**
     * The table is not one Siglake made (no `siglake.table-kind` of this
     * signal): nothing is written to it, and the segments routed to it stay.
     */
    readonly foreign: boolean = false,
    /** The full base schema of this signal (with baseWidth: to tell whether migrate added columns meanwhile). */
    readonly base: TableSchema | null = null,
    /** Lane key → the segment above `known` that the table holds in part (at load). */
    readonly partial: Map<string, PartialAt> = new Map(),
  ) {}
}

interface SegmentRead {
  readonly lane: LaneLocation;
  readonly file: SegmentFile;
  /** Whether a higher-numbered segment file exists in the lane. */
  readonly hasHigher: boolean;
  readonly touched: Set<TableWork>;
  readonly corrupt: boolean;
  readonly size: number;
  /** The round's row budget ran out inside this segment: it is not retired, the next round goes on from there. */
  readonly cut: boolean;
}

const DEFAULT_MAX_ROUND_WAL_BYTES = 64 * 1024 * 1024;
/**
 * Rows one round lands by default. A round's cost is mostly per row (an empty
 * log record costs about 6 µs, a 350-byte one 40 µs), so a byte budget alone
 * let one request of millions of tiny records (a few MiB) hold a round, and
 * every other tenant's landing, for over a minute. 64 MiB of ordinary records
 * is about 190,000 rows: such rounds stay bounded by bytes. A span counts
 * 1 + its events + its links (OtlpWireRows.spanWeight): the round cuts between
 * spans as it cuts between log records, but one span is never split.
 */
export const DEFAULT_MAX_ROUND_ROWS = 262_144;
const PROGRESS_PREFIX = 'siglake.wal.';
/** `siglake.walpart.<walId>.<lane>` = `<segment>:<offset>:<rows>`: a segment the table holds in part (PartialAt). */
const PARTIAL_PREFIX = 'siglake.walpart.';
/** Segments stopped inside whose records' row counts are kept (a partly landed segment is rarely more than one per lane). */
const MAX_CHECKED_SEGMENTS = 256;

/** Map entries (attributes) that cost a round's row budget one row more: a usual record (under 64 attributes with its resource's and scope's) is still charged 1. */
const MAP_ENTRIES_PER_ROW = 64;

/** The most rows of one WAL record buffered before they are written; a record with more is streamed (see the round's loop). */
export const RECORD_BUFFER_ROWS = 16_384;

export class Compactor {
  readonly #o: CompactorOptions;
  readonly #identity: WalIdentity;
  readonly #decoder: OtlpWireRows;
  readonly #zstd: Compressor;
  readonly #appender: TableAppender;
  readonly #stats: CompactorStats;
  readonly #now: () => number;
  readonly #reportedCorrupt = new Set<string>();
  /**
   * Segments found holding an undecodable record: path → its size and the record. A kept segment
   * is read every round; its landed records are not decoded again to find it (a 64 MiB segment
   * took a second of CPU a round). A sealed segment never changes; a different size is another file.
   */
  readonly #undecodableSegments = new Map<string, { size: number; at: { offset: number; why: string } }>();
  /**
   * Segments a round stopped inside: path → its size and, by record offset, the row count of each
   * record that decoded. The next round neither decodes those records again to check them (a
   * record of 8 million rows takes seconds) nor the landed ones to look for an undecodable one.
   */
  readonly #checkedRecords = new Map<string, { size: number; totals: Map<number, number> }>();
  /** Lane directory → when it may be read again after a failure (a table that could not be loaded). */
  readonly #quarantine = new Map<string, number>();
  /** The lane the last round stopped at for its byte budget: the next starts there. */
  #resumeAt: string | undefined;
  /** Tables of another engine already reported (once per process). */
  readonly #reportedForeign = new Set<string>();
  #firstError: string | undefined;
  /** Per-table counters (src/indexes/labelled-counts.ts), drained by the thread after each round. */
  readonly labelled = new LabelledCounts();

  private constructor(o: CompactorOptions, zstd: Compressor) {
    this.#o = o;
    this.#decoder = new OtlpWireRows(o.maxValueChars);
    this.#identity = new WalIdentity(o.walDir);
    this.#zstd = zstd;
    this.#stats = o.stats ?? CompactorStats.create();
    this.#now = o.now ?? Date.now;
    this.#appender = new TableAppender({
      catalog: o.catalog,
      storage: o.storage,
      now: this.#now,
      onConflict: () => this.#stats.conflict(),
      ...(o.beforeCommit !== undefined ? { beforeSwap: o.beforeCommit } : {}),
    });
  }

  static async create(o: CompactorOptions): Promise<Compactor> {
    return new Compactor(o, await ZstdCodec.load());
  }

  get stats(): CompactorStats {
    return this.#stats;
  }

  async runRound(): Promise<RoundResult> {
    this.#stats.roundStarted();
    try {
      const r = await this.#round();
      this.#stats.round(r.failedTables === 0);
      return r;
    } catch (e) {
      this.#stats.round(false);
      throw e;
    } finally {
      this.measureLag();
    }
  }

  async #round(): Promise<RoundResult> {
    const maxBytes = this.#o.maxRoundWalBytes ?? DEFAULT_MAX_ROUND_WAL_BYTES;
    const budget = { rows: this.#o.maxRoundRows ?? DEFAULT_MAX_ROUND_ROWS };
    const tables = new Map<string, TableWork>();
    const reads: SegmentRead[] = [];
    let walBytes = 0;
    let rows = 0;
    let backlog = false;
    let walId: string | null = null;
    this.#firstError = undefined;

    try {
      // A `batch`-mode journal: segments below the highest are taken only once a checkpoint marked them (seal-rule.ts).
      const journaled = this.#o.sealRule.mode !== 'stopped' && hasShardJournal(this.#o.walDir);
      // Round robin over the lanes: a round that runs out of its byte budget leaves the next one to
      // start at the lane after the last it read from. (In a fixed order, one tenant's backlog took
      // every round's budget and the lanes after it never landed.)
      const all = listLaneDirs(this.#o.walDir);
      const from = this.#resumeAt === undefined ? -1 : all.findIndex((l) => l.dir === this.#resumeAt);
      const order = from > 0 ? [...all.slice(from), ...all.slice(0, from)] : all;
      this.#resumeAt = undefined;
      const now = Date.now();
      let lastRead = -1;
      lanes: for (let li = 0; li < order.length; li++) {
        const lane = order[li]!;
        // A lane whose table could not be read (or whose segment could not be opened) sits out a
        // while: its failure must not stop every other tenant's landing round after round.
        const until = this.#quarantine.get(lane.dir);
        if (until !== undefined) {
          if (now < until) continue;
          this.#quarantine.delete(lane.dir);
        }
        const files = listLaneFiles(lane.dir);
        const highest = files.maxNumber;
        const sealedUpTo = readSealedMarker(lane.dir);
        for (const file of files.segments) {
          if (!file.canonical || !this.#o.sealRule.isSealed(lane.dir, file.number, highest, sealedUpTo, journaled)) continue;
          if (isEmptyFile(file.path)) continue; // a retired lane head, kept only for its number
          if (walBytes >= maxBytes || budget.rows <= 0) {
            backlog = true;
            this.#resumeAt = order[(lastRead + 1) % order.length]!.dir;
            break lanes;
          }
          lastRead = li;
          walId ??= this.#identity.get();
          const hasHigher = files.segments.some((s) => s.number > file.number);
          let read: SegmentRead;
          try {
            read = await this.#readSegment(walId, lane, file, hasHigher, sealedUpTo, tables, budget);
          } catch (e) {
            this.#quarantine.set(lane.dir, Date.now() + QUARANTINE_MS);
            this.#o.log.error(
              { lane: lane.dir, segment: file.name, err: (e as Error).message, retryInSecs: QUARANTINE_MS / 1000 },
              'WAL lane could not be landed: the round is dropped, and the lane sits out while the others land',
            );
            throw e;
          }
          reads.push(read);
          walBytes += read.size;
          this.#stats.walRead(read.size);
          if (read.cut) {
            // The row budget ran out inside this segment: the round ends here, and the next one starts
            // at the lane after this one, so the other lanes land before this one goes on.
            backlog = true;
            this.#resumeAt = order[(li + 1) % order.length]!.dir;
            break lanes;
          }
        }
      }
    } catch (e) {
      // Nothing of this round is committed: drop its data files and leave every segment.
      for (const work of tables.values()) await work.builder.abort().catch(() => undefined);
      throw e;
    }

    let files = 0;
    let commits = 0;
    let failedTables = 0;
    for (const work of tables.values()) {
      rows += work.builder.rows;
      if (work.builder.rows === 0) continue;
      const r = await this.#commit(walId!, work);
      if (r < 0) failedTables++;
      else {
        files += r;
        commits++;
      }
    }

    let retired = 0;
    for (const read of reads) {
      if (read.corrupt || read.cut) continue;
      let ok = true;
      for (const t of read.touched) if (!t.committed) ok = false;
      if (ok && this.#retire(read)) retired++;
    }
    const result: RoundResult = {
      segmentsRead: reads.length,
      walBytes,
      rows,
      files,
      commits,
      failedTables,
      retired,
      backlog,
      ...(this.#firstError !== undefined ? { firstError: this.#firstError } : {}),
    };
    if (reads.length > 0) this.#o.log.info(result, 'compaction round');
    return result;
  }

  async #readSegment(
    walId: string,
    lane: LaneLocation,
    file: SegmentFile,
    hasHigher: boolean,
    sealedUpTo: number,
    tables: Map<string, TableWork>,
    budget: { rows: number },
  ): Promise<SegmentRead> {
    const touched = new Set<TableWork>();
    const key = LaneKey.at(lane).progressKey;
    const reader = new SegmentReader(file.path);
    const size = reader.size;
    let corrupt = false;
    let dropped = 0;
    const known = this.#undecodableSegments.get(file.path);
    let undecodable: { offset: number; why: string } | undefined = known?.size === size ? known.at : undefined;
    const checkedBefore = this.#checkedRecords.get(file.path);
    /** Record offset → its row count, for the records of this segment known to decode. */
    const checked = checkedBefore?.size === size ? checkedBefore.totals : new Map<number, number>();
    /** Where the row budget ran out: the table whose record was cut, and where. */
    let cut: { work: TableWork; offset: number; rows: number } | undefined;
    try {
      records: for (let rec = reader.next(); rec !== null; rec = reader.next()) {
        const work = await this.#table(walId, lane, rec.type, tables);
        const part = work.partial.get(key);
        const inPart = part !== undefined && part.segment === file.number;
        if ((work.known.get(key) ?? 0) >= file.number || (inPart && rec.offset < part.offset)) {
          // Landed by an earlier round, whose segment was kept (a crash before retiring it, another
          // table's failed commit, an undecodable record, or a round that stopped inside it): the
          // record is not landed again, but one that does not decode must keep the segment again
          // rather than let it retire as landed.
          if (undecodable === undefined && !checked.has(rec.offset)) undecodable = this.#undecodable(rec);
          continue;
        }
        // The first rows of the record a round stopped inside are landed.
        const skip = inPart && rec.offset === part.offset ? part.rows : 0;
        if (work.foreign) {
          touched.add(work); // never committed: the segment stays in the WAL
          continue;
        }
        if (work.dropThroughMs !== null && rec.timeMs <= work.dropThroughMs) {
          this.labelled.inc('siglake_compactor_deleted_index_records_total', {}, 1);
          dropped++;
          continue;
        }
        // A record's rows are buffered whole, so that one that does not decode lands none of them.
        // Past RECORD_BUFFER_ROWS they are only counted, and a second decode streams them into the
        // table as they come: one valid 16 MB request of 8 million empty log records is gigabytes
        // of rows, past the compactor's heap, and it died of it every round (no tenant landed).
        // A record checked by the round that stopped inside this segment is not decoded again.
        const batch: Row[] = [];
        // A span is charged 1 + its events + its links against the row budget (spanWeight): 128 spans
        // of 60,000 empty events each are one 15 MB request, and held one round 11 s as 128 rows.
        const spans = rec.type !== RecordType.LOGS;
        /** The weights of a traces record's buffered rows, by row index (logs rows weigh 1). */
        const weights: number[] = [];
        let total = checked.get(rec.offset);
        if (total === undefined) {
          let n = 0;
          const decoder = this.#decoder;
          const cutBefore = decoder.truncated;
          const failed = this.#decode(
            rec,
            spans
              ? (row: Row) => {
                  if (++n <= RECORD_BUFFER_ROWS) {
                    batch.push(row);
                    weights.push(decoder.spanWeight);
                  }
                }
              : (row: Row) => {
                  if (++n <= RECORD_BUFFER_ROWS) batch.push(row);
                },
          );
          if (failed !== undefined) {
            // A record whose checksum holds but whose payload does not decode (ingest validated it: a
            // bug between the two): it cannot land; the rest of the segment does, and the segment is
            // kept and counted as corrupt. (It threw out of the round, and no tenant landed again.)
            undecodable ??= failed;
            continue;
          }
          total = n;
          checked.set(rec.offset, n);
          // Values cut to maxValueChars (otlp-wire-rows.ts MAX_VALUE_CHARS), counted once per record decoded for landing.
          this.labelled.inc('siglake_compactor_truncated_values_total', { table: work.builder.table }, decoder.truncated - cutBefore);
        }
        if (total <= skip) continue;
        const share = rec.payload.length / total;
        const mapper = work.mapper;
        const baseWidth = work.baseWidth;
        // A decoder of its own: the generator waits across the awaits below.
        const streamer = total === batch.length ? null : new OtlpWireRows(this.#o.maxValueChars);
        const rows = streamer === null ? (skip > 0 ? batch.slice(skip) : batch) : streamer.rows(rec.payload, rec.timeMs, spans, skip);
        let done = skip;
        for (const row of rows) {
          if (budget.rows <= 0) {
            // The round's row budget ran out: it stops here, mid-record if need be (one request of
            // 8 million empty log records held a round, and every other tenant's landing, 80 s).
            cut = { work, offset: rec.offset, rows: done };
            break;
          }
          if (baseWidth !== null) row.length = baseWidth;
          if (mapper !== null) mapper.apply(row);
          const p = work.builder.add(row, share);
          // (`done` is the row's index in the record; a streamed span's weight is its decoder's last.)
          // Map entries are charged too, 64 to a row (MAP_ENTRIES_PER_ROW): one 1 MB request of 2,000
          // log records under a resource of 100,000 attributes is 200 million of them, and held one round
          // (and every other tenant's landing) for minutes as 2,000 rows.
          budget.rows -= (spans ? (streamer === null ? weights[done]! : streamer.spanWeight) : 1) + Math.floor(work.builder.mapEntries(row) / MAP_ENTRIES_PER_ROW);
          done++;
          if (p !== undefined) await p;
        }
        if (done > skip) {
          touched.add(work);
          if (!work.firstRouted.has(key)) work.firstRouted.set(key, file.number);
        }
        if (cut !== undefined) break records;
      }
      if (cut === undefined) {
        for (const work of touched) work.progress.set(key, Math.max(work.progress.get(key) ?? 0, file.number));
        this.#checkedRecords.delete(file.path);
      } else {
        // Every table this segment gave rows to holds it up to the cut: the cut record's table its
        // first rows, the others their records before it (theirs all are).
        for (const work of touched) work.cut.set(key, { segment: file.number, offset: cut.offset, rows: work === cut.work ? cut.rows : 0 });
        this.#checkedRecords.delete(file.path);
        this.#checkedRecords.set(file.path, { size, totals: checked });
        if (this.#checkedRecords.size > MAX_CHECKED_SEGMENTS) this.#checkedRecords.delete(this.#checkedRecords.keys().next().value!);
      }
      if (undecodable !== undefined) {
        corrupt = true;
        this.#undecodableSegments.set(file.path, { size, at: undecodable });
        if (!this.#reportedCorrupt.has(file.path)) {
          this.#reportedCorrupt.add(file.path);
          this.#stats.corrupt();
          this.#o.log.error(
            { segment: file.path, offset: undecodable.offset, why: undecodable.why },
            'WAL record does not decode: the segment\'s other records are landed, the file is kept (run siglake wal dump)',
          );
        }
      }
      const stop = reader.stop;
      // A torn end is a crash's unfinished append only in the lane's last segment above its
      // `.sealed` marker (which recovery repairs); in one with a higher segment beside it, or in a
      // sealed one (synced before it was marked), a record running past the end of the file (a
      // damaged length) is damage, as `siglake wal verify` reports it: keep the file. (Before stop
      // 47 a sealed last segment was landed up to the damage and then emptied.)
      const damagedTail = stop?.kind === 'torn' && (hasHigher || !canBeTorn(file, sealedUpTo, stop));
      if (stop?.kind === 'corrupt' || damagedTail) {
        corrupt = true;
        if (!this.#reportedCorrupt.has(file.path)) {
          this.#reportedCorrupt.add(file.path);
          this.#stats.corrupt();
          this.#o.log.error(
            { segment: file.path, offset: stop.offset, why: stop.kind === 'corrupt' ? stop.error.why : `torn (${stop.why}), but not an unsealed last segment` },
            'corrupt WAL segment: its records before the damage are landed, the file is kept (run siglake wal verify)',
          );
        }
      }
    } finally {
      reader.close();
    }
    if (dropped > 0) {
      this.#o.log.warn(
        { segment: file.path, records: dropped },
        'WAL records of an index deleted after they were written: dropped, the index is not made again',
      );
    }
    return { lane, file, hasHigher, touched, corrupt, size, cut: cut !== undefined };
  }

  async #table(walId: string, lane: LaneLocation, type: RecordType, tables: Map<string, TableWork>): Promise<TableWork> {
    const namespace = namespaceOf(lane.tenant);
    let schema = type === RecordType.LOGS ? TableSchema.LOGS : TableSchema.TRACES;
    const table = LaneKey.at(lane).icebergTable(type === RecordType.TRACES ? 'traces' : 'logs');
    const id = `${namespace}.${table}`;
    let work = tables.get(id);
    if (work === undefined) {
      const loaded = await this.#appender.load(namespace, table);
      // [deleted indexes] An index deleted while its lane held records: those written before the
      // delete are dropped (all of them while the table is gone), where landing them made the
      // table again, bare, without its definition (registry.ts delete; docs/indexes.md).
      let dropThroughMs: number | null = null;
      if (lane.table.kind === 'index' && type === RecordType.LOGS) {
        const mark = await this.#o.catalog.namespaceProperty(namespace, deletedIndexProperty(table));
        const at = mark === null ? NaN : Number(mark);
        if (Number.isFinite(at)) dropThroughMs = loaded === null ? Infinity : at;
      }
      const location = loaded?.metadata.location ?? this.#o.storage.locationOf(namespace, table);
      // A table not yet migrated (src/migrate): written with the base columns it has, and counted.
      const behind = loaded !== null ? behindSchemaOf(loaded.metadata, schema) : null;
      if (behind !== null) {
        schema = behind;
        this.labelled.inc('siglake_compactor_schema_behind_total', { namespace, table });
        this.#o.log.warn({ table: id, columns: behind.columns.length }, 'table schema behind this release: writing the columns it has (run siglake migrate)');
      }
      // Another engine's table under the name (the catalog is shared): Siglake writes only to tables
      // it made, whatever their columns, so its rows never go into a table of another shape or owner.
      const kind = loaded === null ? undefined : tableKindOf(loaded.metadata);
      const foreign = loaded !== null && kind !== (type === RecordType.TRACES ? 'traces' : 'logs');
      if (foreign && !this.#reportedForeign.has(id)) {
        this.#reportedForeign.add(id);
        this.#o.log.error(
          { table: id, kind: kind ?? null },
          'WAL records for a table Siglake did not make (no siglake.table-kind of this signal): not landed, kept in the WAL; drop or rename that table',
        );
      }
      const baseWidth = schema.columns.length;
      // An index with mapped columns: written with them (src/indexes/mapping.ts).
      const mapped = loaded !== null && type === RecordType.LOGS ? mappedSchemaOf(loaded.metadata, schema) : null;
      if (mapped !== null) schema = mapped.schema;
      const known = progressOf(loaded, walId);
      work = new TableWork(
        new TableBuilder({ namespace, table, schema, location, storage: this.#o.storage, zstd: this.#zstd, ...(this.#o.limits ? { limits: this.#o.limits } : {}) }),
        loaded,
        known,
        mapped?.mapper ?? null,
        behind !== null ? baseWidth : null,
        dropThroughMs,
        foreign,
        type === RecordType.LOGS ? TableSchema.LOGS : TableSchema.TRACES,
        partialOf(loaded, walId, known),
      );
      tables.set(id, work);
    }
    return work;
  }

  /** Decodes a record's rows into `emit`; where its payload does not decode, why (rows before the fault were emitted). */
  #decode(rec: WalRecord, emit: (row: Row) => void): { offset: number; why: string } | undefined {
    try {
      if (rec.type === RecordType.LOGS) this.#decoder.logs(rec.payload, rec.timeMs, emit);
      else this.#decoder.traces(rec.payload, rec.timeMs, emit);
      return undefined;
    } catch (e) {
      if (!(e instanceof OtlpWireError)) throw e;
      return { offset: rec.offset, why: e.message };
    }
  }

  /** Whether a record already landed would decode (its rows are dropped): where and why not. */
  #undecodable(rec: WalRecord): { offset: number; why: string } | undefined {
    return this.#decode(rec, () => undefined);
  }

  /** Commits one table's round; returns the files committed, or -1 when the commit failed or was abandoned. */
  async #commit(walId: string, work: TableWork): Promise<number> {
    const b = work.builder;
    const t0 = performance.now();
    let dataFiles;
    try {
      dataFiles = await b.finish();
    } catch (e) {
      this.#stats.commitFailure();
      this.#firstError ??= `writing data files failed: ${(e as Error).message}`;
      this.#o.log.error({ table: `${b.namespace}.${b.table}`, err: (e as Error).message }, 'writing data files failed');
      await b.abort();
      return -1;
    }
    const summary: Record<string, string> = {};
    for (const [lane, n] of work.progress) summary[`${PROGRESS_PREFIX}${walId}.${lane}`] = String(n);
    for (const [lane, p] of work.cut) summary[`${PARTIAL_PREFIX}${walId}.${lane}`] = `${p.segment}:${p.offset}:${p.rows}`;
    let result;
    let migrated = false;
    try {
      result = await this.#appender.append({
        namespace: b.namespace,
        table: b.table,
        schema: b.schema,
        location: work.loaded?.metadata.location ?? this.#o.storage.locationOf(b.namespace, b.table),
        files: dataFiles,
        summary,
        properties: summary,
        // Another compactor on this WAL committed some of these segments meanwhile: leave them to it.
        precheck: (current) => {
          const now = progressOf(current, walId);
          const nowPartial = partialOf(current, walId, now);
          for (const [lane, first] of work.firstRouted) {
            if ((now.get(lane) ?? 0) >= first) return false;
            // Another compactor went on inside the segment this round started in.
            const p = nowPartial.get(lane);
            const q = work.partial.get(lane);
            if (p !== undefined && p.segment >= first && (q === undefined || p.segment !== q.segment || p.offset !== q.offset || p.rows !== q.rows)) return false;
          }
          // Written with the columns of a table not yet migrated, and migrate added base columns
          // since the round loaded it: these rows would land without them for good. Leave the
          // segments in the WAL; the next round writes them with the new columns.
          if (work.baseWidth !== null && work.base !== null && current !== null) {
            const behindNow = behindSchemaOf(current.metadata, work.base);
            if ((behindNow?.columns.length ?? work.base.columns.length) > work.baseWidth) {
              migrated = true;
              return false;
            }
          }
          return true;
        },
      });
    } catch (e) {
      this.#stats.commitFailure();
      this.#firstError ??= `Iceberg commit failed: ${(e as Error).message}`;
      this.#o.log.error({ table: `${b.namespace}.${b.table}`, err: (e as Error).message, code: (e as { code?: string }).code }, 'Iceberg commit failed');
      // The data files stay: the commit may have landed before the error; they are unreferenced otherwise.
      return -1;
    }
    if (result.status === 'abandoned') {
      await b.abort();
      if (migrated) {
        this.#o.log.warn({ table: `${b.namespace}.${b.table}` }, 'commit abandoned: siglake migrate added columns meanwhile; the segments stay and land with them next round');
      } else {
        this.#o.log.warn({ table: `${b.namespace}.${b.table}` }, 'commit abandoned: the table already records these WAL segments');
      }
      return -1;
    }
    work.committed = true;
    this.#stats.commit((performance.now() - t0) / 1000);
    const mappingErrors = work.mapper?.takeErrors() ?? 0;
    if (mappingErrors > 0) {
      this.labelled.inc('siglake_compactor_mapping_errors_total', { table: b.table }, mappingErrors);
      this.#o.log.warn({ table: `${b.namespace}.${b.table}`, values: mappingErrors }, 'mapped values that did not convert were written as null');
    }
    for (const f of dataFiles) this.#stats.file(f.fileSizeInBytes, f.recordCount);
    this.#o.log.debug(
      { table: `${b.namespace}.${b.table}`, snapshotId: String(result.snapshotId), files: dataFiles.length, rows: b.rows, attempts: result.attempts },
      'committed',
    );
    await this.#o.afterCommit?.(b.namespace, b.table);
    return dataFiles.length;
  }

  /** Deletes a landed segment, or empties it when it is its lane's highest (its number must stay taken). */
  #retire(read: SegmentRead): boolean {
    let retired: boolean;
    try {
      retired = retireSegment({ laneDir: read.lane.dir, path: read.file.path, size: read.size, hasHigher: read.hasHigher });
    } catch (e) {
      this.#o.log.error({ segment: read.file.path, err: (e as Error).message }, 'retiring a landed WAL segment failed; the next round retries');
      return false;
    }
    if (retired) this.#stats.retired();
    return retired;
  }

  /**
   * siglake_compactor_lag_seconds, measured after every round and when the
   * loop starts (a restarted compactor does not read 0 until its first round).
   */
  measureLag(): void {
    const lag = walLagSeconds(this.#o.walDir, this.#now());
    if (lag !== null) this.#stats.setLag(lag);
  }
}

/**
 * The age in seconds of the oldest WAL segment under `walDir` that still holds
 * records, across every lane (0 when none does); null when the WAL cannot be listed.
 */
export function walLagSeconds(walDir: string, nowMs: number): number | null {
  let oldest = Infinity;
  try {
    for (const lane of listLaneDirs(walDir)) {
      for (const f of listLaneFiles(lane.dir).segments) {
        const created = segmentCreatedMs(f.path);
        if (created === null) continue;
        // Segments only grow in number and age: the first with records is the lane's oldest.
        if (created < oldest) oldest = created;
        break;
      }
    }
  } catch {
    return null;
  }
  return oldest === Infinity ? 0 : Math.max(0, (nowMs - oldest) / 1000);
}

/**
 * Lane key → committed segment, for WAL `walId`: the higher of the table's
 * property (written by every commit since stop 48; it outlives snapshot
 * expiry and other engines' commits) and the newest snapshot of the table's
 * history that records it in its summary (all that commits before then wrote).
 */
function progressOf(table: LoadedTable | null, walId: string): Map<string, number> {
  const out = new Map<string, number>();
  if (table === null) return out;
  const prefix = `${PROGRESS_PREFIX}${walId}.`;
  for (const snap of table.metadata.ancestry()) {
    for (const [k, v] of Object.entries(snap.summary)) {
      if (!k.startsWith(prefix)) continue;
      const lane = k.slice(prefix.length);
      if (!out.has(lane)) out.set(lane, Number(v));
    }
  }
  for (const [k, v] of Object.entries(table.metadata.properties())) {
    if (!k.startsWith(prefix)) continue;
    const lane = k.slice(prefix.length);
    const n = Number(v);
    if (Number.isFinite(n) && n > (out.get(lane) ?? 0)) out.set(lane, n);
  }
  return out;
}

/**
 * Lane key → the segment the table holds in part, for WAL `walId`: the
 * table's `siglake.walpart.` property where it names a segment above the
 * lane's committed one (`known`; a part of a segment landed whole since is
 * no longer one).
 */
function partialOf(table: LoadedTable | null, walId: string, known: Map<string, number>): Map<string, PartialAt> {
  const out = new Map<string, PartialAt>();
  if (table === null) return out;
  const prefix = `${PARTIAL_PREFIX}${walId}.`;
  for (const [k, v] of Object.entries(table.metadata.properties())) {
    if (!k.startsWith(prefix)) continue;
    const lane = k.slice(prefix.length);
    const m = /^(\d+):(\d+):(\d+)$/.exec(v);
    if (m === null) continue;
    const p = { segment: Number(m[1]), offset: Number(m[2]), rows: Number(m[3]) };
    if (p.segment > (known.get(lane) ?? 0)) out.set(lane, p);
  }
  return out;
}

function isEmptyFile(path: string): boolean {
  try {
    return statSync(path).size === 0;
  } catch {
    return true;
  }
}

/** The `siglake.table-kind` property of a table's metadata (`logs`, `traces`), or undefined for a table Siglake did not make. */
function tableKindOf(metadata: LoadedTable['metadata']): string | undefined {
  return metadata.property('siglake.table-kind');
}
