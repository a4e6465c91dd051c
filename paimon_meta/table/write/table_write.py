"""TableWrite: Arrow batches -> Paimon data files -> CommitMessages (committing is done elsewhere).

Matches Java's ``TableWriteImpl`` over ``AbstractFileStoreWrite``: rows are validated against the
table's latest schema, split by partition (one BinaryRow per distinct partition tuple) and bucket
(``spec.bucket.bucket_array`` over the bucket key), and handed to one writer per (partition, bucket):

* append tables (``AppendOnlyWriter``): rows are written in arrival order and numbered with sequence
  numbers; bucketed tables continue after the largest number in the bucket's live files of the latest
  snapshot, bucket-unaware tables (``bucket = -1``) start at 0 every time and write bucket 0, recording
  ``total_buckets = -1`` (``AppendFileStoreWrite`` ignores previous files);
* primary-key tables (``MergeTreeWriter``): rows are numbered (continuing after the bucket's largest
  live sequence number), buffered, then sorted by key and folded by the table's merge engine (the last
  row of each key wins for ``deduplicate``; :mod:`paimon_meta.table.mergetree.merge_engine`), and written as
  level-0 files of one sorted run. First-row writers then move those rows above level 0 by lookup
  compaction, in the same CommitMessage (:mod:`paimon_meta.table.write.first_row`).

``prepare_commit`` finishes every open file and returns one :class:`CommitMessage` per (partition,
bucket) that got files; nothing is committed. ``abort`` deletes the files not yet handed out. What the
writer accepts (table checks, options, input casts) is :mod:`paimon_meta.table.write.arrow_input`.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.binary_row import serialize_row
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement, DataIncrement
from paimon_meta.model.manifest import DataFileMeta
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.file_guard import writer_guard
from paimon_meta.table.file_layout import SEQUENCE_NUMBER_FIELD, FileLayout
from paimon_meta.table.manifests import ManifestReader
from paimon_meta.table.mergetree.merge_engine import DEDUPLICATE, FIRST_ROW, MergeEngine, merge_key_value_rows
from paimon_meta.table.paths import TablePaths
from paimon_meta.table.read.scan import FileStoreScan
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.write.arrow_input import (
    ROW_KIND_COLUMN,
    UNAWARE_BUCKET,
    RowKind,
    check_writable,
    ignore_delete,
    normalize_input,
    num_levels,
    target_file_size,
    write_buffer_size,
)
from paimon_meta.table.write.bucket import bucket_array
from paimon_meta.table.write.data_file import (
    MAX_CHUNK_BYTES,
    RollingDataFileWriter,
    SizeEstimate,
    arrow_to_internal,
)
from paimon_meta.table.write.first_row import FirstRowLevels

if TYPE_CHECKING:
    import pandas as pd


class WritableTable(Protocol):
    """What a TableWrite needs of a table (``FileStoreTable`` provides it)."""

    @property
    def file_io(self) -> FileIO: ...

    @property
    def path(self) -> str: ...

    @property
    def schema(self) -> TableSchema: ...


# ---- splitting rows by (partition, bucket) --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BucketSlice:
    """The rows of one input that go to one (partition, bucket), in arrival order."""

    partition_values: tuple[Any, ...]
    partition: bytes
    bucket: int
    rows: pa.Table
    kinds: pa.Array | None


def _partition_groups(table: pa.Table, keys: Sequence[str]) -> npt.NDArray[np.int64]:
    """A dense id per distinct partition tuple (nulls included), for every row."""
    groups = np.zeros(table.num_rows, dtype=np.int64)
    for key in keys:
        encoded = pc.dictionary_encode(table.column(key), null_encoding="encode").combine_chunks()
        indices = np.asarray(encoded.indices).astype(np.int64)
        combined = groups * len(encoded.dictionary) + indices
        # Re-densify after every key so the combined ids never overflow.
        groups = np.unique(combined, return_inverse=True)[1].astype(np.int64).reshape(-1)
    return groups


def split_rows(schema: TableSchema, table: pa.Table, kinds: pa.Array | None) -> list[BucketSlice]:
    """Group the rows of a normalized input by (partition, bucket), keeping arrival order."""
    n = table.num_rows
    if n == 0:
        return []
    num_buckets = schema.num_buckets
    if num_buckets == UNAWARE_BUCKET:
        buckets = np.zeros(n, dtype=np.int64)
    else:
        keys = schema.bucket_keys
        types = [schema.field(k).type for k in keys]
        buckets = bucket_array([table.column(k) for k in keys], types, num_buckets).astype(np.int64)
    partition_keys = list(schema.partition_keys)
    group_key = _partition_groups(table, partition_keys) * max(num_buckets, 1) + buckets
    order = np.argsort(group_key, kind="stable")
    sorted_keys = group_key[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_keys)) + 1, [n]))
    if len(starts) == 2:
        rows, kind_rows = table, kinds
    else:
        take = pa.array(order)
        rows, kind_rows = table.take(take), kinds.take(take) if kinds is not None else None
    partition_type = [schema.field(k).type for k in partition_keys]
    out = []
    for lo, hi in itertools.pairwise(starts):
        first = int(order[lo])
        values = tuple(
            arrow_to_internal(table.column(k)[first], t) for k, t in zip(partition_keys, partition_type)
        )
        out.append(
            BucketSlice(
                partition_values=values,
                partition=serialize_row(values, partition_type),
                bucket=int(buckets[first]),
                rows=rows.slice(int(lo), int(hi - lo)),
                kinds=kind_rows.slice(int(lo), int(hi - lo)) if kind_rows is not None else None,
            )
        )
    return out


# ---- per-bucket writers ---------------------------------------------------------------------------


class _BucketWriter(abc.ABC):
    """Common state of one (partition, bucket) writer."""

    def __init__(self, rolling: RollingDataFileWriter, next_sequence: int) -> None:
        self.rolling = rolling
        self.next_sequence = next_sequence
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0

    @abc.abstractmethod
    def write(self, rows: pa.Table, kinds: pa.Array | None) -> None:
        """Take rows (and their row kinds) of this (partition, bucket), in arrival order."""

    @abc.abstractmethod
    def prepare_commit(self) -> list[DataFileMeta]:
        """Finish every file and hand out the ones finished since the last call."""

    def abort(self) -> None:
        self.pending, self.pending_bytes = [], 0
        self.rolling.abort()

    def discard(self, files: Sequence[DataFileMeta]) -> None:
        """Delete files this writer produced (used when they cannot be handed out after all)."""
        for f in files:
            self.rolling.file_io.delete(self.rolling.path_factory.to_path(f))

    def take_compaction(self) -> CompactIncrement | None:
        """The compaction the last ``prepare_commit`` did along with its new files (first-row writers)."""
        return None


class _AppendWriter(_BucketWriter):
    """``AppendOnlyWriter``: rows go to files in arrival order, numbered from ``next_sequence``."""

    def __init__(self, rolling: RollingDataFileWriter, next_sequence: int, chunk_bytes: int) -> None:
        super().__init__(rolling, next_sequence)
        self.chunk_bytes = chunk_bytes

    def write(self, rows: pa.Table, kinds: pa.Array | None) -> None:
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes
        # Small input batches are gathered so each Parquet row group / ORC write is sizeable.
        if self.pending_bytes >= self.chunk_bytes:
            self._push()

    def _push(self) -> None:
        if not self.pending:
            return
        data = pa.concat_tables(self.pending) if len(self.pending) > 1 else self.pending[0]
        self.pending, self.pending_bytes = [], 0
        self.rolling.write(data, first_sequence=self.next_sequence)
        self.next_sequence += data.num_rows

    def prepare_commit(self) -> list[DataFileMeta]:
        self._push()
        self.rolling.flush()
        return self.rolling.drain()


class _KeyValueWriter(_BucketWriter):
    """``MergeTreeWriter``: buffer, sort by key, merge each key's rows with the table's merge function
    (deduplicate: the last row, deletes included, since a ``-D`` row must reach the file to delete
    older rows; the other engines as :mod:`paimon_meta.table.mergetree.merge_engine`), write."""

    def __init__(
        self, rolling: RollingDataFileWriter, next_sequence: int, ignore_delete: bool, engine: MergeEngine
    ) -> None:
        super().__init__(rolling, next_sequence)
        self.layout = rolling.layout
        self.ignore_delete = ignore_delete
        self.engine = engine
        self._schema = self.layout.arrow_schema()
        self._key_names = [f.name for f in self.layout.key_fields]
        self._source_keys = [f.name.removeprefix("_KEY_") for f in self.layout.key_fields]

    def write(self, rows: pa.Table, kinds: pa.Array | None) -> None:
        if kinds is not None and self.ignore_delete:
            keep = pc.is_in(kinds, pa.array([RowKind.INSERT, RowKind.UPDATE_AFTER], pa.int8()))
            rows, kinds = rows.filter(keep), kinds.filter(keep)
        n = rows.num_rows
        if n == 0:
            return
        sequence = pa.array(np.arange(self.next_sequence, self.next_sequence + n, dtype=np.int64))
        self.next_sequence += n
        if kinds is None:
            kinds = pa.array(np.zeros(n, dtype=np.int8))
        columns = [rows.column(k) for k in self._source_keys] + [sequence, kinds] + rows.columns
        table = pa.Table.from_arrays(columns, schema=self._schema)
        self.pending.append(table)
        self.pending_bytes += table.nbytes

    def flush(self) -> None:
        """Sort and fold the buffer and write it as one sorted run of level-0 files."""
        if not self.pending:
            return
        data = pa.concat_tables(self.pending)
        self.pending, self.pending_bytes = [], 0
        order = pc.sort_indices(
            data,
            sort_keys=[(k, "ascending") for k in self._key_names]
            + [(SEQUENCE_NUMBER_FIELD.name, "ascending")],
        )
        data = data.take(order).combine_chunks()
        if self.engine.name == DEDUPLICATE:
            run = _keep_last_per_key(data, self._key_names)
        else:
            run = merge_key_value_rows(self.engine, self.layout, data)
        self._written(run)
        self.rolling.write(run)
        self.rolling.flush()

    def _written(self, run: pa.Table) -> None:
        """Called with each sorted run before it is written."""

    def prepare_commit(self) -> list[DataFileMeta]:
        self.flush()
        return self.rolling.drain()


class _FirstRowWriter(_KeyValueWriter):
    """A first-row ``MergeTreeWriter``: each ``prepare_commit`` writes level-0 files and then moves their
    rows up by lookup compaction (:mod:`paimon_meta.table.write.first_row`), as Java's writer does; batch
    reads skip level 0. The runs of a commit are kept in memory until then."""

    def __init__(
        self,
        rolling: RollingDataFileWriter,
        next_sequence: int,
        ignore_delete: bool,
        engine: MergeEngine,
        *,
        levels: FirstRowLevels,
        compact_rolling: RollingDataFileWriter,
    ) -> None:
        super().__init__(rolling, next_sequence, ignore_delete, engine)
        self.levels = levels
        self.compact_rolling = compact_rolling
        self.runs: list[pa.Table] = []
        self.compaction: CompactIncrement | None = None

    def _written(self, run: pa.Table) -> None:
        self.runs.append(run)

    def prepare_commit(self) -> list[DataFileMeta]:
        self._drop_compaction()  # not handed out by the previous call: nobody will commit it
        files = super().prepare_commit()
        runs, self.runs = self.runs, []
        if files:
            try:
                self.compaction = self.levels.compact(self.engine, files, runs, self.compact_rolling)
            except BaseException:
                super().discard(files)
                raise
        return files

    def take_compaction(self) -> CompactIncrement | None:
        compaction, self.compaction = self.compaction, None
        return compaction

    def _drop_compaction(self) -> None:
        compaction, self.compaction = self.compaction, None
        if compaction is not None:
            super().discard(compaction.compact_after)

    def discard(self, files: Sequence[DataFileMeta]) -> None:
        super().discard(files)
        self._drop_compaction()

    def abort(self) -> None:
        super().abort()
        self.runs = []
        self._drop_compaction()
        self.compact_rolling.abort()


def _has_retractions(kinds: pa.Array | None) -> bool:
    if kinds is None:
        return False
    retract = pc.is_in(kinds, pa.array([RowKind.UPDATE_BEFORE, RowKind.DELETE], pa.int8()))
    return bool(pc.any(retract).as_py())


def _keep_last_per_key(data: pa.Table, key_names: Sequence[str]) -> pa.Table:
    """Rows sorted by (key, sequence): keep the last row of every run of equal keys."""
    n = data.num_rows
    if n <= 1:
        return data
    changes = np.zeros(n - 1, dtype=bool)
    for name in key_names:
        column = data.column(name)
        differs = pc.not_equal(column.slice(0, n - 1), column.slice(1))
        changes |= np.asarray(differs.combine_chunks() if isinstance(differs, pa.ChunkedArray) else differs)
    keep = np.append(changes, True)
    return data if keep.all() else data.filter(pa.array(keep))


# ---- restoring sequence numbers ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RestoredBucket:
    """What a writer needs from a bucket's live files in the latest snapshot."""

    max_sequence_number: int  # -1 when the bucket has no files
    total_buckets: int | None
    files: tuple[DataFileMeta, ...] = ()  # the bucket's live files, every level


