// Writes one Iceberg data file: Parquet with an Iceberg field id on every
// column, zstd pages, the Iceberg schema in the footer (`iceberg.schema`, as
// Iceberg Java writes it) and the manifest metrics gathered on the way. Rows
// arrive in batches; each batch becomes one row group, whose bytes are handed
// to the storage sink before the next is encoded, so memory holds one row
// group, not the file.

import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { writeColumn } from 'hyparquet-writer/src/column.js';
import type { ColumnEncoder, PageData } from 'hyparquet-writer/src/types.js';
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

type SchemaElement = ColumnEncoder['element'];

/**
 * One leaf column of the file. A map column has two (key and value), whose
 * levels one pass over the rows makes; any other column is its own leaf.
 */
interface Leaf {
  readonly encoder: ColumnEncoder;
  /** Index of the table column the leaf's values come from. */
  readonly column: number;
  readonly part: 'flat' | 'key' | 'value';
  readonly required: boolean;
}

/** A map column's two leaves for one row group, Dremel-encoded. */
interface MapPages {
  readonly key: PageData;
  readonly value: PageData;
}

/** hyparquet-writer's default page size (ParquetWriter.write). */
const PAGE_SIZE = 1 << 20;

export class ParquetDataWriter {
  readonly location: string;
  readonly partitionDay: number;
  readonly #schema: TableSchema;
  readonly #sink: ObjectSink;
  readonly #bytes = new ByteWriter(1 << 20);
  readonly #pw: ParquetWriter;
  readonly #stats: ColumnStats;
  readonly #pathIds = new Map<string, number>();
  readonly #leaves: Leaf[] = [];
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
    const parquetSchema = opts.schema.parquetSchema() as unknown as SchemaElement[];
    this.#pw = new ParquetWriter({
      writer: this.#bytes,
      schema: parquetSchema,
      codec: 'ZSTD',
      compressors: { ZSTD: opts.zstd },
      statistics: true,
      kvMetadata: [{ key: 'iceberg.schema', value: JSON.stringify(opts.schema.icebergSchema()) }],
      createdBy: opts.createdBy,
    });
    // The leaves in file order, each with the encoder ParquetWriter.write would
    // give it (its defaults: 1 MiB pages, offset index, no column index).
    const root = parquetSchema[0]!;
    let at = 1;
    for (let i = 0; i < opts.schema.columns.length; i++) {
      const c = opts.schema.columns[i]!;
      const top = parquetSchema[at]!;
      const leaf = (schemaPath: SchemaElement[], part: Leaf['part']): Leaf => ({
        column: i,
        part,
        required: c.required,
        encoder: {
          columnName: schemaPath
            .slice(1)
            .map((e) => e.name)
            .join('.'),
          element: schemaPath[schemaPath.length - 1]!,
          schemaPath,
          codec: 'ZSTD',
          compressors: this.#pw.compressors,
          stats: true,
          pageSize: PAGE_SIZE,
          columnIndex: false,
          offsetIndex: true,
        },
      });
      if (c.type === 'map') {
        const kv = parquetSchema[at + 1]!;
        this.#leaves.push(leaf([root, top, kv, parquetSchema[at + 2]!], 'key'), leaf([root, top, kv, parquetSchema[at + 3]!], 'value'));
        at += 4;
      } else {
        this.#leaves.push(leaf([root, top], 'flat'));
        at += 1;
      }
    }
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
    for (let i = 0; i < cols.length; i++) {
      if (columns[i]!.length !== rows) throw new Error(`column ${cols[i]!.name} has ${columns[i]!.length} values for ${rows} rows`);
      this.#stats.observe(i, columns[i]!);
    }
    // What ParquetWriter.write does for one row group, less its generic Dremel
    // walk: a map column's levels come from one pass over its [key, value]
    // pairs, without an entry object per pair and leaf (byte-identical output,
    // test/unit/iceberg-parquet-direct.test.ts).
    const pw = this.#pw;
    const groupStart = this.#bytes.offset;
    const chunks: ReturnType<typeof writeColumn>['chunk'][] = [];
    let map: MapPages | null = null;
    for (const leaf of this.#leaves) {
      const data = columns[leaf.column]!;
      let pageData: PageData;
      if (leaf.part === 'flat') pageData = flatPage(data, leaf.required);
      else {
        if (leaf.part === 'key') map = mapPages(data, leaf.required);
        pageData = leaf.part === 'key' ? map!.key : map!.value;
      }
      const result = writeColumn({ writer: this.#bytes, column: leaf.encoder, pageData });
      chunks.push(result.chunk);
      pw.pendingIndexes.push(result);
    }
    let totalByteSize = 0n;
    for (const { meta_data } of chunks) totalByteSize += meta_data?.total_uncompressed_size ?? 0n;
    pw.num_rows += BigInt(rows);
    pw.row_groups.push({
      columns: chunks,
      total_byte_size: totalByteSize,
      num_rows: BigInt(rows),
      total_compressed_size: BigInt(this.#bytes.offset - groupStart),
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

/** hyparquet-writer reads levels by index and slices them per page: a typed array serves as its number[]. */
const asLevels = (a: Uint8Array): number[] => a as unknown as number[];

/** A top-level column's page data: no repetition; definition levels when it may be null. */
export function flatPage(values: readonly unknown[], required: boolean): PageData {
  if (required) {
    for (const v of values) if (v === null || v === undefined) throw new Error('parquet required value is undefined');
    return { values: values as PageData['values'], definitionLevels: [], repetitionLevels: [], maxDefinitionLevel: 0 };
  }
  const definitionLevels = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) definitionLevels[i] = values[i] === null || values[i] === undefined ? 0 : 1;
  return { values: values as PageData['values'], definitionLevels: asLevels(definitionLevels), repetitionLevels: [], maxDefinitionLevel: 1 };
}

/**
 * The key and value leaves of a map<string,string> column whose rows are
 * arrays of [key, value] pairs (or null): the levels Dremel gives a map that
 * is optional or required, a repeated key_value, a required key and an
 * optional value. A null or empty map is one slot with no value.
 */
export function mapPages(rows: readonly unknown[], required: boolean): MapPages {
  const opt = required ? 0 : 1;
  // One slot per pair, and one for a null or empty map: sized first, filled by index.
  let slots = 0;
  for (const row of rows) {
    if (row !== null && row !== undefined && !Array.isArray(row)) throw new Error('parquet map value must be an array of [key, value] pairs');
    slots += row === null || row === undefined || (row as unknown[]).length === 0 ? 1 : (row as unknown[]).length;
  }
  const keys = new Array<string | undefined>(slots);
  const values = new Array<string | null | undefined>(slots);
  const keyDef = new Uint8Array(slots);
  const valueDef = new Uint8Array(slots);
  const rep = new Uint8Array(slots);
  let at = 0;
  for (const row of rows as readonly ([string, string | null][] | null | undefined)[]) {
    if (row === null || row === undefined || row.length === 0) {
      if (row == null && required) throw new Error('parquet required value is undefined');
      keys[at] = undefined;
      values[at] = undefined;
      const def = row == null ? 0 : opt; // levels: a null map 0, an empty one the map's own level
      keyDef[at] = def;
      valueDef[at] = def;
      at++; // rep stays 0: a new row
      continue;
    }
    for (let i = 0; i < row.length; i++) {
      const pair = row[i]!;
      const k = pair[0];
      const v = pair[1];
      if (k === null || k === undefined) throw new Error('parquet required value is undefined');
      keys[at] = k;
      values[at] = v;
      keyDef[at] = opt + 1;
      valueDef[at] = v === null || v === undefined ? opt + 1 : opt + 2;
      if (i > 0) rep[at] = 1;
      at++;
    }
  }
  return {
    key: { values: keys as PageData['values'], definitionLevels: asLevels(keyDef), repetitionLevels: asLevels(rep), maxDefinitionLevel: opt + 1 },
    value: { values: values as PageData['values'], definitionLevels: asLevels(valueDef), repetitionLevels: asLevels(rep), maxDefinitionLevel: opt + 2 },
  };
}
