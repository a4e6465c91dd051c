"""Hand-built tables and CommitMessages for commit-path tests (no data files needed: the commit path never
reads data files)."""

from __future__ import annotations

import uuid
from pathlib import Path

from paimon_meta.io import get_file_io
from paimon_meta.io.base import FileIO
from paimon_meta.model.binary_row import serialize_row
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement, DataIncrement
from paimon_meta.model.manifest import EMPTY_STATS, DataFileMeta, FileSource
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import INT, STRING, DataField
from paimon_meta.serde.json import schema_to_json


def make_table(
    root: Path | str, *, primary_key: bool = False, buckets: int = 2, options: dict[str, str] | None = None
) -> tuple[FileIO, str, TableSchema]:
    path = str(root).rstrip("/") + "/db.db/t"
    file_io = get_file_io(path)
    fields = (DataField(0, "k", INT(False)), DataField(1, "p", INT(False)), DataField(2, "v", STRING()))
    schema = TableSchema(
        id=0,
        fields=fields,
        highest_field_id=2,
        partition_keys=("p",),
        primary_keys=("k", "p") if primary_key else (),
        options={"bucket": str(buckets), **(options or {})},
    )
    file_io.create_if_absent(file_io.join(path, "schema", "schema-0"), schema_to_json(schema).encode())
    return file_io, path, schema


def partition(p: int) -> bytes:
    return serialize_row([p], [INT(False)])


def key(k: int) -> bytes:
    return serialize_row([k], [INT(False)])


def data_file(
    rows: int = 10, *, level: int = 0, min_key: int = 0, max_key: int = 0, name: str | None = None
) -> DataFileMeta:
    return DataFileMeta(
        file_name=name or f"data-{uuid.uuid4()}-0.parquet",
        file_size=1000 + rows,
        row_count=rows,
        min_key=key(min_key),
        max_key=key(max_key),
        key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS,
        min_sequence_number=0,
        max_sequence_number=rows - 1,
        schema_id=0,
        level=level,
        creation_time=1_700_000_000_000,
        delete_row_count=0,
        file_source=FileSource.APPEND if level == 0 else FileSource.COMPACT,
    )


def append_msg(p: int = 0, bucket: int = 0, *files: DataFileMeta, total_buckets: int = 2) -> CommitMessage:
    return CommitMessage(
        partition(p), bucket, total_buckets, DataIncrement(new_files=tuple(files or (data_file(),)))
    )


def compact_msg(
    p: int, bucket: int, before: list[DataFileMeta], after: list[DataFileMeta], total_buckets: int = 2
) -> CommitMessage:
    return CommitMessage(
        partition(p),
        bucket,
        total_buckets,
        compact_increment=CompactIncrement(compact_before=tuple(before), compact_after=tuple(after)),
    )
