// Apache Spark (pyspark 4.1, local mode) with Iceberg's Spark runtime reads
// Siglake's tables through Iceberg's JdbcCatalog, on the SQLite catalog (the
// SQLite JDBC driver) and on the PostgreSQL one (the PostgreSQL driver), with
// the configuration docs/iceberg.md gives. A count, a GROUP BY service_name, a
// filter on attributes['k'] and one on time must give what was acknowledged
// and what pyiceberg gives; so must the rows, the snapshots and the files.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY2_ISO, landFixture, PYTHON, pythonPeer, sparkJars, type CatalogKind, type LandedFixture } from './helpers.js';
import { expectedQueries, pyicebergView, type PyCatalog } from './readers.js';
import { LOGS_SCHEMA, TRACES_SCHEMA } from './schema.js';

interface SparkTable {
  count: number;
  by_service: [string, number][];
  attr_count: number;
  time_count: number;
  markers: string[];
  schema: [string, string, boolean][];
  snapshots: [string, string | null, string][];
  files: [string, number][];
}

interface SparkView {
  spark_version: string;
  namespaces: string[];
  tables: Record<string, SparkTable>;
}

const TABLES = ['main.logs', 'tenant_acme.logs', 'tenant_acme.traces', 'tenant_globex.traces'];

/** Spark's type names for the schema docs/iceberg.md states. */
function sparkType(icebergType: string): string {
  return { timestamptz: 'timestamp', long: 'bigint', int: 'int', string: 'string', 'map<string, string>': 'map<string,string>' }[icebergType]!;
}

describe.each(['sqlite', 'postgres'] as CatalogKind[])('Spark + Iceberg JdbcCatalog on the %s catalog', (kind) => {
  let fx: LandedFixture;
  let py: PyCatalog;
  let spark: SparkView;

  beforeAll(async () => {
    fx = await landFixture(kind, 'spark');
    py = await pyicebergView(fx);
    spark = await pythonPeer<SparkView>(
      'spark_peer.py',
      ['--uri', fx.uris.jdbc, '--warehouse', fx.uris.warehouseUri, '--name', 'siglake', '--jars', sparkJars(), '--time-from', DAY2_ISO, '--attr', 'k=v', ...TABLES],
      // Local mode on two shared cores: a small driver, and the interop venv's Python for the workers.
      { PYSPARK_SUBMIT_ARGS: '--driver-memory 768m pyspark-shell', PYSPARK_PYTHON: PYTHON },
    );
  }, 900_000);
  afterAll(async () => {
    await fx?.cleanup();
  });

  it('runs Spark 4.1 and lists the same namespaces as pyiceberg', () => {
    expect(spark.spark_version).toMatch(/^4\.1\./);
    expect(spark.namespaces).toEqual(py.namespaces);
  });

  it('count, GROUP BY service_name, attributes[k] and time filters equal what was acknowledged and what pyiceberg answers', () => {
    for (const name of TABLES) {
      const s = spark.tables[name]!;
      const want = expectedQueries(fx, name);
      expect({ count: s.count, by_service: s.by_service, attr_count: s.attr_count, time_count: s.time_count }, name).toEqual(want);
      expect(py.tables[name]!.queries, name).toEqual(want);
    }
  });

  it('returns the same rows as pyiceberg, none doubled', () => {
    for (const name of TABLES) {
      expect(spark.tables[name]!.markers, name).toEqual(py.tables[name]!.markers);
      expect(new Set(spark.tables[name]!.markers).size, name).toBe(fx.acked.get(name)!.length);
    }
  });

  it('reads the documented columns, types and nullability', () => {
    for (const name of TABLES) {
      const schema = name.endsWith('.traces') ? TRACES_SCHEMA : LOGS_SCHEMA;
      expect(spark.tables[name]!.schema, name).toEqual(schema.map((f) => [f.name, sparkType(f.type), !f.required]));
    }
  });

  it('its snapshots and files metadata tables agree with pyiceberg inspect', () => {
    for (const name of TABLES) {
      const s = spark.tables[name]!;
      const p = py.tables[name]!;
      expect(s.snapshots, name).toEqual(p.snapshots.map((x) => [x.snapshot_id, x.parent_id, x.operation]));
      expect(s.files, name).toEqual(p.files.map((f) => [f.file_path, f.record_count]).sort());
    }
  });
});
