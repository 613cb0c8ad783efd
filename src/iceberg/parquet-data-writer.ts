// Writes one Iceberg data file: Parquet with an Iceberg field id on every
// column, zstd pages, the Iceberg schema in the footer (`iceberg.schema`, as
// Iceberg Java writes it) and the manifest metrics gathered on the way. Rows
// arrive in batches; each batch becomes one row group, whose bytes are handed
// to the storage sink before the next is encoded, so memory holds one row
// group, not the file.

import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { ColumnStats, type FieldMetrics } from './column-stats.js';
import type { ObjectSink } from './storage.js';
import type { TableSchema } from './table-schema.js';
import type { Compressor } from './zstd-codec.js';

export interface DataFileInfo {
  readonly location: string;
  readonly recordCount: number;
  readonly fileSizeInBytes: number;
  /** Days since 1970-01-01 of the partition (the `day` transform of the event time). */
  readonly partitionDay: number;
  readonly columnSizes: Map<number, bigint>;
  readonly metrics: FieldMetrics;
  readonly splitOffsets: bigint[];
}

interface ChunkMeta {
  path_in_schema: string[];
  total_compressed_size: bigint;
  data_page_offset: bigint;
  dictionary_page_offset?: bigint;
}

export class ParquetDataWriter {
  readonly location: string;
  readonly partitionDay: number;
  readonly #schema: TableSchema;
  readonly #sink: ObjectSink;
  readonly #bytes = new ByteWriter(1 << 20);
  readonly #pw: ParquetWriter;
  readonly #stats: ColumnStats;
  readonly #pathIds = new Map<string, number>();
  #rows = 0;
  #closed = false;

  constructor(opts: { schema: TableSchema; sink: ObjectSink; location: string; partitionDay: number; zstd: Compressor; createdBy: string }) {
    this.#schema = opts.schema;
    this.#sink = opts.sink;
    this.location = opts.location;
    this.partitionDay = opts.partitionDay;
    this.#stats = new ColumnStats(opts.schema);
    for (const c of opts.schema.columns) {
      if (c.type === 'map') {
        this.#pathIds.set(`${c.name}.key_value.key`, c.keyId!);
        this.#pathIds.set(`${c.name}.key_value.value`, c.valueId!);
      } else {
        this.#pathIds.set(c.name, c.id);
      }
    }
    this.#pw = new ParquetWriter({
      writer: this.#bytes,
      schema: opts.schema.parquetSchema() as unknown as ConstructorParameters<typeof ParquetWriter>[0]['schema'],
      codec: 'ZSTD',
      compressors: { ZSTD: opts.zstd },
      statistics: true,
      kvMetadata: [{ key: 'iceberg.schema', value: JSON.stringify(opts.schema.icebergSchema()) }],
      createdBy: opts.createdBy,
    });
  }

  /** Bytes handed to the sink so far (the file's size once finished, less the footer). */
  get bytesWritten(): number {
    return this.#bytes.offset;
  }

  get rows(): number {
    return this.#rows;
  }

  /** Writes one row group: `columns[i]` holds the values of the schema's column i. */
  async writeRowGroup(columns: readonly unknown[][], rows: number): Promise<void> {
    if (rows === 0) return;
    const cols = this.#schema.columns;
    for (let i = 0; i < cols.length; i++) this.#stats.observe(i, columns[i]!);
    await this.#pw.write({
      columnData: cols.map((c, i) => ({ name: c.name, data: columns[i] as unknown[] as never })),
      rowGroupSize: rows,
    });
    this.#rows += rows;
    await this.#drain();
  }

  /** Writes the footer, makes the file durable and returns what its manifest entry needs. */
  async finish(): Promise<DataFileInfo> {
    this.#closed = true;
    await this.#pw.finish();
    await this.#drain();
    const size = await this.#sink.close();
    const columnSizes = new Map<number, bigint>();
    const splitOffsets: bigint[] = [];
    for (const rg of this.#pw.row_groups) {
      let first: bigint | undefined;
      for (const chunk of rg.columns) {
        const m = chunk.meta_data as ChunkMeta | undefined;
        if (m === undefined) continue;
        const start = m.dictionary_page_offset ?? m.data_page_offset;
        if (first === undefined || start < first) first = start;
        const id = this.#pathIds.get(m.path_in_schema.join('.'));
        if (id !== undefined) columnSizes.set(id, (columnSizes.get(id) ?? 0n) + m.total_compressed_size);
      }
      if (first !== undefined) splitOffsets.push(first);
    }
    return {
      location: this.location,
      recordCount: this.#rows,
      fileSizeInBytes: size,
      partitionDay: this.partitionDay,
      columnSizes,
      metrics: this.#stats.metrics(),
      splitOffsets,
    };
  }

  async abort(): Promise<void> {
    this.#closed = true;
    await this.#sink.abort();
  }

  get closed(): boolean {
    return this.#closed;
  }

  async #drain(): Promise<void> {
    const w = this.#bytes;
    if (w.index === 0) return;
    await this.#sink.write(new Uint8Array(w.buffer, 0, w.index));
    w.index = 0;
  }
}
