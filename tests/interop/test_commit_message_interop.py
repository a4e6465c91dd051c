"""CommitMessage bytes across implementations, live: pypaimon 2.1.0 (its own venv) and us, both directions.

pypaimon writes real data files with its own writer and serializes its CommitMessages (version 14); we
decode them and must see the files it reports, which exist on disk with those sizes. Then we write files and
serialize our messages; pypaimon decodes them and must report our files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.types import INT
from paimon_meta.serde.commit_message import (
    CURRENT_VERSION,
    deserialize_commit_message,
    serialize_commit_message,
)
from tests.fixtures.interop import run_pypaimon
from tests.table.write.test_write import make_table, write_all

pytestmark = pytest.mark.interop

PYPAIMON_WRITES = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.write.commit_message_serializer import serialize_commit_message

warehouse = sys.argv[1]
catalog = CatalogFactory.create({"warehouse": warehouse})
catalog.create_database("db", True)
pa_schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False),
                       ("name", pa.string())])
schema = Schema.from_pyarrow_schema(pa_schema, partition_keys=["p"], primary_keys=["id", "p"],
                                    options={"bucket": "2"})
catalog.create_table("db.t", schema, False)
table = catalog.get_table("db.t")
wb = table.new_batch_write_builder()
w = wb.new_write()
ids = pa.array(range(20), pa.int32())
parts = pa.array([i % 2 for i in range(20)], pa.int32())
w.write_arrow(pa.table({"id": ids, "p": parts, "name": [f"n{i}" for i in range(20)]}, schema=pa_schema))
msgs = w.prepare_commit()
partition_fields = table.table_schema.get_partition_key_fields() if hasattr(table.table_schema,
    "get_partition_key_fields") else [f for f in table.table_schema.fields if f.name in ("p",)]
out = []
for m in msgs:
    out.append({
        "bytes": serialize_commit_message(m, partition_fields).hex(),
        "partition": list(m.partition), "bucket": m.bucket,
        "files": [[f.file_name, f.file_size, f.row_count, f.min_sequence_number, f.max_sequence_number]
                  for f in m.new_files],
    })
print(json.dumps({"table": table.table_path if hasattr(table, "table_path") else "", "messages": out}))
"""

PYPAIMON_READS = r"""
import json, sys
from pypaimon.schema.data_types import AtomicType, DataField
from pypaimon.write.commit_message_serializer import deserialize_commit_message

payload = json.loads(open(sys.argv[1]).read())
partition_fields = [DataField(1, "p", AtomicType("INT", nullable=False))]
key_fields = [DataField(0, "id", AtomicType("INT", nullable=False))]
out = []
for hexed in payload:
    m = deserialize_commit_message(bytes.fromhex(hexed), partition_fields, key_fields)
    out.append({"partition": list(m.partition), "bucket": m.bucket, "total_buckets": m.total_buckets,
                "files": [[f.file_name, f.file_size, f.row_count] for f in m.new_files]})
print(json.dumps(out))
"""


def test_pypaimon_commit_messages_decode_to_its_files(tmp_path: Path) -> None:
    result: dict[str, Any] = run_pypaimon(PYPAIMON_WRITES, str(tmp_path))
    assert result["messages"], "pypaimon produced no commit messages"
    table_dir = tmp_path / "db.db" / "t"
    for m in result["messages"]:
        msg = deserialize_commit_message(bytes.fromhex(m["bytes"]), 14, path="pypaimon")
        assert deserialize_row(msg.partition, [INT(False)]) == tuple(m["partition"])
        assert msg.bucket == m["bucket"]
        files = msg.data_increment.new_files
        got = [
            [f.file_name, f.file_size, f.row_count, f.min_sequence_number, f.max_sequence_number]
            for f in files
        ]
        assert got == m["files"]
        for name, size in ((f.file_name, f.file_size) for f in files):
            path = table_dir / f"p={m['partition'][0]}" / f"bucket-{m['bucket']}" / name
            assert path.is_file() and os.path.getsize(path) == size
        # and our encoder reproduces pypaimon's bytes exactly
        assert serialize_commit_message(msg, 14).hex() == m["bytes"]


def test_our_commit_messages_decode_in_pypaimon(tmp_path: Path) -> None:
    table = make_table(
        tmp_path,
        [("id", INT(False)), ("p", INT(False)), ("name", INT())],
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options={"bucket": "2"},
    )
    data = pa.table(
        {
            "id": pa.array(range(30), pa.int32()),
            "p": pa.array([i % 3 for i in range(30)], pa.int32()),
            "name": pa.array(range(30), pa.int32()),
        }
    )
    messages = write_all(table, data)
    assert CURRENT_VERSION == 14
    payload = tmp_path / "messages.json"
    payload.write_text(json.dumps([serialize_commit_message(m).hex() for m in messages]))
    decoded: list[dict[str, Any]] = run_pypaimon(PYPAIMON_READS, str(payload))
    expected = [
        {
            "partition": list(deserialize_row(m.partition, [INT(False)])),
            "bucket": m.bucket,
            "total_buckets": m.total_buckets,
            "files": [[f.file_name, f.file_size, f.row_count] for f in m.data_increment.new_files],
        }
        for m in messages
    ]
    assert decoded == expected
