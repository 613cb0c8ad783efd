// Compactor throughput on one core, and the Parquet writer choice.
//
// Run:
//   node perf/run-ts.mjs perf/compactor-throughput.bench.ts [--mib 64] [--dir /dev/shm] [--rows 100000]
//
// Part 1, the whole compactor: WAL segments of realistic OTLP (the project's
// FixtureGenerator, 16 KiB requests) are written for one logs lane and one
// traces lane, then one Compactor round lands them in a SQLite catalog and a
// file warehouse. The compactor is single-threaded (protobuf decode, row
// mapping, Parquet encoding and zstd all run on its thread), so wall time on
// an otherwise idle machine is its one-core cost; CPU time is printed beside
// it. Figures: rows/s, WAL MB/s read, Parquet bytes per WAL byte.
//
// Part 2, the writer: the same decoded rows encoded to Parquet with zstd by
//   a. hyparquet-writer + zstd (WebAssembly), what the compactor uses;
//   b. parquet-wasm (arrow-rs): it only takes Arrow data, and this project
//      builds no Arrow, so its route from JS rows is hyparquet-writer
//      uncompressed → parquet-wasm readParquet → writeParquet(zstd);
//   c. hyparquet-writer with its built-in snappy, for reference.
// Each is timed over the same rows; sizes are printed, and whether the
// Iceberg field ids survive (parquet-wasm keeps them as PARQUET:field_id).

import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetMetadata } from 'hyparquet';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import * as parquetWasm from 'parquet-wasm';
import { Compactor } from '../src/compactor/compactor.js';
import { OtlpRowDecoder, type Row } from '../src/compactor/otlp-row-decoder.js';
import { SealRule } from '../src/compactor/seal-rule.js';
import { FileStorage } from '../src/iceberg/file-storage.js';
import { ParquetDataWriter } from '../src/iceberg/parquet-data-writer.js';
import { SqlCatalog } from '../src/iceberg/sql-catalog.js';
import type { ObjectSink } from '../src/iceberg/storage.js';
import { TableSchema } from '../src/iceberg/table-schema.js';
import { ZstdCodec } from '../src/iceberg/zstd-codec.js';
import { createLogger } from '../src/log.js';
import { FixtureGenerator } from '../src/otlp/fixtures.js';
import { ProtoRoot } from '../src/otlp/proto-root.js';
import { RecordType } from '../src/wal/format.js';
import { LaneWriter } from '../src/wal/lane-writer.js';
import { laneDir, LOGS_TABLE, TRACES_TABLE } from '../src/wal/layout.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const MIB = Number(arg('--mib') ?? 64);
const ROWS = Number(arg('--rows') ?? 100_000);
const root = mkdtempSync(join(arg('--dir') ?? tmpdir(), 'siglake-compactor-bench-'));
const proto = ProtoRoot.load();
const gen = new FixtureGenerator(42, proto);
const mb = (b: number) => b / 1e6;

/** Writes about `mib` MiB of `signal` requests into one lane; returns [bytes, records]. */
async function fillLane(walDir: string, signal: 'logs' | 'traces', mib: number): Promise<[number, number]> {
  const w = new LaneWriter({ dir: laneDir(walDir, 'bench', signal === 'logs' ? LOGS_TABLE : TRACES_TABLE), segmentBytes: 64 << 20 });
  let bytes = 0;
  let records = 0;
  const now = Date.now();
  while (bytes < mib * 1024 * 1024) {
    const f = gen.request(signal, { targetBytes: 16 * 1024 });
    w.stage(signal === 'logs' ? RecordType.LOGS : RecordType.TRACES, f.records, now, f.protobuf);
    bytes += w.flush();
    records += f.records;
  }
  await w.sync();
  await w.close();
  return [bytes, records];
}

function dirBytes(dir: string, suffix: string): number {
  let total = 0;
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(suffix)) total += statSync(p).size;
    }
  };
  walk(dir);
  return total;
}

