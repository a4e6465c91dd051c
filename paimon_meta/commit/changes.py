"""Turn CommitMessages into manifest-entry changes, as Java's ``FileStoreCommitImpl.collectChanges`` does.

One ``commit()`` call can produce two snapshots: an APPEND (or OVERWRITE) snapshot from the data
increments, then a COMPACT snapshot from the compact increments. They are committed in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from paimon_meta.errors import ValidationError
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import (
    DataFileMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
)
from paimon_meta.model.partition_statistics import PartitionDelta


@dataclass(slots=True)
class ChangeSet:
    """The entries of one snapshot to be: table files, changelog files and index files."""

    table_files: list[ManifestEntry] = field(default_factory=list)
    changelog_files: list[ManifestEntry] = field(default_factory=list)
    index_files: list[IndexManifestEntry] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.table_files or self.changelog_files or self.index_files)

    @property
    def has_deletes(self) -> bool:
        return any(e.kind is FileKind.DELETE for e in self.table_files)

    @property
    def record_count_delta(self) -> int:
        """Added rows minus deleted rows (Java ``recordCountAdd - recordCountDelete``)."""
        total = 0
        for e in self.table_files:
            total += e.file.row_count if e.kind is FileKind.ADD else -e.file.row_count
        return total

    @property
    def changed_partitions(self) -> set[bytes]:
        out = {e.partition for e in self.table_files}
        out.update(e.partition for e in self.index_files)
        return out

    def counts(self) -> dict[str, int]:
        return {
            "added_files": sum(1 for e in self.table_files if e.kind is FileKind.ADD),
            "deleted_files": sum(1 for e in self.table_files if e.kind is FileKind.DELETE),
            "changelog_files": len(self.changelog_files),
            "index_files": len(self.index_files),
            "record_delta": self.record_count_delta,
        }


@dataclass(slots=True)
class CollectedChanges:
    append: ChangeSet
    compact: ChangeSet


def _entries(
    kind: FileKind, msg: CommitMessage, total_buckets: int, files: Sequence[DataFileMeta]
) -> list[ManifestEntry]:
    return [ManifestEntry(kind, msg.partition, msg.bucket, total_buckets, f) for f in files]


def _index(kind: FileKind, msg: CommitMessage, files: Sequence[IndexFileMeta]) -> list[IndexManifestEntry]:
    return [IndexManifestEntry(kind, msg.partition, msg.bucket, f) for f in files]


def collect_changes(messages: Sequence[CommitMessage], *, table_buckets: int) -> CollectedChanges:
    """Split messages into the APPEND and COMPACT change sets.

    ``table_buckets`` fills ``total_buckets`` for messages that do not carry it (older serializer
    versions), as Java falls back to the table's bucket option.
    """
    append, compact = ChangeSet(), ChangeSet()
    for msg in messages:
        if msg.bucket < 0 and table_buckets > 0:
            raise ValidationError(
                f"commit message for bucket {msg.bucket} on a table with {table_buckets} buckets",
                bucket=msg.bucket,
            )
        total = msg.total_buckets if msg.total_buckets is not None else table_buckets
        d, c = msg.data_increment, msg.compact_increment
        append.table_files += _entries(FileKind.ADD, msg, total, d.new_files)
        append.table_files += _entries(FileKind.DELETE, msg, total, d.deleted_files)
        append.changelog_files += _entries(FileKind.ADD, msg, total, d.changelog_files)
        append.index_files += _index(FileKind.ADD, msg, d.new_index_files)
        append.index_files += _index(FileKind.DELETE, msg, d.deleted_index_files)
        compact.table_files += _entries(FileKind.DELETE, msg, total, c.compact_before)
        compact.table_files += _entries(FileKind.ADD, msg, total, c.compact_after)
        compact.changelog_files += _entries(FileKind.ADD, msg, total, c.changelog_files)
        compact.index_files += _index(FileKind.ADD, msg, c.new_index_files)
        compact.index_files += _index(FileKind.DELETE, msg, c.deleted_index_files)
    return CollectedChanges(append, compact)


def partition_deltas(
    entries: Sequence[ManifestEntry], spec_of: Callable[[bytes], Mapping[str, str]]
) -> list[PartitionDelta]:
    """Per-partition signed deltas of a snapshot's table files (Java's ``PartitionStatistics`` of a
    commit): an ADD counts its rows, bytes and one file, a DELETE subtracts them. ``spec_of`` turns a
    serialized partition into its ``{key: value-text}`` spec."""
    by_partition: dict[bytes, list[int]] = {}
    buckets: dict[bytes, int] = {}
    for e in entries:
        sign = 1 if e.kind is FileKind.ADD else -1
        acc = by_partition.setdefault(e.partition, [0, 0, 0, 0])
        acc[0] += sign * e.file.row_count
        acc[1] += sign * e.file.file_size
        acc[2] += sign
        acc[3] = max(acc[3], e.file.creation_time or 0)
        buckets[e.partition] = e.total_buckets
    return [
        PartitionDelta(spec_of(raw), rows, size, files, created, buckets[raw])
        for raw, (rows, size, files, created) in by_partition.items()
    ]
