"""Manifest records: DataFileMeta, ManifestEntry, ManifestFileMeta, index file metadata.

Field order and meaning follow ``DataFileMeta.SCHEMA``, ``ManifestEntry``, ``ManifestFileMeta.SCHEMA``,
``IndexFileMeta.SCHEMA`` and ``IndexManifestEntry.SCHEMA`` in apache/paimon. Binary rows (partitions, keys,
stats) are kept as their *serialized* bytes (4-byte big-endian arity + row bytes): Java compares BinaryRows
by bytes, so bytes are the identity, and decoding needs the row type, which only the table knows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from paimon_meta.model.binary_row import EMPTY_ROW_BYTES

MANIFEST_ENTRY_VERSION = 2
MANIFEST_FILE_META_VERSION = 2


class FileKind(enum.IntEnum):
    ADD = 0
    DELETE = 1


class FileSource(enum.IntEnum):
    APPEND = 0
    COMPACT = 1


@dataclass(frozen=True, slots=True)
class SimpleStats:
    """Min/max as serialized BinaryRows and per-column null counts (None = unknown)."""

    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...] | None

    @staticmethod
    def empty() -> SimpleStats:
        return SimpleStats(EMPTY_ROW_BYTES, EMPTY_ROW_BYTES, ())


EMPTY_STATS = SimpleStats(EMPTY_ROW_BYTES, EMPTY_ROW_BYTES, ())


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """One data file, all 21 fields of Java's ``DataFileMeta.SCHEMA`` in order."""

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time: int | None = None  # TIMESTAMP(3) without time zone, as epoch millis of the local time
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: FileSource | None = None
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None

    @property
    def added_row_count(self) -> int:
        return self.row_count - (self.delete_row_count or 0)


@dataclass(frozen=True, slots=True)
class FileIdentifier:
    """The identity Java's ``FileEntry.Identifier`` uses to merge ADD and DELETE entries."""

    partition: bytes
    bucket: int
    level: int
    file_name: str
    extra_files: tuple[str, ...]
    embedded_index: bytes | None
    external_path: str | None


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One ADD or DELETE of a data file in a (partition, bucket)."""

    kind: FileKind
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta
    version: int = MANIFEST_ENTRY_VERSION

    @property
    def identifier(self) -> FileIdentifier:
        f = self.file
        return FileIdentifier(
            self.partition,
            self.bucket,
            f.level,
            f.file_name,
            f.extra_files,
            f.embedded_index,
            f.external_path,
        )


@dataclass(frozen=True, slots=True)
class ManifestFileMeta:
    """One manifest file as listed in a manifest list."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    version: int = MANIFEST_FILE_META_VERSION


@dataclass(frozen=True, slots=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector lives inside a deletion-vector index file."""

    data_file_name: str
    offset: int
    length: int
    cardinality: int | None = None


@dataclass(frozen=True, slots=True)
class GlobalIndexMeta:
    row_range_start: int
    row_range_end: int
    index_field_id: int
    extra_field_ids: tuple[int, ...] | None = None
    index_meta: bytes | None = None
    source_meta: bytes | None = None


@dataclass(frozen=True, slots=True)
class IndexFileMeta:
    """An index file (deletion vectors, hash index, global index): carried through commits intact."""

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorMeta, ...] | None = None
    external_path: str | None = None
    global_index: GlobalIndexMeta | None = None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    kind: FileKind
    partition: bytes
    bucket: int
    index_file: IndexFileMeta
