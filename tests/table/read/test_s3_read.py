"""The same scans and reads on a moto S3 copy of golden tables equal the local ones."""

from __future__ import annotations

import pyarrow as pa
import pytest

from paimon_meta.io import get_file_io
from paimon_meta.table.read.deletion_vectors import DeletionFile
from paimon_meta.table.table import FileStoreTable
from tests.fixtures.golden import golden_table_path

pytestmark = pytest.mark.s3

# one ORC-manifest DV table, one with schema evolution + sequence field, one with a null partition
TABLES = [
    ("orc", "pk_dv_index_with_commit_message_version10"),
    ("parquet", "pk_table_with_mor"),
    ("parquet", "append_with_empty_partition"),
]


def _upload(fmt: str, name: str, uri: str, options: dict[str, str]) -> str:
    src = golden_table_path(fmt, name)
    dst = f"{uri}/{name}.db/{name}"
    fio = get_file_io(dst, options)
    for full in sorted(p for p in src.rglob("*") if p.is_file()):
        fio.write(f"{dst}/{full.relative_to(src).as_posix()}", full.read_bytes())
    return dst


PlannedFiles = list[tuple[bytes, int, tuple[str, ...], tuple[DeletionFile | None, ...] | None]]


def _plan_and_read(table: FileStoreTable, snapshot_id: int | None) -> tuple[PlannedFiles, pa.Table]:
    builder = table.new_read_builder()
    if snapshot_id is not None:
        builder = builder.with_snapshot(snapshot_id)
    splits = builder.new_scan().plan().splits()
    files = [(s.partition, s.bucket, tuple(f.file_name for f in s.files), s.deletion_files) for s in splits]
    return files, builder.new_read().to_arrow(splits)


@pytest.mark.parametrize(("fmt", "name"), TABLES)
def test_s3_scan_equals_local(fmt: str, name: str, s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    s3_table = FileStoreTable.open(_upload(fmt, name, uri, options), options)
    local_table = FileStoreTable.open(str(golden_table_path(fmt, name)))
    assert s3_table.snapshot_manager.latest_snapshot_id() == local_table.snapshot_manager.latest_snapshot_id()
    for sid in [None, *local_table.snapshot_manager.list_snapshot_ids()]:
        s3_files, s3_rows = _plan_and_read(s3_table, sid)
        local_files, local_rows = _plan_and_read(local_table, sid)
        assert [f[:3] for f in s3_files] == [f[:3] for f in local_files]
        # deletion vectors are located under the S3 table
        assert all(d is None or d.path.startswith(uri) for f in s3_files for d in f[3] or ())
        assert s3_rows.schema == local_rows.schema
        assert sorted(s3_rows.to_pylist(), key=repr) == sorted(local_rows.to_pylist(), key=repr)