async function compactorRun(signal: 'logs' | 'traces'): Promise<void> {
  const dir = join(root, signal);
  const walDir = join(dir, 'wal');
  const [walBytes, records] = await fillLane(walDir, signal, MIB);
  const catalog = SqlCatalog.open(`sqlite:${join(dir, 'catalog.db')}`, 'bench');
  const c = await Compactor.create({
    walDir,
    catalog,
    storage: new FileStorage(join(dir, 'warehouse')),
    sealRule: new SealRule('stopped'),
    log: createLogger('warn'),
    maxRoundWalBytes: Number.MAX_SAFE_INTEGER,
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await c.runRound();
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await catalog.close();
  const parquet = dirBytes(join(dir, 'warehouse'), '.parquet');
  if (r.rows !== records) throw new Error(`landed ${r.rows} of ${records} rows`);
  console.log(
    `compactor ${signal.padEnd(6)} ${records.toLocaleString('en')} rows, ${mb(walBytes).toFixed(1)} MB WAL -> ${r.files} file(s) ${mb(parquet).toFixed(1)} MB Parquet` +
      ` | ${secs.toFixed(2)} s wall, ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s CPU` +
      ` | ${Math.round(records / secs).toLocaleString('en')} rows/s, ${(mb(walBytes) / secs).toFixed(1)} MB/s of WAL` +
      ` | Parquet/WAL = ${(parquet / walBytes).toFixed(3)}`,
  );
}

class MemorySink implements ObjectSink {
  size = 0;
  readonly chunks: Uint8Array[] = [];
  async write(bytes: Uint8Array): Promise<void> {
    this.chunks.push(bytes.slice());
    this.size += bytes.length;
  }
  async close(): Promise<number> {
    return this.size;
  }
  async abort(): Promise<void> {}
  bytes(): Uint8Array {
    return Buffer.concat(this.chunks);
  }
}

/** `n` decoded log rows, as columns, from fixture requests. */
function logColumns(n: number): unknown[][] {
  const decoder = new OtlpRowDecoder(proto);
  const rows: Row[] = [];
  while (rows.length < n) decoder.logs(gen.logs({ targetBytes: 16 * 1024 }).protobuf, Date.now(), (r) => rows.push(r));
  rows.length = n;
  return TableSchema.LOGS.columns.map((_, i) => rows.map((r) => r[i]));
}

function time<T>(f: () => T | Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  return Promise.resolve(f()).then((v) => [v, (performance.now() - t0) / 1000]);
}

async function writers(): Promise<void> {
  const schema = TableSchema.LOGS;
  const columns = logColumns(ROWS);
  const zstd = await ZstdCodec.load();
  const rowGroup = 100_000;

  const viaOurs = async (): Promise<number> => {
    const sink = new MemorySink();
    const w = new ParquetDataWriter({ schema, sink, location: 'mem', partitionDay: 0, zstd, createdBy: 'bench' });
    for (let at = 0; at < ROWS; at += rowGroup) {
      const end = Math.min(ROWS, at + rowGroup);
      await w.writeRowGroup(columns.map((c) => c.slice(at, end)), end - at);
    }
    return (await w.finish()).fileSizeInBytes;
  };
  const hyparquet = (codec: 'UNCOMPRESSED' | 'SNAPPY'): Uint8Array => {
    const bw = new ByteWriter();
    const pw = new ParquetWriter({ writer: bw, schema: schema.parquetSchema() as never, codec, statistics: true });
    pw.write({ columnData: schema.columns.map((c, i) => ({ name: c.name, data: columns[i] as never })), rowGroupSize: rowGroup });
    pw.finish();
    return bw.getBytes().slice();
  };
  const viaParquetWasm = (plain: Uint8Array): Uint8Array => {
    const table = parquetWasm.readParquet(plain);
    const props = new parquetWasm.WriterPropertiesBuilder().setCompression(parquetWasm.Compression.ZSTD).setMaxRowGroupSize(rowGroup).build();
    return parquetWasm.writeParquet(table, props);
  };

  await viaOurs(); // warm-up (JIT, wasm)
  const [oursSize, oursSecs] = await time(viaOurs);
  const [plain, plainSecs] = await time(() => hyparquet('UNCOMPRESSED'));
  viaParquetWasm(plain);
  const [pw, pwSecs] = await time(() => viaParquetWasm(plain));
  const [snappy, snappySecs] = await time(() => hyparquet('SNAPPY'));
  const md = parquetMetadata(pw.buffer.slice(pw.byteOffset, pw.byteOffset + pw.byteLength) as ArrayBuffer);
  const withIds = md.schema.filter((e) => e.field_id !== undefined).length;
  const keepsIds = `${withIds} of ${md.schema.length} schema elements carry a field id (root and map key_value groups have none)`;
  const line = (label: string, secs: number, size: number) =>
    console.log(`writer ${label.padEnd(52)} ${(ROWS / secs).toFixed(0).padStart(9)} rows/s  ${mb(size).toFixed(2).padStart(7)} MB`);
  console.log(`\n${ROWS.toLocaleString('en')} log rows (${schema.columns.length} columns):`);
  line('a. hyparquet-writer + zstd-wasm (used)', oursSecs, oursSize);
  line('b. hyparquet-writer plain -> parquet-wasm zstd (total)', plainSecs + pwSecs, pw.length);
  line('   of which parquet-wasm read + write alone', pwSecs, pw.length);
  line('c. hyparquet-writer + snappy (reference)', snappySecs, snappy.length);
  console.log(`parquet-wasm output: ${keepsIds}`);
}

try {
  await compactorRun('logs');
  await compactorRun('traces');
  await writers();
} finally {
  rmSync(root, { recursive: true, force: true });
}