class BucketRestorer:
    """Reads, per partition, the max sequence number and total bucket count of every bucket's live
    files in the latest snapshot (``AbstractFileStoreWrite.scanExistingFileMetas``)."""

    def __init__(
        self, file_io: FileIO, table_path: str, schema: TableSchema, *, reader: ManifestReader | None = None
    ) -> None:
        self.schema = schema
        if reader is None:
            paths = TablePaths.for_table(table_path, schema.partition_type.fields, schema.core_options)
            reader = ManifestReader(file_io, paths, manifest_format=schema.core_options.manifest_format)
        self.reader = reader
        self.snapshot = SnapshotManager(file_io, table_path).latest_snapshot()
        self._by_partition: dict[bytes, dict[int, RestoredBucket]] = {}

    def restore(self, partition: bytes, partition_values: tuple[Any, ...], bucket: int) -> RestoredBucket:
        buckets = self._by_partition.get(partition)
        if buckets is None:
            buckets = self._scan(partition, partition_values)
            self._by_partition[partition] = buckets
        return buckets.get(bucket, RestoredBucket(-1, None))

    def _scan(self, partition: bytes, values: tuple[Any, ...]) -> dict[int, RestoredBucket]:
        if self.snapshot is None:
            return {}
        keys = self.schema.partition_keys
        # Equality specs prune manifests by partition stats; values that a spec would reinterpret
        # (strings are parsed, the default-name string means null) go through a predicate instead.
        spec: Mapping[str, Any] | None = None
        if keys and not any(isinstance(v, (str, float)) for v in values):
            spec = dict(zip(keys, values))
        scan = FileStoreScan(
            self.reader,
            self.schema,
            self.snapshot,
            partition_filter=spec if spec else (lambda _: True),
            all_levels=True,  # first-row batch reads skip level 0; sequence numbers must not
        )
        out: dict[int, RestoredBucket] = {}
        for entry in scan.plan_files():
            if entry.partition != partition:
                continue
            prev = out.get(entry.bucket, RestoredBucket(-1, entry.total_buckets))
            seq = max(prev.max_sequence_number, entry.file.max_sequence_number)
            out[entry.bucket] = RestoredBucket(seq, entry.total_buckets, (*prev.files, entry.file))
        return out


