// The data files one compaction round writes for one table: rows are grouped
// by partition (the day of their event time); each day has an open Parquet
// file that takes a row group whenever the day's buffered rows pass a budget,
// and is finished and replaced once it reaches the target file size. So a
// round of thin traffic writes one file per day touched, not one per WAL
// segment, and a heavy one writes files of about the target size.

import { randomUUID } from 'node:crypto';
import { ParquetDataWriter, type DataFileInfo } from '../iceberg/parquet-data-writer.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import type { TableSchema } from '../iceberg/table-schema.js';
import type { Compressor } from '../iceberg/zstd-codec.js';
import type { Row } from './otlp-row-decoder.js';

const MICROS_PER_DAY = 86_400_000_000n;

export interface TableBuilderLimits {
  /** Finish a data file once it has this many bytes (default 128 MiB). */
  readonly targetFileBytes: number;
  /** Write a row group once a day's buffer holds this many rows (default 16,384)… */
  readonly rowGroupRows: number;
  /** …or this many bytes of WAL payload (default 2 MiB)… */
  readonly rowGroupWalBytes: number;
  /**
   * …or this many map entries (resource, scope and record attributes; default
   * 1 Mi). A row's maps are written once per row: a 1 MB request of 2,000 log
   * records under one resource of 100,000 attributes is 200 million entries,
   * and in one row group (2,000 rows, 2 MiB of WAL share not reached) passed
   * V8's longest array: its table failed every round.
   */
  readonly rowGroupMapEntries: number;
}

// Buffered rows are JS objects, several times their WAL size, and every
// (table, day) of a round has its own buffer: these bounds keep a round's live
// heap in the low hundreds of MiB with dozens of tables (measured: see
// docs/iceberg.md, "Memory").
export const DEFAULT_LIMITS: TableBuilderLimits = Object.freeze({
  targetFileBytes: 128 * 1024 * 1024,
  rowGroupRows: 16_384,
  rowGroupWalBytes: 2 * 1024 * 1024,
  rowGroupMapEntries: 1024 * 1024,
});

class DayBuffer {
  columns: unknown[][];
  rows = 0;
  walBytes = 0;
  mapEntries = 0;
  writer: ParquetDataWriter | null = null;

  constructor(
    readonly day: number,
    width: number,
  ) {
    this.columns = Array.from({ length: width }, () => []);
  }
}

export class TableBuilder {
  readonly namespace: string;
  readonly table: string;
  readonly schema: TableSchema;
  readonly #location: string;
  readonly #storage: ObjectStorage;
  readonly #zstd: Compressor;
  readonly #limits: TableBuilderLimits;
  readonly #days = new Map<number, DayBuffer>();
  readonly #done: DataFileInfo[] = [];
  #rows = 0;
  /** Indexes of the map columns. */
  readonly #maps: number[];

  constructor(opts: {
    namespace: string;
    table: string;
    schema: TableSchema;
    /** The table's location (an existing table's, or where a new one will live). */
    location: string;
    storage: ObjectStorage;
    zstd: Compressor;
    limits?: Partial<TableBuilderLimits>;
  }) {
    this.namespace = opts.namespace;
    this.table = opts.table;
    this.schema = opts.schema;
    this.#location = opts.location;
    this.#storage = opts.storage;
    this.#zstd = opts.zstd;
    this.#limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.#maps = opts.schema.columns.flatMap((c, i) => (c.type === 'map' ? [i] : []));
  }

  /** Map entries of a row (resource, scope and record attributes together). */
  mapEntries(row: Row): number {
    let n = 0;
    for (const i of this.#maps) n += (row[i] as unknown[] | null)?.length ?? 0;
    return n;
  }

  /** Rows added so far. */
  get rows(): number {
    return this.#rows;
  }

  /**
   * Adds one row (its column 0 is the event time in µs); `walBytes` is its
   * share of WAL payload. Returns a promise only when it wrote a row group.
   */
  add(row: Row, walBytes: number): Promise<void> | undefined {
    const micros = row[0] as bigint;
    let q = micros / MICROS_PER_DAY;
    if (micros < 0n && q * MICROS_PER_DAY !== micros) q -= 1n;
    const day = Number(q);
    let buf = this.#days.get(day);
    if (buf === undefined) {
      buf = new DayBuffer(day, this.schema.columns.length);
      this.#days.set(day, buf);
    }
    const cols = buf.columns;
    for (let i = 0; i < cols.length; i++) cols[i]!.push(row[i]);
    buf.rows++;
    buf.walBytes += walBytes;
    buf.mapEntries += this.mapEntries(row);
    this.#rows++;
    if (buf.rows >= this.#limits.rowGroupRows || buf.walBytes >= this.#limits.rowGroupWalBytes || buf.mapEntries >= this.#limits.rowGroupMapEntries)
      return this.#flush(buf);
    return undefined;
  }

  /** Writes what is buffered and finishes every open file; returns the data files of the round. */
  async finish(): Promise<DataFileInfo[]> {
    for (const buf of this.#days.values()) {
      await this.#flush(buf);
      if (buf.writer !== null) {
        this.#done.push(await buf.writer.finish());
        buf.writer = null;
      }
    }
    this.#days.clear();
    return [...this.#done];
  }

  /** Drops open files and deletes finished ones (a round that will not commit them). */
  async abort(): Promise<void> {
    for (const buf of this.#days.values()) if (buf.writer !== null) await buf.writer.abort();
    this.#days.clear();
    for (const f of this.#done.splice(0)) await this.#storage.delete(f.location).catch(() => undefined);
  }

  async #flush(buf: DayBuffer): Promise<void> {
    if (buf.rows === 0) return;
    if (buf.writer === null) {
      const date = new Date(buf.day * 86_400_000).toISOString().slice(0, 10);
      const location = `${this.#location}/data/${this.schema.partitionFieldName}=${date}/${randomUUID()}.parquet`;
      buf.writer = new ParquetDataWriter({
        schema: this.schema,
        sink: await this.#storage.openSink(location),
        location,
        partitionDay: buf.day,
        zstd: this.#zstd,
        createdBy: 'siglake compactor',
      });
    }
    const columns = buf.columns;
    const rows = buf.rows;
    buf.columns = Array.from({ length: columns.length }, () => []);
    buf.rows = 0;
    buf.walBytes = 0;
    buf.mapEntries = 0;
    await buf.writer.writeRowGroup(columns, rows);
    if (buf.writer.bytesWritten >= this.#limits.targetFileBytes) {
      this.#done.push(await buf.writer.finish());
      buf.writer = null;
    }
  }
}
