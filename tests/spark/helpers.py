"""Tables for the Spark tests, created on storage directly (local or S3) without a metastore.

A table is a ``schema/schema-0`` file under ``<warehouse>/<db>.db/<name>`` -- the layout pypaimon's
filesystem catalog reads -- opened with ``paimon_meta.open_table`` (storage-guarded commits).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable

#: (id BIGINT NOT NULL, p STRING NOT NULL, v DOUBLE): the table most Spark tests write.
SCHEMA = pa.schema([("id", pa.int64(), False), ("p", pa.string(), False), ("v", pa.float64())])
#: The same with a STRING ``v`` (the compaction tests).
STRING_SCHEMA = pa.schema([("id", pa.int64(), False), ("p", pa.string(), False), ("v", pa.string())])


def create_table(
    warehouse: str,
    identifier: str,
    schema: pa.Schema,
    *,
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    io_options: Mapping[str, str] | None = None,
) -> FileStoreTable:
    """Create ``db.name`` under ``warehouse`` and open it for writing."""
    database, name = identifier.split(".")
    path = f"{warehouse.rstrip('/')}/{database}.db/{name}"
    fields, highest = from_arrow_schema(schema)
    table_schema = TableSchema(
        0,
        fields,
        highest,
        partition_keys=tuple(partition_keys),
        primary_keys=tuple(primary_keys),
        options=dict(options or {}),
    )
    created = SchemaManager(get_file_io(path, io_options), path).commit_new_schema(table_schema)
    assert created, f"table {path} already exists"
    return open_table(path, io_options)


def append_table(
    warehouse: str,
    identifier: str = "db.t",
    schema: pa.Schema = SCHEMA,
    *,
    buckets: int = 3,
    io_options: Mapping[str, str] | None = None,
) -> FileStoreTable:
    """An append table partitioned by ``p``, bucketed on ``id``."""
    return create_table(
        warehouse,
        identifier,
        schema,
        partition_keys=["p"],
        options={"bucket": str(buckets), "bucket-key": "id"},
        io_options=io_options,
    )


def pk_table(warehouse: str, schema: pa.Schema = SCHEMA, **options: str) -> FileStoreTable:
    """``db.pk``: primary key (``id``, ``p``), partitioned by ``p``, 2 buckets, plus ``options``."""
    return create_table(
        warehouse,
        "db.pk",
        schema,
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options={"bucket": "2", **options},
    )


def read_rows(table: FileStoreTable, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    """Every row of the table (at a snapshot), sorted canonically."""
    builder = table.new_read_builder()
    if snapshot_id is not None:
        builder = builder.with_snapshot(snapshot_id)
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sort_rows(rows)


def sort_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return sorted((dict(r) for r in rows), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def live_files(table: FileStoreTable, snapshot_id: int | None = None) -> list[Any]:
    """The DataFileMetas of the latest snapshot (or of ``snapshot_id``)."""
    builder = table.new_read_builder()
    if snapshot_id is not None:
        builder = builder.with_snapshot(snapshot_id)
    return [f for s in builder.new_scan().plan().splits() for f in s.files]


def source_files(directory: Path, files: int, rows_per_file: int) -> list[dict[str, Any]]:
    """``files`` Parquet files of :data:`SCHEMA` rows in a new ``directory`` (a file source's input,
    one file per micro-batch with ``maxFilesPerTrigger=1``); returns every row, sorted."""
    directory.mkdir()
    rows: list[dict[str, Any]] = []
    for f in range(files):
        batch = [{"id": f * 1000 + i, "p": f"p{i % 2}", "v": float(i)} for i in range(rows_per_file)]
        write_source_file(directory / f"part-{f:03d}.parquet", pa.Table.from_pylist(batch, schema=SCHEMA))
        rows += batch
    return sort_rows(rows)


def write_source_file(path: Path, rows: pa.Table) -> None:
    """Write ``rows`` as a Parquet file of a file source's input directory, modified a second after
    every file already there. Spark's file source takes files in modification-time order only (ties
    in listing order, which differs between machines), so files written within one millisecond could
    otherwise be read in either order: a stream whose batches must apply in order would then depend on
    the machine."""
    pq.write_table(rows, path)
    before = [p.stat().st_mtime_ns for p in path.parent.iterdir() if p != path]
    ns = max([path.stat().st_mtime_ns, *(t + 1_000_000_000 for t in before)])
    os.utime(path, ns=(ns, ns))


def wait_hanging(proc: subprocess.Popen[bytes], log: Path, timeout: float = 300.0) -> None:
    """Until a stream driver hangs right after a commit (``HANG_MARKER`` in its ``log``); fails the test
    if it exits first or does not hang within ``timeout`` seconds."""
    from spark_jobs.streaming_write import HANG_MARKER

    deadline = time.monotonic() + timeout
    while HANG_MARKER not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            pytest.fail(f"stream driver exited {proc.returncode} before hanging:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"stream driver did not hang in {timeout}s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
