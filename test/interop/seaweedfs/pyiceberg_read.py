"""Reads Siglake tables from an S3 warehouse with pyiceberg (SqlCatalog + pyarrow's S3 FileIO).

Usage: python pyiceberg_read.py <sqlite catalog file> <catalog name> <s3 endpoint> <table>...
Credentials and region come from the standard AWS environment variables, as for Siglake.
Prints one JSON object: {"<table>": {"metadata_location": ..., "rows": [<body or name>...]}}.
"""
import json
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog

db, name, endpoint, *tables = sys.argv[1:]
catalog = SqlCatalog(
    name,
    uri=f"sqlite:///{db}",
    **{
        "s3.endpoint": endpoint,
        "s3.region": os.environ["AWS_REGION"],
        "s3.force-virtual-addressing": "false",
    },
)
out = {}
for ident in tables:
    table = catalog.load_table(ident)
    column = "name" if ident.endswith(".traces") else "body"
    arrow = table.scan(selected_fields=(column,)).to_arrow()
    out[ident] = {"metadata_location": table.metadata_location, "rows": arrow.column(column).to_pylist()}
print(json.dumps(out))
