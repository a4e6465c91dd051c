"""Streaming reads: ``spark.readStream.format("paimon_meta").load("db.t")``, an append table's new rows.

Offsets are snapshot ids, ``{"snapshot": N}``: everything up to snapshot N has been read. A
micro-batch from offset S to E reads the *delta* of snapshots S+1..E -- the data files each one added
-- with one Spark partition per (snapshot, partition, bucket), as Java Paimon's streaming read of an
append table (``DeltaFollowUpScanner``):

* APPEND snapshots: their added files, so each committed row is read once;
* COMPACT (and ANALYZE) snapshots add no rows: skipped;
* OVERWRITE snapshots: skipped unless the table (or the read) sets ``streaming-read-overwrite=true``
  (Java's option, default false); then their added files are read. Rows an overwrite removed are
  never retracted (an append stream has no retraction).

Where it starts (the first run of a query; a restart resumes from Spark's checkpoint):

* default: the latest snapshot when the query starts -- only what is committed later is read (Java's
  ``scan.mode=latest``; Java's default ``latest-full`` also emits the table's current rows first,
  which this source does not);
* ``scan.snapshot-id=N`` (an option of the read, else of the table): from snapshot N *inclusive*
  (Java's ``from-snapshot`` in streaming mode: the changes of N, N+1, ..., not the full state at N).

Spark persists a start only with the first micro-batch: a query stopped before it read anything
starts again from the then-latest snapshot (pass ``scan.snapshot-id`` to pin it).

A snapshot between two offsets that no longer exists (expired, or never existed) cannot be read:
:class:`SnapshotsExpiredError` names them; keep snapshots longer than a stream may lag
(``snapshot.time-retained``) or restart the query from a new checkpoint. A ``query-auth.enabled`` table read
through a commit service: each micro-batch asks ``POST .../auth`` once, its splits carry the answer and
the executors apply it (as batch reads do). Primary-key tables are
refused (:class:`~paimon_meta.errors.UnsupportedError`): their deltas are changelog rows (updates and
deletes) that an append-only Spark stream cannot carry correctly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from paimon_meta.errors import SnapshotNotFoundError, UnsupportedError, ValidationError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.table.read.scan import Split
from paimon_meta.table.table import FileStoreTable
from spark_jobs.cli_args import OpenedTable
from spark_jobs.common import TableHandle, cast_batch
from spark_jobs.datasource.target import (
    LATEST,
    SCAN_SNAPSHOT_ID,
    SourceOptions,
    current_handle,
    open_target,
    read_builder,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

OFFSET_KEY = "snapshot"
STREAMING_READ_OVERWRITE = "streaming-read-overwrite"


class SnapshotsExpiredError(SnapshotNotFoundError):
    """Snapshots a stream must read (between its last offset and the next) no longer exist."""


class DeltaPartition(InputPartition):
    """The files one snapshot added to one (partition, bucket), and what an executor needs to read
    them (picklable, no catalog)."""

    def __init__(self, handle: TableHandle, columns: Sequence[str], split: Split) -> None:
        super().__init__(split.snapshot_id)
        self.handle = handle
        self.columns = tuple(columns)
        self.split = split


def offset(snapshot_id: int) -> dict[str, int]:
    return {OFFSET_KEY: snapshot_id}


def snapshot_of(offset_: dict[str, Any]) -> int:
    """The snapshot id of an offset (``ValidationError`` for a checkpoint of another source)."""
    value = offset_.get(OFFSET_KEY)
    if not isinstance(value, int):
        raise ValidationError(f"not an offset of the paimon_meta source: {offset_!r}", offset=offset_)
    return value


def check_streamable(table: FileStoreTable, name: str) -> None:
    """Refuse tables this source cannot stream (see the module docstring)."""
    if table.is_primary_key_table:
        raise UnsupportedError(
            f"streaming reads of primary-key table {name} are not supported: its snapshots' deltas are "
            "changelog rows (updates and deletes) an append-only Spark stream cannot carry; read it in "
            "batches (spark.read with snapshot-id) instead",
            table=name,
        )


def delta_splits(table: FileStoreTable, snapshot: Snapshot) -> list[Split]:
    """The files ``snapshot`` added, one split per (partition, bucket) (append table)."""
    reader = table.manifest_reader
    metas = reader.manifest_list(snapshot.delta_manifest_list)
    groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for entries in reader.manifests(metas):
        for e in entries:
            if e.kind is FileKind.ADD:
                groups.setdefault((e.partition, e.bucket), []).append(e)
    types = [f.type for f in table.schema_of(snapshot).partition_type.fields]
    splits = []
    for (partition, bucket), added in sorted(groups.items(), key=lambda kv: kv[0]):
        values = deserialize_row(partition, types)
        splits.append(
            Split(
                snapshot_id=snapshot.id,
                partition=partition,
                partition_values=values,
                bucket=bucket,
                total_buckets=added[0].total_buckets,
                files=tuple(e.file for e in added),
                bucket_path=table.paths.bucket_path(values, bucket),
                raw_convertible=True,
            )
        )
    return splits


def adds_rows(snapshot: Snapshot, read_overwrite: bool) -> bool:
    """Whether a stream reads ``snapshot``'s delta (Java's ``DeltaFollowUpScanner.shouldScanSnapshot``)."""
    if snapshot.commit_kind is CommitKind.APPEND:
        return True
    return snapshot.commit_kind is CommitKind.OVERWRITE and read_overwrite


class PaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring. Lives in one Python worker for the whole query (Spark keeps it)."""

    def __init__(self, options: SourceOptions, read_schema: StructType) -> None:
        self.options = options
        self.read_schema = read_schema
        self.target: int | None = None  # Trigger.AvailableNow: the latest snapshot when it started
        self._opened: OpenedTable | None = None
        with self._table() as table:
            check_streamable(table, options.table)
        self.stop()  # Spark also builds readers just to plan the executors' reads: keep nothing open

    @contextlib.contextmanager
    def _table(self) -> Iterator[FileStoreTable]:
        """The table, opened once and kept by this reader: Spark asks for ``latestOffset`` every few
        milliseconds while a query is idle, too often to open a catalog each time. Closed by
        :meth:`stop`, and after any error (the next call opens it again)."""
        if self._opened is None:
            self._opened = open_target(self.options)
        try:
            yield self._opened.table
        except BaseException:
            self.stop()
            raise

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader into the executors' read function: without the open catalog.
        state = dict(self.__dict__)
        state["_opened"] = None
        return state

    def stop(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            opened.close()

    def _latest(self, table: FileStoreTable) -> int:
        return table.snapshot_manager.latest_snapshot_id() or 0

    def initialOffset(self) -> dict[str, int]:
        with self._table() as table:
            start = self.options.scan_snapshot_id
            if start is None and table.options.get(SCAN_SNAPSHOT_ID):
                start = int(str(table.options.get(SCAN_SNAPSHOT_ID)))
            if start is not None:
                if start < 1:
                    raise ValidationError(
                        f"{SCAN_SNAPSHOT_ID} must be >= 1, got {start}", option=SCAN_SNAPSHOT_ID
                    )
                return offset(start - 1)  # snapshot ``start`` is the first one read
            return offset(self._latest(table))

    def prepareForTriggerAvailableNow(self) -> None:
        with self._table() as table:
            self.target = self._latest(table)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        with self._table() as table:
            latest = self._latest(table)
        if self.target is not None:
            latest = min(latest, self.target)
        return offset(max(latest, snapshot_of(start)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = snapshot_of(start) + 1, snapshot_of(end)
        if first > last:
            return []
        with self._table() as table:
            assert self._opened is not None
            snapshots = table.snapshot_manager
            missing = [i for i in range(first, last + 1) if not snapshots.snapshot_exists(i)]
            if missing:
                raise SnapshotsExpiredError(
                    f"the stream of {self.options.table} must read snapshots {first}..{last}, but "
                    f"{_ranges(missing)} no longer exist (expired; the earliest is "
                    f"{snapshots.earliest_snapshot_id()}): keep snapshots longer than the stream lags "
                    "(snapshot.time-retained) or start the query again from a new checkpoint",
                    snapshot_ids=missing,
                    earliest=snapshots.earliest_snapshot_id(),
                )
            read_overwrite = _read_overwrite(table, self.options)
            handle = TableHandle.of(table, self._opened.io_options)
            columns = list(self.read_schema.fieldNames())
            splits: list[Split] = []
            for i in range(first, last + 1):
                snapshot = snapshots.snapshot(i)
                if adds_rows(snapshot, read_overwrite):
                    splits += delta_splits(table, snapshot)
            # a query-auth.enabled table through the service: the micro-batch's splits carry the
            # catalog's row filters and column masks, asked once for them, applied by the executors
            splits = read_builder(table, LATEST, columns).authorize(splits)
            return [DeltaPartition(handle, columns, s) for s in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema as spark_to_arrow

        if not isinstance(partition, DeltaPartition):
            return
        table = current_handle(partition.handle, self.options).open()  # fresh credentials if stale
        read = read_builder(table, LATEST, partition.columns).new_read()
        target = spark_to_arrow(self.read_schema, timezone="UTC")
        for batch in read.to_arrow_batches([partition.split]):
            yield cast_batch(batch, target)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: snapshots are kept by the table's retention, not by readers."""


def _read_overwrite(table: FileStoreTable, opts: SourceOptions) -> bool:
    value = (
        opts.storage.get(STREAMING_READ_OVERWRITE) or table.options.get(STREAMING_READ_OVERWRITE) or "false"
    )
    return str(value).strip().lower() == "true"


def _ranges(ids: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1..3, 7"``."""
    parts: list[str] = []
    begin = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(begin) if begin == prev else f"{begin}..{prev}")
        if i is not None:
            begin = prev = i
    return ", ".join(parts)
