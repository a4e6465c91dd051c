"""Synthetic table metadata for scan tests: schema, manifests, manifest lists and snapshots written
with the real codecs (no data files unless a test writes them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from paimon_meta.io.base import FileIO, FileStatus
from paimon_meta.io.local import LocalFileIO
from paimon_meta.model.binary_row import serialize_row
from paimon_meta.model.manifest import (
    EMPTY_STATS,
    DataFileMeta,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.model.types import DataType
from paimon_meta.serde.avro import encode_manifest, encode_manifest_list
from paimon_meta.serde.json import schema_to_json, snapshot_to_json
from paimon_meta.table.paths import TablePaths


def data_file(
    name: str, *, rows: int = 1, level: int = 0, schema_id: int = 0, seq: tuple[int, int] = (0, 0)
) -> DataFileMeta:
    return DataFileMeta(
        file_name=name,
        file_size=100,
        row_count=rows,
        min_key=serialize_row([], []),
        max_key=serialize_row([], []),
        key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS,
        min_sequence_number=seq[0],
        max_sequence_number=seq[1],
        schema_id=schema_id,
        level=level,
        delete_row_count=0,
    )


def entry(
    kind: FileKind,
    partition: Sequence[Any],
    types: Sequence[DataType],
    bucket: int,
    file: DataFileMeta,
    *,
    total_buckets: int = 2,
) -> ManifestEntry:
    return ManifestEntry(kind, serialize_row(list(partition), list(types)), bucket, total_buckets, file)


def partition_stats(values: Sequence[Sequence[Any]], types: Sequence[DataType]) -> SimpleStats:
    """Min/max/null-count stats over partition tuples (as Java's ``SimpleStatsCollector``)."""
    mins, maxs, nulls = [], [], []
    for i in range(len(types)):
        present = [v[i] for v in values if v[i] is not None]
        mins.append(min(present) if present else None)
        maxs.append(max(present) if present else None)
        nulls.append(sum(1 for v in values if v[i] is None))
    return SimpleStats(serialize_row(mins, list(types)), serialize_row(maxs, list(types)), tuple(nulls))


class SyntheticTable:
    """Writes metadata for a table at ``root`` through ``file_io``."""

    def __init__(self, file_io: FileIO, root: str, schema: TableSchema) -> None:
        self.file_io = file_io
        self.root = root
        self.schema = schema
        self.paths = TablePaths(root, schema.partition_type.fields)
        self.types = [f.type for f in schema.partition_type.fields]
        self.base: list[ManifestFileMeta] = []
        self.next_id = 1
        file_io.write(self.paths.schema_path(schema.id), schema_to_json(schema).encode())

    def manifest(
        self, entries: Sequence[ManifestEntry], partitions: Sequence[Sequence[Any]]
    ) -> ManifestFileMeta:
        name = self.paths.new_manifest_name()
        data = encode_manifest(entries)
        self.file_io.write(self.paths.manifest_path(name), data)
        buckets = [e.bucket for e in entries]
        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added_files=sum(1 for e in entries if e.kind is FileKind.ADD),
            num_deleted_files=sum(1 for e in entries if e.kind is FileKind.DELETE),
            partition_stats=partition_stats(partitions, self.types),
            schema_id=self.schema.id,
            min_bucket=min(buckets) if buckets else None,
            max_bucket=max(buckets) if buckets else None,
        )

    def manifest_list(self, metas: Sequence[ManifestFileMeta]) -> str:
        name = self.paths.new_manifest_list_name()
        self.file_io.write(self.paths.manifest_path(name), encode_manifest_list(metas))
        return name

    def commit(self, delta: Sequence[ManifestFileMeta]) -> Snapshot:
        """A snapshot whose base is every earlier delta and whose delta is ``delta``."""
        snapshot = Snapshot(
            id=self.next_id,
            schema_id=self.schema.id,
            base_manifest_list=self.manifest_list(self.base),
            delta_manifest_list=self.manifest_list(delta),
            commit_user="test",
            commit_identifier=self.next_id,
            commit_kind=CommitKind.APPEND,
            time_millis=1_700_000_000_000 + self.next_id,
        )
        self.file_io.write(self.paths.snapshot_path(snapshot.id), snapshot_to_json(snapshot).encode())
        self.file_io.write(self.paths.latest_hint_path, str(snapshot.id).encode())
        self.base.extend(delta)
        self.next_id += 1
        return snapshot


class CountingFileIO(LocalFileIO):
    """Counts directory listings and reads (to prove when hints are trusted and caches hit)."""

    def __init__(self) -> None:
        super().__init__()
        self.lists = 0
        self.reads: list[str] = []

    def list(self, directory: str) -> list[FileStatus]:
        self.lists += 1
        return super().list(directory)

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read(path)
