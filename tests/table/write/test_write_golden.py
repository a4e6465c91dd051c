"""Java compatibility of the writer, checked against the golden tables Java Paimon wrote.

* Metadata: the rows of every golden data file are rewritten with our file writer; the resulting
  DataFileMeta (value/key stats BinaryRows, value_stats_cols, min/max key, sequence range, row and
  delete counts) must equal what Java recorded in the manifests.
* Placement: the rows of every golden level-0 file, written through TableWrite into a fresh table
  with the same schema, must land in the file's (partition BinaryRow, bucket, total buckets).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.io import get_file_io
from paimon_meta.model.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry
from paimon_meta.model.schema import TableSchema
from paimon_meta.serde.avro import decode_manifest
from paimon_meta.serde.json import schema_from_json
from paimon_meta.table.file_layout import FileLayout
from paimon_meta.table.manifests import sniff_format
from paimon_meta.table.paths import DataFilePathFactory
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.data_file import RollingDataFileWriter
from paimon_meta.table.write.table_write import TableWrite
from tests.fixtures.golden import GOLDEN_TABLES, golden_table_path
from tests.table.write.test_write import read_file

# Stats rules of the Java versions that wrote some golden tables, expressed as per-field modes:
# before 1.x key fields used the table's mode (truncate(16), not truncate(128)); before
# apache/paimon#8847 Parquet BINARY columns had no min/max.
_JAVA_VERSION_OVERRIDES: dict[str, dict[str, str]] = {
    "pk_09": {"fields._KEY_f0.stats-mode": "truncate(16)", "fields._KEY_f2.stats-mode": "truncate(16)"},
    "append_complex_data": {"fields.f6.stats-mode": "counts"},
}
# Options that do not change where rows go or what files hold, but that TableWrite refuses.
_NOT_PLACEMENT_OPTIONS = ("deletion-vectors.enabled", "sequence.field")


def _golden_entries(root: Path) -> list[tuple[ManifestEntry, Path]]:
    out: dict[str, tuple[ManifestEntry, Path]] = {}
    for manifest in sorted((root / "manifest").glob("manifest-*")):
        if manifest.name.startswith(("manifest-list-", "index-manifest-")):
            continue
        data = manifest.read_bytes()
        for entry in decode_manifest(data, fmt=sniff_format(data, "avro"), path=str(manifest)):
            if entry.kind is not FileKind.ADD:
                continue
            found = list(root.rglob(entry.file.file_name))
            if found:
                out[entry.file.file_name] = (entry, found[0])
    return sorted(out.values(), key=lambda item: item[0].file.file_name)


def _schemas(root: Path) -> dict[int, TableSchema]:
    return {
        int(p.name.split("-")[1]): schema_from_json(p.read_text(), path=str(p))
        for p in (root / "schema").glob("schema-*")
    }


def _rewrite(tmp_path: Path, schema: TableSchema, rows: pa.Table, java: DataFileMeta) -> DataFileMeta:
    layout = FileLayout.for_schema(schema)
    target = layout.arrow_schema()
    data = pa.Table.from_arrays(
        [rows[f.name].cast(target.field(f.name).type) for f in layout.fields], schema=target
    )
    out = tmp_path / "rewrite"
    factory = DataFilePathFactory(str(out), layout.file_format)
    writer = RollingDataFileWriter(get_file_io(str(out)), layout, factory, 1 << 40)
    writer.write(data, first_sequence=java.min_sequence_number)
    writer.flush()
    (meta,) = writer.drain()
    return meta


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES)
def test_file_metadata_matches_java(tmp_path: Path, fmt: str, name: str) -> None:
    root = golden_table_path(fmt, name)
    schemas = _schemas(root)
    overrides = _JAVA_VERSION_OVERRIDES.get(name, {})
    compared = 0
    for entry, path in _golden_entries(root):
        java = entry.file
        base = schemas[java.schema_id]
        schema = dataclasses.replace(base, options={**base.options, **overrides})
        ours = _rewrite(tmp_path, schema, read_file(str(path)), java)
        what: dict[str, Any] = {"file": java.file_name}
        assert ours.row_count == java.row_count, what
        assert ours.value_stats_cols == java.value_stats_cols, what
        assert ours.value_stats == java.value_stats, what
        assert ours.key_stats == java.key_stats, what
        assert (ours.min_key, ours.max_key) == (java.min_key, java.max_key), what
        assert (ours.min_sequence_number, ours.max_sequence_number) == (
            java.min_sequence_number,
            java.max_sequence_number,
        ), what
        assert ours.delete_row_count == java.delete_row_count, what
        if java.file_source is FileSource.APPEND and java.level == 0:
            assert (ours.level, ours.file_source, ours.extra_files) == (0, FileSource.APPEND, ()), what
        compared += 1
    assert compared > 0


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES)
def test_rows_land_in_javas_partition_and_bucket(tmp_path: Path, fmt: str, name: str) -> None:
    root = golden_table_path(fmt, name)
    schemas = _schemas(root)
    tables: dict[int, FileStoreTable] = {}
    compared = 0
    for entry, path in _golden_entries(root):
        if entry.file.level != 0 or entry.file.file_source is not FileSource.APPEND:
            continue
        schema_id = entry.file.schema_id
        if schema_id not in tables:
            base = schemas[schema_id]
            options = {k: v for k, v in base.options.items() if k not in _NOT_PLACEMENT_OPTIONS}
            schema = dataclasses.replace(base, id=0, options=options)
            table_path = str(tmp_path / f"s{schema_id}.db" / name)
            file_io = get_file_io(table_path)
            assert SchemaManager(file_io, table_path).commit_new_schema(schema)
            tables[schema_id] = FileStoreTable(file_io, table_path, schema)
        table = tables[schema_id]
        rows = read_file(str(path))
        kinds = rows["_VALUE_KIND"] if "_VALUE_KIND" in rows.column_names else None
        values = rows.select(table.schema.field_names)
        if kinds is not None:
            values = values.append_column("_row_kind", kinds)
        w = TableWrite(table, commit_user="golden")
        w.write_arrow(values)
        messages = w.prepare_commit()
        w.abort()
        w.close()
        what = {"file": entry.file.file_name}
        assert [(m.partition, m.bucket, m.total_buckets) for m in messages] == [
            (entry.partition, entry.bucket, entry.total_buckets)
        ], what
        assert sum(f.row_count for f in messages[0].data_increment.new_files) == entry.file.row_count, what
        compared += 1
    assert compared > 0
