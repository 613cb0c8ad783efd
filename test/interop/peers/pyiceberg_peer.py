"""pyiceberg's view of Siglake's catalog, printed as one JSON object.

Usage: pyiceberg_peer.py --uri URI --warehouse file:///... --name siglake
                         [--time-from ISO] [--attr k=v]

Every table of every namespace is loaded through pyiceberg's SqlCatalog and
read with scan().to_arrow(); the script reports what a user of pyiceberg
would see: the schema (field ids, types, required), the partition spec, the
rows (count and the marker column), the snapshots, history and data files
(inspect), and the answers to the queries the Spark peer also runs.
"""

import argparse
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import GreaterThanOrEqual
from pyiceberg.types import MapType


def marker_column(table_name: str) -> str:
    return "name" if table_name == "traces" else "body"


def schema_of(table):
    out = []
    for f in table.schema().fields:
        entry = {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
        if isinstance(f.field_type, MapType):
            entry["key_id"] = f.field_type.key_id
            entry["value_id"] = f.field_type.value_id
        out.append(entry)
    return out


def parquet_field_ids(file_uri: str):
    """The field ids pyarrow reads from a data file's Parquet schema (map keys and values included)."""

    def fid(field):
        raw = (field.metadata or {}).get(b"PARQUET:field_id")
        return int(raw) if raw is not None else None

    ids = {}
    for f in pq.read_schema(file_uri.removeprefix("file://")):
        ids[f.name] = fid(f)
        if pa.types.is_map(f.type):
            ids[f.name + ".key"] = fid(f.type.key_field)
            ids[f.name + ".value"] = fid(f.type.item_field)
    return ids


def queries(table, data: pa.Table, time_from, attr):
    """The questions the Spark peer answers too: count, group by service, attribute filter, time filter."""
    by_service = data.group_by("service_name").aggregate([("service_name", "count")])
    groups = sorted(
        [[r["service_name"], r["service_name_count"]] for r in by_service.to_pylist()],
        key=lambda g: (g[0] is None, g[0] or ""),
    )
    out = {"count": data.num_rows, "by_service": groups}
    if attr is not None:
        key, value = attr.split("=", 1)
        looked = pc.map_lookup(data.column("attributes"), key, "first")
        out["attr_count"] = pc.sum(pc.equal(looked, value).fill_null(False).cast(pa.int64())).as_py() or 0
    if time_from is not None:
        # Through pyiceberg's own filter (partition and stats pruning), not Arrow.
        out["time_count"] = table.scan(row_filter=GreaterThanOrEqual("time", time_from)).to_arrow().num_rows
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--uri", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--name", default="siglake")
    p.add_argument("--time-from")
    p.add_argument("--attr")
    a = p.parse_args()

    cat = SqlCatalog(a.name, uri=a.uri, warehouse=a.warehouse)
    result = {"namespaces": sorted(".".join(ns) for ns in cat.list_namespaces()), "tables": {}}
    for ns in result["namespaces"]:
        for ident in sorted(cat.list_tables(ns)):
            name = ".".join(ident)
            table = cat.load_table(ident)
            data = table.scan().to_arrow()
            col = marker_column(ident[-1])
            snaps = table.inspect.snapshots().to_pylist()
            files = table.inspect.files().to_pylist()
            result["tables"][name] = {
                "format_version": table.format_version,
                "metadata_location": table.metadata_location,
                "schema": schema_of(table),
                "arrow_types": {f.name: str(f.type) for f in data.schema},
                "parquet_field_ids": [parquet_field_ids(f["file_path"]) for f in files],
                "spec": [
                    {"source_id": f.source_id, "field_id": f.field_id, "transform": str(f.transform), "name": f.name}
                    for f in table.spec().fields
                ],
                "rows": data.num_rows,
                "markers": sorted(v for v in data.column(col).to_pylist()),
                "services": sorted({v for v in data.column("service_name").to_pylist() if v is not None}),
                "days": sorted({str(v.date()) for v in data.column("time").to_pylist()}),
                "current_snapshot_id": str(table.current_snapshot().snapshot_id) if table.current_snapshot() else None,
                "history": [{"snapshot_id": str(h.snapshot_id), "timestamp_ms": h.timestamp_ms} for h in table.history()],
                "snapshots": [
                    {
                        "snapshot_id": str(s["snapshot_id"]),
                        "parent_id": None if s["parent_id"] is None else str(s["parent_id"]),
                        "operation": s["operation"],
                        "summary": dict(s["summary"] or []),
                    }
                    for s in snaps
                ],
                "files": [
                    {
                        "file_path": f["file_path"],
                        "record_count": f["record_count"],
                        "file_format": f["file_format"],
                        "content": f["content"],
                        "partition": f["partition"],
                    }
                    for f in files
                ],
                "queries": queries(table, data, a.time_from, a.attr),
                # The live manifest entries: file, status, snapshot id, data and file sequence numbers.
                "entries": sorted(
                    [
                        e["data_file"]["file_path"],
                        e["status"],
                        str(e["snapshot_id"]),
                        e["sequence_number"],
                        e["file_sequence_number"],
                    ]
                    for e in table.inspect.entries().to_pylist()
                ),
            }
    json.dump(result, sys.stdout, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
