"""CommitMessage: what a writer hands the committer for one (partition, bucket).

Mirrors ``org.apache.paimon.table.sink.CommitMessageImpl`` with its ``DataIncrement`` and
``CompactIncrement``. The binary codec is ``paimon_meta.serde.commit_message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paimon_meta.model.manifest import DataFileMeta, IndexFileMeta


@dataclass(frozen=True, slots=True)
class DataIncrement:
    new_files: tuple[DataFileMeta, ...] = ()
    deleted_files: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    new_index_files: tuple[IndexFileMeta, ...] = ()
    deleted_index_files: tuple[IndexFileMeta, ...] = ()

    def is_empty(self) -> bool:
        return not (
            self.new_files
            or self.deleted_files
            or self.changelog_files
            or self.new_index_files
            or self.deleted_index_files
        )


@dataclass(frozen=True, slots=True)
class CompactIncrement:
    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    new_index_files: tuple[IndexFileMeta, ...] = ()
    deleted_index_files: tuple[IndexFileMeta, ...] = ()

    def is_empty(self) -> bool:
        return not (
            self.compact_before
            or self.compact_after
            or self.changelog_files
            or self.new_index_files
            or self.deleted_index_files
        )


@dataclass(frozen=True, slots=True)
class CommitMessage:
    """Files one writer produced for one (partition, bucket). ``partition`` is serialized BinaryRow bytes."""

    partition: bytes
    bucket: int
    total_buckets: int | None
    data_increment: DataIncrement = field(default_factory=DataIncrement)
    compact_increment: CompactIncrement = field(default_factory=CompactIncrement)
    # The snapshot the writer based its files on; the committer checks conflicts from there (pypaimon 2.1's
    # CommitMessage.check_from_snapshot, carried only by CommitMessage bytes version 14). None = not set.
    check_from_snapshot: int | None = None

    def is_empty(self) -> bool:
        return self.data_increment.is_empty() and self.compact_increment.is_empty()
