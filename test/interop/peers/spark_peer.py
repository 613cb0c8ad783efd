"""Apache Spark (pyspark, local mode) with the Iceberg runtime, reading
Siglake's catalog through Iceberg's JdbcCatalog; prints one JSON object.

Usage: spark_peer.py --uri jdbc:... --warehouse file:///... --jars a.jar,b.jar
                     --time-from ISO --attr k=v [--maintain STEP ...] TABLE [TABLE...]

--maintain runs one of Iceberg's maintenance procedures on each table first,
in the order given, as an operator would (docs/iceberg.md): rewrite_data_files
(every file rewritten), rewrite_manifests, expire (every snapshot but the
current one expired), compute_stats (compute_table_stats and
compute_partition_stats: a Puffin file and a partition-statistics file for
the current snapshot), tag_retain (ALTER TABLE … CREATE TAG aged RETAIN 1
MINUTES on the current snapshot: the tag's max-ref-age-ms).

The catalog configuration is the one docs/iceberg.md gives ("Reading with
Spark and Trino"): keep the two in step.
"""

import argparse
import json
import sys

from pyspark.sql import SparkSession


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--uri", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--name", default="siglake")
    p.add_argument("--jars", required=True)
    p.add_argument("--time-from", required=True)
    p.add_argument("--attr", required=True)
    p.add_argument(
        "--maintain", action="append", default=[], choices=["rewrite_data_files", "rewrite_manifests", "expire", "compute_stats", "tag_retain"]
    )
    p.add_argument("tables", nargs="+")
    a = p.parse_args()

    c = f"spark.sql.catalog.{a.name}"
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("siglake-interop")
        .config("spark.jars", a.jars)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(c, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{c}.type", "jdbc")
        .config(f"{c}.uri", a.uri)
        .config(f"{c}.warehouse", a.warehouse)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    key, value = a.attr.split("=", 1)
    ts = a.time_from.replace("T", " ")
    out = {"spark_version": spark.version, "namespaces": [], "tables": {}, "maintained": []}
    for name in a.tables:
        for step in a.maintain:
            t = f"{a.name}.{name}"
            if step == "rewrite_data_files":
                rows = spark.sql(
                    f"CALL {a.name}.system.rewrite_data_files(table => '{name}', options => map('min-input-files', '1', 'rewrite-all', 'true'))"
                ).collect()
            elif step == "compute_stats":
                rows = spark.sql(f"CALL {a.name}.system.compute_table_stats(table => '{name}')").collect()
                rows += spark.sql(f"CALL {a.name}.system.compute_partition_stats(table => '{name}')").collect()
            elif step == "tag_retain":
                rows = spark.sql(f"ALTER TABLE {t} CREATE TAG aged RETAIN 1 MINUTES").collect()
            elif step == "rewrite_manifests":
                rows = spark.sql(f"CALL {a.name}.system.rewrite_manifests(table => '{name}', use_caching => false)").collect()
            else:
                newest = spark.sql(f"SELECT max(committed_at) FROM {t}.snapshots").collect()[0][0]
                rows = spark.sql(
                    f"CALL {a.name}.system.expire_snapshots(table => '{name}', older_than => TIMESTAMP '{newest}', retain_last => 1)"
                ).collect()
            out["maintained"].append([name, step, [list(r) for r in rows]])
    out["namespaces"] = sorted(r[0] for r in spark.sql(f"SHOW NAMESPACES IN {a.name}").collect())
    for name in a.tables:
        t = f"{a.name}.{name}"
        marker = "name" if name.endswith(".traces") else "body"
        one = lambda sql: spark.sql(sql).collect()[0][0]
        out["tables"][name] = {
            "count": one(f"SELECT count(*) FROM {t}"),
            "by_service": [
                [r[0], r[1]]
                for r in spark.sql(f"SELECT service_name, count(*) FROM {t} GROUP BY service_name ORDER BY service_name").collect()
            ],
            "attr_count": one(f"SELECT count(*) FROM {t} WHERE attributes['{key}'] = '{value}'"),
            "time_count": one(f"SELECT count(*) FROM {t} WHERE time >= TIMESTAMP '{ts}'"),
            "markers": sorted(r[0] for r in spark.sql(f"SELECT {marker} FROM {t}").collect()),
            "schema": [[f.name, f.dataType.simpleString(), f.nullable] for f in spark.table(t).schema.fields],
            "snapshots": [
                [str(r[0]), None if r[1] is None else str(r[1]), r[2]]
                for r in spark.sql(f"SELECT snapshot_id, parent_id, operation FROM {t}.snapshots ORDER BY committed_at").collect()
            ],
            "refs": sorted(
                [r[0], r[1], str(r[2]), r[3]]
                for r in spark.sql(f"SELECT name, type, snapshot_id, max_reference_age_in_ms FROM {t}.refs").collect()
            ),
            "files": sorted(
                [r[0], r[1]] for r in spark.sql(f"SELECT file_path, record_count FROM {t}.files").collect()
            ),
            "entries": sorted(
                [r[0], r[1], str(r[2]), r[3], r[4]]
                for r in spark.sql(
                    f"SELECT data_file.file_path, status, snapshot_id, sequence_number, file_sequence_number FROM {t}.entries"
                ).collect()
            ),
        }
    spark.stop()
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
