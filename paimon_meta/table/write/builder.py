"""pypaimon-shaped write entry points: ``table.new_batch_write_builder()`` / ``new_stream_write_builder()``.

The table layer does not know how commits are guarded; the object that opened the table (a catalog, or
``paimon_meta.open_table``) injects a :data:`~paimon_meta.table.table.CommitterFactory`, and
``new_commit()`` calls it. There is one commit path behind every factory:
``paimon_meta.commit.coordinator.CommitCoordinator``. The builders take a :class:`CommittableTable`
(``FileStoreTable`` is one): this module does not import the table's, which imports it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER
from paimon_meta.table.file_guard import path_guard
from paimon_meta.table.option_policy import check_main_branch
from paimon_meta.table.paths import TablePaths
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.write.overwrite import OverwriteSpec
from paimon_meta.table.write.table_write import TableWrite, WritableTable


class CommitOutcome(Protocol):
    @property
    def snapshot_ids(self) -> tuple[int, ...]: ...

    @property
    def deduplicated(self) -> bool: ...


class Committer(Protocol):
    """What ``new_commit()`` needs from the commit layer."""

    def commit(
        self,
        messages: Sequence[CommitMessage],
        identifier: int = ...,
        *,
        overwrite: Mapping[str, Any] | OverwriteSpec | None = None,
        properties: Mapping[str, str] | None = None,
        watermark: int | None = None,
    ) -> CommitOutcome: ...

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]: ...


class CommittableTable(WritableTable, Protocol):
    """What the write builders need of a table (``FileStoreTable`` provides it): what a write needs,
    and where its files are, to abort them. Its ``committer_factory``, set by whoever opened it for
    writing, is looked up when a commit is made."""

    @property
    def branch_root(self) -> str: ...

    @property
    def schema_manager(self) -> SchemaManager: ...

    @property
    def paths(self) -> TablePaths: ...


def _committer(table: CommittableTable, commit_user: str) -> Committer:
    # before any committer exists: a committer of the table (remote ones too) would publish to main
    check_main_branch(table.schema.options)
    # the factory takes the table that holds it (paimon_meta.table.table.CommitterFactory)
    factory: Callable[[Any, str], Committer] | None = getattr(table, "committer_factory", None)
    if factory is None:
        raise ValidationError(
            f"table {table.path} was opened read-only; open it with paimon_meta.open_table(...) or a "
            "catalog from paimon_meta.connect(...) to commit"
        )
    return factory(table, commit_user)


def _abort_files(table: CommittableTable, messages: Sequence[CommitMessage]) -> None:
    """Delete the data files of messages that will never be committed (definitely failed). A file a
    message names outside the table (a message is whatever its sender made it) is refused and logged,
    never deleted (table.file_guard)."""
    partition_types = [f.type for f in table.schema.partition_type.fields]
    guard = path_guard(table)
    refused: list[str] = []
    for m in messages:
        values = deserialize_row(m.partition, partition_types)
        bucket_dir = table.paths.bucket_path(values, m.bucket)
        # A compaction may "upgrade" a file (move it up a level without rewriting it): the same name then
        # appears in compact_before (live) and compact_after. Deleting it would delete live data.
        live = {f.file_name for f in m.compact_increment.compact_before}
        for f in (
            *m.data_increment.new_files,
            *m.data_increment.changelog_files,
            *m.compact_increment.compact_after,
        ):
            if f.file_name not in live:
                path = guard.deletable(bucket_dir, f.file_name, f.external_path, refused, what="abort")
                if path is not None:
                    table.file_io.delete(path)


class BatchTableCommit:
    """Commits the messages of one batch job, once (identifier = Long.MAX_VALUE, fresh commit user)."""

    def __init__(
        self,
        table: CommittableTable,
        committer: Committer,
        overwrite: Mapping[str, Any] | OverwriteSpec | None,
    ) -> None:
        self.table = table
        self._committer = committer
        self._overwrite = overwrite
        self._committed = False

    def commit(self, messages: Sequence[CommitMessage]) -> CommitOutcome:
        if self._committed:
            raise ValidationError("a batch commit can only be committed once; use a new write builder")
        result = self._committer.commit(messages, BATCH_COMMIT_IDENTIFIER, overwrite=self._overwrite)
        self._committed = True
        return result

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the data files of uncommitted messages."""
        _abort_files(self.table, messages)

    def close(self) -> None:
        return None

    def __enter__(self) -> BatchTableCommit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StreamTableCommit:
    """Commits one identifier (checkpoint / batch id) at a time, exactly once per (user, identifier)."""

    def __init__(self, table: CommittableTable, committer: Committer) -> None:
        self.table = table
        self._committer = committer

    def commit(
        self,
        messages: Sequence[CommitMessage],
        commit_identifier: int,
        *,
        watermark: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> CommitOutcome:
        return self._committer.commit(messages, commit_identifier, watermark=watermark, properties=properties)

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]:
        """The identifiers this commit user has not committed yet (restart recovery)."""
        return self._committer.filter_committed(identifiers)

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        _abort_files(self.table, messages)

    def close(self) -> None:
        return None


class BatchWriteBuilder:
    """``new_write()`` and ``new_commit()`` sharing one fresh commit user, like pypaimon's builder."""

    def __init__(self, table: CommittableTable) -> None:
        self.table = table
        self.commit_user = str(uuid.uuid4())
        self.static_partition: Mapping[str, Any] | OverwriteSpec | None = None

    def overwrite(
        self, static_partition: Mapping[str, Any] | OverwriteSpec | None = None
    ) -> BatchWriteBuilder:
        """Make the commit an OVERWRITE of ``static_partition`` (empty or None: the whole table).

        As Java and pypaimon, a partitioned table with ``dynamic-partition-overwrite`` on (the
        default) replaces only the partitions the new rows are in, and nothing if there are none;
        pass :meth:`OverwriteSpec.static` to replace everything the spec names regardless of the
        option (:mod:`paimon_meta.table.write.overwrite`)."""
        if isinstance(static_partition, OverwriteSpec):
            self.static_partition = static_partition
        else:
            self.static_partition = dict(static_partition or {})
        return self

    def new_write(self) -> TableWrite:
        return TableWrite(self.table, commit_user=self.commit_user)

    def new_commit(self) -> BatchTableCommit:
        return BatchTableCommit(self.table, _committer(self.table, self.commit_user), self.static_partition)


class StreamWriteBuilder:
    """For jobs that commit repeatedly (Spark micro-batches): a stable commit user makes re-runs of an
    identifier idempotent."""

    def __init__(self, table: CommittableTable) -> None:
        self.table = table
        self.commit_user = str(uuid.uuid4())

    def with_commit_user(self, commit_user: str) -> StreamWriteBuilder:
        if not commit_user:
            raise ValidationError("commit user must be a non-empty string")
        self.commit_user = commit_user
        return self

    def new_write(self) -> TableWrite:
        return TableWrite(self.table, commit_user=self.commit_user)

    def new_commit(self) -> StreamTableCommit:
        return StreamTableCommit(self.table, _committer(self.table, self.commit_user))