# ---- TableWrite -----------------------------------------------------------------------------------


class TableWrite:
    """Turns Arrow data into data files of one table and hands them out as CommitMessages.

    Use: ``write_arrow``/``write_arrow_batch`` any number of times, then ``prepare_commit`` (which may
    be called again after more writes; sequence numbers continue), and ``close``. ``abort`` deletes
    every file written but not yet returned by ``prepare_commit``; ``close`` deletes nothing.

    Input: an Arrow table/batch holding every column of the table's latest schema (any order; types
    are cast when the conversion is exact, timestamps are truncated to the column precision). Deletes
    and updates on primary-key tables: add a column named ``_row_kind``, int8 (0 = +I insert, 1 = -U
    update-before, 2 = +U update-after, 3 = -D delete) or string (``"+I"``, ``"-U"``, ``"+U"``,
    ``"-D"``); a ``-D`` row needs its primary key (other columns may hold anything their types
    allow). Without the column every row is +I. Append tables accept only +I. ``row_kind_column``
    renames that column (needed only if the table has a column called ``_row_kind``).

    ``parallelism`` bounds the threads that finish buckets' files in ``prepare_commit`` (default:
    up to 4, one per core).

    Not supported (``UnsupportedError``): dynamic-bucket and postpone-bucket primary-key tables, the
    merge-engine options and aggregate functions :mod:`paimon_meta.table.mergetree.merge_engine` refuses, a
    changelog producer with merge engines other than ``deduplicate``, ``sequence.field``, deletion
    vectors on primary-key tables, ``changelog-producer=input``, row tracking; file formats other
    than Parquet and ORC. Retractions a merge engine cannot take (partial-update without
    ``ignore-delete``/``partial-update.remove-record-on-delete``, first-row without ``ignore-delete``,
    aggregate functions without retraction) are refused before anything is buffered.
    ``data-file.thin-mode=true`` writes primary-key files without the ``_KEY_*`` columns, as Java does.
    """

    def __init__(
        self,
        table: WritableTable,
        *,
        commit_user: str,
        file_io: FileIO | None = None,
        parallelism: int | None = None,
        row_kind_column: str = ROW_KIND_COLUMN,
    ) -> None:
        self.commit_user = commit_user
        self.row_kind_column = row_kind_column
        self.parallelism = parallelism if parallelism is not None else min(4, os.cpu_count() or 1)
        self.file_io = file_io or table.file_io
        self.table_path = table.path
        # Writers always use the newest schema (an ALTER may have happened since the table was
        # loaded), with the table's dynamic options (``FileStoreTable(options=...)``) laid over it.
        latest = SchemaManager(self.file_io, self.table_path).latest()
        schema = table.schema
        if latest is not None and latest.id > schema.id:
            dynamic: Mapping[str, str] = getattr(table, "dynamic_options", None) or {}
            schema = dataclasses.replace(latest, options={**latest.options, **dynamic})
        self.schema = schema
        self._manifest_reader: ManifestReader | None = getattr(table, "manifest_reader", None)
        check_writable(self.schema)
        if row_kind_column in self.schema.field_names:
            raise ValidationError(
                f"the table has a column named {row_kind_column!r}; pass another row_kind_column",
                field=row_kind_column,
            )
        self.layout = FileLayout.for_schema(self.schema)
        self.paths = TablePaths.for_table(
            self.table_path, self.schema.partition_type.fields, self.schema.core_options
        )
        self.target_file_size = target_file_size(self.schema)
        self.write_buffer_size = write_buffer_size(self.schema)
        self.ignore_delete = ignore_delete(self.schema)
        self.engine = MergeEngine.for_schema(self.schema) if self.schema.primary_keys else None
        self._estimate = SizeEstimate()
        self._writers: dict[tuple[bytes, int], _BucketWriter] = {}
        self._restorer: BucketRestorer | None = None
        self._closed = False

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.schema.primary_keys)

    # -- writing --
    def write_arrow(self, data: pa.Table) -> None:
        """Write the rows of an Arrow table (see the class docstring for the accepted input)."""
        self._check_open()
        if not isinstance(data, pa.Table):
            raise ValidationError(f"write_arrow expects a pyarrow.Table, got {type(data).__name__}")
        table, kinds = normalize_input(self.schema, data, row_kind_column=self.row_kind_column)
        if self.engine is not None and not self.ignore_delete and _has_retractions(kinds):
            # refused before anything is buffered: merging them would fail, now or on a later read
            self.engine.check_retractions(self.schema.fields)
        parts = split_rows(self.schema, table, kinds)
        # Writers are created (and their buckets checked) before any row is written, so a rejected
        # input changes nothing.
        writers = [self._writer(part) for part in parts]
        try:
            for part, writer in zip(parts, writers):
                writer.write(part.rows, part.kinds)
            self._limit_buffers()
        except Exception:
            # Part of the input may sit in files nobody will commit: discard everything not yet
            # handed out, so the caller can retry from its last prepare_commit.
            self.abort()
            raise

    def write_arrow_batch(self, batch: pa.RecordBatch) -> None:
        """Write the rows of an Arrow record batch."""
        if not isinstance(batch, pa.RecordBatch):
            raise ValidationError(
                f"write_arrow_batch expects a pyarrow.RecordBatch, got {type(batch).__name__}"
            )
        self.write_arrow(pa.Table.from_batches([batch]))

    def write_pandas(self, frame: pd.DataFrame) -> None:
        """Write the rows of a pandas DataFrame (its index is ignored), as pypaimon's TableWrite."""
        self.write_arrow(pa.Table.from_pandas(frame, preserve_index=False))

    def _writer(self, part: BucketSlice) -> _BucketWriter:
        key = (part.partition, part.bucket)
        writer = self._writers.get(key)
        if writer is None:
            writer = self._new_writer(part)
            self._writers[key] = writer
        return writer

    def _new_writer(self, part: BucketSlice) -> _BucketWriter:
        factory = self.paths.data_file_factory(part.partition_values, part.bucket, self.schema.core_options)
        rolling = RollingDataFileWriter(
            self.file_io, self.layout, factory, self.target_file_size, estimate=self._estimate
        )
        num_buckets = self.schema.num_buckets
        if num_buckets == UNAWARE_BUCKET:
            # AppendFileStoreWrite ignores previous files: numbering restarts at 0.
            return _AppendWriter(rolling, 0, _chunk_bytes(self.target_file_size))
        restored = self._restore(part)
        if restored.total_buckets is not None and restored.total_buckets != num_buckets:
            raise ValidationError(
                f"partition {part.partition_values} was written with {restored.total_buckets} buckets "
                f"but the table now has bucket={num_buckets}; rescale it (INSERT OVERWRITE) first",
                option="bucket",
            )
        start = restored.max_sequence_number + 1
        if self.engine is not None and self.engine.name == FIRST_ROW:
            levels = FirstRowLevels(
                self.file_io,
                self.schema,
                SchemaManager(self.file_io, self.table_path),
                self.layout,
                bucket_path=self.paths.bucket_path(part.partition_values, part.bucket),
                files=restored.files,
                max_level=num_levels(self.schema) - 1,
                guard=writer_guard(self.file_io, self.table_path, self.schema.options),
            )
            compact_rolling = RollingDataFileWriter(
                self.file_io, self.layout, factory, self.target_file_size, estimate=self._estimate
            )
            return _FirstRowWriter(
                rolling,
                start,
                self.ignore_delete,
                self.engine,
                levels=levels,
                compact_rolling=compact_rolling,
            )
        if self.engine is not None:
            return _KeyValueWriter(rolling, start, self.ignore_delete, self.engine)
        return _AppendWriter(rolling, start, _chunk_bytes(self.target_file_size))

    def _restore(self, part: BucketSlice) -> RestoredBucket:
        if self._restorer is None:
            self._restorer = BucketRestorer(
                self.file_io, self.table_path, self.schema, reader=self._manifest_reader
            )
        return self._restorer.restore(part.partition, part.partition_values, part.bucket)

    def _limit_buffers(self) -> None:
        """Primary-key buffers share ``write-buffer-size``; when full, the largest is flushed (Java's
        memory pool takes memory back from the biggest writer first)."""
        kv = [w for w in self._writers.values() if isinstance(w, _KeyValueWriter)]
        total = sum(w.pending_bytes for w in kv)
        while kv and total > self.write_buffer_size:
            largest = max(kv, key=lambda w: w.pending_bytes)
            total -= largest.pending_bytes
            largest.flush()

    # -- handing out --
    def prepare_commit(self) -> list[CommitMessage]:
        """Finish all open files; one CommitMessage per (partition, bucket) with new files."""
        self._check_open()
        total_buckets = self.schema.num_buckets
        items = list(self._writers.items())
        results = self._finish_all([writer for _, writer in items])
        messages = []
        for ((partition, bucket), writer), files in zip(items, results):
            compaction = writer.take_compaction()
            if files:
                messages.append(
                    CommitMessage(
                        partition=partition,
                        bucket=bucket,
                        total_buckets=total_buckets,
                        data_increment=DataIncrement(new_files=tuple(files)),
                        compact_increment=compaction or CompactIncrement(),
                    )
                )
        return messages

    def _finish_all(self, writers: Sequence[_BucketWriter]) -> list[list[DataFileMeta]]:
        """Every writer's ``prepare_commit``. Encoding and compressing files is most of the cost and
        pyarrow releases the GIL while doing it, so buckets are finished in parallel (each writer is
        touched by one thread). If any fails, the files the others just finished are deleted too
        (they were never handed out) and the first error is raised."""

        def finish(writer: _BucketWriter) -> list[DataFileMeta] | BaseException:
            try:
                return writer.prepare_commit()
            except Exception as e:
                return e

        if self.parallelism > 1 and len(writers) > 1:
            with ThreadPoolExecutor(max_workers=min(self.parallelism, len(writers))) as pool:
                outcomes = list(pool.map(finish, writers))
        else:
            outcomes = [finish(w) for w in writers]
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            for writer, outcome in zip(writers, outcomes):
                if not isinstance(outcome, BaseException):
                    writer.discard(outcome)
            self.abort()
            raise errors[0]
        return [o for o in outcomes if not isinstance(o, BaseException)]

    def abort(self) -> None:
        """Delete every file written but not yet handed out by ``prepare_commit`` and drop buffers."""
        for writer in self._writers.values():
            writer.abort()

    def close(self) -> None:
        """Release the writers. Deletes nothing: call ``abort`` first to discard unreturned files."""
        self._writers.clear()
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError("this TableWrite is closed")

    def __enter__(self) -> TableWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self.abort()
        self.close()


def _chunk_bytes(target: int) -> int:
    return max(1, min(MAX_CHUNK_BYTES, target // 2))
