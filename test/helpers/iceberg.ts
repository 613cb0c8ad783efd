// Independent readers of what the compactor lands: icebird (a JavaScript
// Iceberg reader that follows metadata → manifest list → manifests → Parquet
// with hyparquet) and DuckDB (read_parquet over the files the manifests
// list). Neither shares code with src/iceberg. Also a small WAL writer for
// unit tests, through the real LaneWriter.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { icebergManifests, icebergMetadata, icebergRead } from 'icebird';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import { RecordType } from '../../src/wal/format.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { laneDir, type WalTable } from '../../src/wal/layout.js';

/**
 * Makes the global fetch (which icebird and hyparquet use) read `file:` URLs,
 * Range requests included; other URLs go to the real fetch. Returns a restore function.
 */
export function installFileFetch(): () => void {
  const real = globalThis.fetch;
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith('file:')) return real(input, init);
    let buf: Buffer;
    try {
      buf = fs.readFileSync(fileURLToPath(url));
    } catch {
      return new Response('not found', { status: 404, statusText: 'Not Found' });
    }
    const headers = new Headers(init?.headers);
    const range = headers.get('range');
    if (range !== null) {
      const m = /^bytes=(\d+)-(\d*)$/.exec(range);
      if (m === null) return new Response('bad range', { status: 416 });
      const start = Number(m[1]);
      const end = m[2] === '' ? buf.length - 1 : Math.min(Number(m[2]), buf.length - 1);
      return new Response(buf.subarray(start, end + 1), {
        status: 206,
        headers: { 'content-length': String(end + 1 - start), 'content-range': `bytes ${start}-${end}/${buf.length}` },
      });
    }
    return new Response(buf, { status: 200, headers: { 'content-length': String(buf.length) } });
  }) as typeof fetch;
  return () => {
    globalThis.fetch = real;
  };
}

export type IcebirdRow = Record<string, unknown>;

/** icebird's rows of the table whose current metadata file is `metadataLocation`. */
export async function icebirdRows(metadataLocation: string): Promise<IcebirdRow[]> {
  return icebergRead(tableLocation(metadataLocation));
}

/** icebird's way of naming a table: its URL and the name of its metadata file. */
function tableLocation(metadataLocation: string): { tableUrl: string; metadataFileName: string } {
  const cut = metadataLocation.lastIndexOf('/metadata/');
  return { tableUrl: metadataLocation.slice(0, cut), metadataFileName: metadataLocation.slice(cut + '/metadata/'.length) };
}

/** The data files icebird finds through the current snapshot's manifests. */
export async function icebirdDataFiles(metadataLocation: string): Promise<{ path: string; records: number; partition: unknown }[]> {
  const metadata = await icebergMetadata(tableLocation(metadataLocation));
  const manifests = await icebergManifests(metadata);
  return manifests.flatMap((m) =>
    m.entries
      .filter((e) => e.status !== 2)
      .map((e) => ({ path: e.data_file.file_path, records: Number(e.data_file.record_count), partition: e.data_file.partition })),
  );
}

/** One data file of the current snapshot as its manifest entry describes it (field id → value maps). */
export interface ManifestDataFile {
  readonly path: string;
  readonly recordCount: number;
  readonly valueCounts: Map<number, number>;
  readonly nullValueCounts: Map<number, number>;
  readonly lowerBounds: Map<number, Uint8Array>;
  readonly upperBounds: Map<number, Uint8Array>;
}

/** The current schema's fields as the table metadata file gives them (icebird's reading). */
export interface MetadataField {
  readonly id: number;
  readonly name: string;
  readonly type: string | { type: string; 'key-id'?: number; 'value-id'?: number };
}

/** The current schema and the live data files of a table, read through icebird (metadata → manifest list → manifests). */
export async function icebirdManifestFiles(metadataLocation: string): Promise<{ fields: MetadataField[]; files: ManifestDataFile[] }> {
  const metadata = await icebergMetadata(tableLocation(metadataLocation));
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id'])!;
  const manifests = await icebergManifests(metadata);
  const files = manifests.flatMap((m) =>
    m.entries
      .filter((e) => e.status !== 2)
      .map((e) => {
        const d = e.data_file;
        return {
          path: d.file_path,
          recordCount: Number(d.record_count),
          valueCounts: idMap(d.value_counts, Number),
          nullValueCounts: idMap(d.null_value_counts, Number),
          lowerBounds: idMap(d.lower_bounds, (v) => v as Uint8Array),
          upperBounds: idMap(d.upper_bounds, (v) => v as Uint8Array),
        };
      }),
  );
  return { fields: schema.fields as unknown as MetadataField[], files };
}

/** An Avro map with int keys, as a reader may give it (an array of {key, value} records, or an object). */
function idMap<T>(raw: unknown, conv: (v: unknown) => T): Map<number, T> {
  const out = new Map<number, T>();
  if (raw === undefined || raw === null) return out;
  const pairs: [unknown, unknown][] = Array.isArray(raw)
    ? raw.map((kv: { key: unknown; value: unknown }) => [kv.key, kv.value])
    : Object.entries(raw as Record<string, unknown>);
  for (const [k, v] of pairs) out.set(Number(k), conv(v));
  return out;
}

/** Runs one query in a fresh in-memory DuckDB; rows as JSON-safe objects. */
export async function duckQuery(sql: string): Promise<Record<string, unknown>[]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const reader = await conn.runAndReadAll(sql);
    return reader.getRowObjectsJson() as Record<string, unknown>[];
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** A DuckDB `read_parquet([...])` source over `file:` URIs. */
export function duckParquet(files: readonly string[]): string {
  return `read_parquet([${files.map(duckPath).join(', ')}])`;
}

/** A `file:` URI as a DuckDB string literal of its path. */
export function duckPath(file: string): string {
  return `'${fileURLToPath(file).replace(/'/g, "''")}'`;
}

export interface WalRecordSpec {
  readonly type: 'logs' | 'traces';
  /** A plain ExportLogsServiceRequest / ExportTraceServiceRequest object (protobufjs form). */
  readonly request: Record<string, unknown>;
  readonly timeMs?: number;
}

/**
 * Appends records to a lane through the real LaneWriter (one new segment per
 * call, like one life of an ingester) and seals it. Returns the log records or spans written.
 */
export async function writeLane(walDir: string, tenant: string, table: WalTable, records: readonly WalRecordSpec[], segmentBytes = 1 << 20): Promise<number> {
  const root = ProtoRoot.load();
  const w = new LaneWriter({ dir: laneDir(walDir, tenant, table), segmentBytes });
  let n = 0;
  for (const r of records) {
    const payload = r.type === 'logs' ? root.encodeLogsRequest(r.request) : root.encodeTraceRequest(r.request);
    const count = countOf(r);
    n += count;
    w.stage(r.type === 'logs' ? RecordType.LOGS : RecordType.TRACES, count, r.timeMs ?? Date.now(), payload);
    w.flush();
  }
  await w.sync();
  await w.close();
  return n;
}

function countOf(r: WalRecordSpec): number {
  const outer = (r.request[r.type === 'logs' ? 'resourceLogs' : 'resourceSpans'] as Record<string, unknown>[] | undefined) ?? [];
  let n = 0;
  for (const rl of outer) {
    for (const sl of (rl[r.type === 'logs' ? 'scopeLogs' : 'scopeSpans'] as Record<string, unknown>[] | undefined) ?? []) {
      n += ((sl[r.type === 'logs' ? 'logRecords' : 'spans'] as unknown[] | undefined) ?? []).length;
    }
  }
  return n;
}

/** An ExportLogsServiceRequest with one log record per body. */
export function logsRequest(bodies: readonly string[], opts: { service?: string; timeUnixNano?: (i: number) => string } = {}): Record<string, unknown> {
  return {
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: opts.service ?? 'svc' } }] },
        scopeLogs: [
          {
            scope: { name: 'scope', version: '1.0' },
            logRecords: bodies.map((b, i) => ({
              timeUnixNano: opts.timeUnixNano?.(i) ?? String(1_767_225_600_000_000_000n + BigInt(i) * 1_000_001n),
              severityNumber: 9,
              severityText: 'INFO',
              body: { stringValue: b },
              attributes: [{ key: 'i', value: { intValue: String(i) } }],
            })),
          },
        ],
      },
    ],
  };
}

/** An ExportTraceServiceRequest with one span per name. */
export function tracesRequest(names: readonly string[], service = 'svc'): Record<string, unknown> {
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeSpans: [
          {
            scope: { name: 'tracer' },
            spans: names.map((name, i) => ({
              traceId: Buffer.alloc(16, i + 1),
              spanId: Buffer.alloc(8, i + 1),
              name,
              kind: 2,
              startTimeUnixNano: String(1_767_225_600_000_000_000n + BigInt(i)),
              endTimeUnixNano: String(1_767_225_600_000_500_000n + BigInt(i)),
              status: { code: 1 },
              events: [{ timeUnixNano: '1767225600000000100', name: 'ev', attributes: [{ key: 'e', value: { boolValue: true } }] }],
            })),
          },
        ],
      },
    ],
  };
}

/** Every file under `dir`, relative (a missing dir has none). */
export function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(path.relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}
