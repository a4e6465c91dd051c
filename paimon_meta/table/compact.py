"""Compaction of a table, bucket by bucket, as a dedicated job (writers stay write-only): full, or of the
runs Paimon's universal pick chooses per primary-key bucket (``mergetree.universal``, what maintenance
runs).

Planning, rewriting and committing are separate so an engine (``spark_jobs.compaction``) can run the
rewrites anywhere: :func:`plan_compaction` (driver) -> :func:`run_task` per :class:`CompactTask`
(executors; a task is picklable) -> one COMPACT commit (driver). :func:`compact` ties them together
and retries on conflicts.

Append tables (Java ``BucketedAppendCompactManager.FullCompactTask``): a bucket's files in sequence
order, minus the leading files that are already large (>= ``compactionFileSize`` = 70 % of
``target-file-size``), are rewritten into target-size files when there are at least 3 of them and
small ones outnumber large ones. The rows keep their order and are renumbered from the first file's
minimum sequence number; new files are level 0 with ``file_source = COMPACT``. Bucket-unaware tables
(``bucket = -1``) have no order to keep: all their small files of a partition are merged.

Primary-key tables (Java ``CompactStrategy.pickFullCompaction`` + ``MergeTreeCompactTask``): the
output level is the max level, ``num-levels - 1`` (default 4), or the bucket's highest level when files
lie higher (Java's ``Levels``: a Java-written table has 6 levels by default). A bucket that already is
one sorted run at that level is left alone. The bucket's files are split into sections of overlapping key
ranges (``IntervalPartition``); a section of one large file is *upgraded* (the same file committed at
the output level, no rewrite) unless it carries deletes, everything else is merged: per key the row
with the highest ``_SEQUENCE_NUMBER`` wins (ties as merge-on-read breaks them), or the rows are folded
in that order by the table's merge engine (``MergeTreeCompactRewriter`` with its merge function), and
retractions (-U/-D) are dropped because nothing older lies below the max level. Level-0 files are
planned too (first-row batch reads skip them, compaction must not). Rewritten rows keep their
``_SEQUENCE_NUMBER`` and ``_VALUE_KIND``; they are written as one sorted run of target-size files
(level = output level, ``file_source = COMPACT``), so the files of a bucket never overlap in key
range (the commit's LSM check).

Universal compaction (``strategy``: Java ``UniversalCompaction`` as ``MergeTreeCompactManager`` runs it):
per bucket only the runs the pick chooses (a prefix of the runs, newest first) are merged, the same way,
into the level it chooses; retractions are kept unless no level above that output holds data, and only a
file bound for the max level is rewritten for its deletes. The output level is empty but for the picked
runs, so the result is again one sorted run per level.

Concurrent writers keep committing APPENDs meanwhile: their new files are simply not part of the
plan. When something else removed a planned file (another compaction, an overwrite), the commit
fails with ``CommitConflictError`` and :func:`compact` re-plans on the new snapshot, reusing the
rewrites whose input files are all still live.

Not supported (``UnsupportedError``): tables ``TableWrite`` cannot write (``check_writable``:
merge-engine options it refuses, ``sequence.field``, ...) and append tables with deletion
vectors. A bucket is rewritten in memory: its data must fit in the worker's memory.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import CommitConflictError, CommitOutcomeUnknownError, UnsupportedError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement
from paimon_meta.model.manifest import DataFileMeta, FileSource
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.file_guard import path_guard
from paimon_meta.table.file_layout import SEQUENCE_NUMBER_FIELD, VALUE_KIND_FIELD, FileLayout
from paimon_meta.table.mergetree.intervals import key_sections
from paimon_meta.table.mergetree.merge_engine import DEDUPLICATE, MergeEngine, merge_key_value_rows
from paimon_meta.table.mergetree.universal import (
    UniversalCompaction,
    drops_deletes,
    pick_bucket,
    restored_num_levels,
)
from paimon_meta.table.read.scan import FileStoreScan, PartitionFilterArg, Plan, Split
from paimon_meta.table.read.split_read import read_file_for_rewrite
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.arrow_input import UNAWARE_BUCKET, check_writable, num_levels, target_file_size
from paimon_meta.table.write.data_file import RollingDataFileWriter

log = logging.getLogger(__name__)

FULL_COMPACT_MIN_FILES = 3  # BucketedAppendCompactManager.FULL_COMPACT_MIN_FILE
DEFAULT_MAX_ATTEMPTS = 10
_ADD_KINDS = pa.array([0, 2], pa.int8())  # +I, +U; -U and -D retract


def compaction_file_size(schema: TableSchema) -> int:
    """``CoreOptions.compactionFileSize``: files at least this large are not rewritten for size."""
    return target_file_size(schema) // 10 * 7


# ---- the plan -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactTask:
    """The compaction of one (partition, bucket).

    Each of ``rewrite`` is a group of files merged into one run of new files (groups are disjoint
    and, for primary-key tables, ordered by key); ``upgrade`` are files committed unchanged at
    ``output_level``.
    """

    partition: bytes
    partition_values: tuple[Any, ...]
    bucket: int
    total_buckets: int | None
    bucket_path: str
    primary_key: bool
    output_level: int
    drop_delete: bool
    rewrite: tuple[tuple[DataFileMeta, ...], ...]
    upgrade: tuple[DataFileMeta, ...] = ()

    @property
    def key(self) -> tuple[bytes, int]:
        return (self.partition, self.bucket)

    @property
    def files(self) -> tuple[DataFileMeta, ...]:
        """Every file the task removes from the bucket (rewritten and upgraded)."""
        return (*(f for group in self.rewrite for f in group), *self.upgrade)


@dataclass(frozen=True, slots=True)
class CompactPlan:
    """The tasks planned on one snapshot (None: the table is empty)."""

    snapshot_id: int | None
    tasks: tuple[CompactTask, ...]


def _check_compactable(schema: TableSchema) -> None:
    check_writable(schema)
    if not schema.primary_keys and schema.core_options.deletion_vectors_enabled:
        raise UnsupportedError(
            "compacting append tables with deletion vectors is not supported",
            option="deletion-vectors.enabled",
        )


def plan_compaction(
    table: FileStoreTable,
    *,
    partition_filter: PartitionFilterArg | None = None,
    strategy: UniversalCompaction | None = None,
) -> CompactPlan:
    """The compaction tasks of the latest snapshot (optionally of some partitions only): full compaction,
    or, given a ``strategy``, the runs it picks per primary-key bucket (append tables: always their
    small files)."""
    schema = table.schema
    _check_compactable(schema)
    plan = _scan_all_levels(table, partition_filter)
    planner: Callable[[TableSchema, Split], CompactTask | None]
    if not schema.primary_keys:
        planner = _plan_append_bucket
    elif strategy is None:
        planner = _plan_primary_key_bucket
    else:
        # full-compaction.delta-commits counts the table's delta commits up to now
        planner = functools.partial(_plan_universal_bucket, strategy=strategy.bind(table.snapshot_manager))
    tasks = [task for split in plan.splits() if (task := planner(schema, split)) is not None]
    return CompactPlan(plan.snapshot_id, tuple(tasks))


def _scan_all_levels(table: FileStoreTable, partition_filter: PartitionFilterArg | None) -> Plan:
    """The latest snapshot's live files, level 0 included (batch reads of first-row tables skip it)."""
    scan = FileStoreScan(
        table.manifest_reader,
        table.schema,
        table.latest_snapshot(),
        partition_filter=partition_filter,
        all_levels=True,
    )
    return scan.plan()


def _task(split: Split, schema: TableSchema, **kwargs: Any) -> CompactTask:
    return CompactTask(
        partition=split.partition,
        partition_values=split.partition_values,
        bucket=split.bucket,
        total_buckets=split.total_buckets,
        bucket_path=split.bucket_path,
        primary_key=bool(schema.primary_keys),
        **kwargs,
    )


def _plan_append_bucket(schema: TableSchema, split: Split) -> CompactTask | None:
    large = compaction_file_size(schema)
    files = sorted(split.files, key=lambda f: (f.min_sequence_number, f.file_name))
    if schema.num_buckets == UNAWARE_BUCKET:
        # No order to keep: merge every small file of the partition.
        files = [f for f in files if f.file_size < large]
    else:
        # Order matters: only leading large files may be skipped (FullCompactTask).
        while files and files[0].file_size >= large:
            files.pop(0)
    small = sum(1 for f in files if f.file_size < large)
    if len(files) < FULL_COMPACT_MIN_FILES or small <= len(files) - small:
        return None
    return _task(split, schema, output_level=0, drop_delete=False, rewrite=(tuple(files),))


def _plan_primary_key_bucket(schema: TableSchema, split: Split) -> CompactTask | None:
    """Full compaction (``CompactStrategy.pickFullCompaction``): every run into the max level (of the
    bucket's levels, as Java's ``Levels`` restores them: files above ``num-levels`` raise it)."""
    max_level = restored_num_levels(num_levels(schema), split.files) - 1
    if all(f.level == max_level for f in split.files):
        return None  # one sorted run at the max level already
    return _plan_unit(schema, split, split.files, output_level=max_level, drop_delete=True)


def _plan_universal_bucket(
    schema: TableSchema, split: Split, *, strategy: UniversalCompaction
) -> CompactTask | None:
    """The runs :class:`UniversalCompaction` picks, merged into the level it picks."""
    unit = pick_bucket(strategy, num_levels(schema), split.files)
    if unit is None:
        return None
    return _plan_unit(
        schema,
        split,
        unit.files,
        output_level=unit.output_level,
        drop_delete=drops_deletes(unit, split.files),
    )


def _run_of(f: DataFileMeta) -> tuple[int, str]:
    # each level-0 file is a sorted run of its own; a higher level is one run
    return (0, f.file_name) if f.level == 0 else (f.level, "")


def _plan_unit(
    schema: TableSchema,
    split: Split,
    files: Sequence[DataFileMeta],
    *,
    output_level: int,
    drop_delete: bool,
) -> CompactTask | None:
    """Java ``MergeTreeCompactTask``: ``files`` cut into sections of overlapping key ranges; a section of
    several runs, or a small file of a one-run section, is merged with its small neighbours; a large file
    of a one-run section is moved to ``output_level`` unchanged (an *upgrade*: no rewrite), unless it is
    bound for the max level carrying deletes, then it is rewritten alone."""
    max_level = restored_num_levels(num_levels(schema), split.files) - 1
    key_types = [schema.field(k).type for k in schema.trimmed_primary_keys]
    min_size = compaction_file_size(schema)
    rewrite: list[tuple[DataFileMeta, ...]] = []
    upgrade: list[DataFileMeta] = []

    def upgrade_or_rewrite(file: DataFileMeta) -> None:
        if file.level == output_level:
            return
        if output_level != max_level or file.delete_row_count == 0:
            upgrade.append(file)
        else:
            # its retractions must be dropped before it reaches the max level
            rewrite.append((file,))

    def flush(candidate: list[list[DataFileMeta]]) -> None:
        # Consecutive candidates are merged into one run (MergeTreeCompactTask.rewrite); a lone candidate
        # of one run needs no merge: its files are upgraded.
        if len(candidate) == 1 and len({_run_of(f) for f in candidate[0]}) == 1:
            for f in candidate[0]:
                upgrade_or_rewrite(f)
        elif candidate:
            rewrite.append(tuple(f for section in candidate for f in section))
        candidate.clear()

    pending: list[list[DataFileMeta]] = []
    # no sections (undecodable keys): one section, every file merged with the others
    for section in key_sections(files, key_types) or [list(files)]:
        if len({_run_of(f) for f in section}) > 1:
            pending.append(section)
            continue
        for f in section:  # one run: its files in key order
            if f.file_size < min_size:
                pending.append([f])
            else:
                flush(pending)
                upgrade_or_rewrite(f)
    flush(pending)
    if not rewrite and not upgrade:
        return None
    return _task(
        split,
        schema,
        output_level=output_level,
        drop_delete=drop_delete,
        rewrite=tuple(rewrite),
        upgrade=tuple(upgrade),
    )


# ---- running one task ------------------------------------------------------------------------------


def run_task(table: FileStoreTable, task: CompactTask) -> CommitMessage:
    """Rewrite one task's files (see the module docstring) and describe the result as a
    CommitMessage with ``compact_before``/``compact_after``. Files written by a task that fails are
    deleted before the error propagates."""
    schema = table.schema
    _check_compactable(schema)
    engine = MergeEngine.for_schema(schema)
    layout = FileLayout.for_schema(schema)
    factory = table.paths.data_file_factory(task.partition_values, task.bucket, schema.core_options)
    after: list[DataFileMeta] = []
    writers: list[RollingDataFileWriter] = []
    try:
        for group in task.rewrite:
            rolling = RollingDataFileWriter(table.file_io, layout, factory, target_file_size(schema))
            writers.append(rolling)
            parts = [_read_for_rewrite(table, layout, task, f) for f in group]
            if task.primary_key:
                merged = _merge_by_key(parts, layout, group, engine, drop_delete=task.drop_delete)
                rolling.write(merged)
            else:
                data = pa.concat_tables(parts)
                rolling.write(data, first_sequence=min(f.min_sequence_number for f in group))
            rolling.flush()
            after += [
                dataclasses.replace(f, level=task.output_level, file_source=FileSource.COMPACT)
                for f in rolling.drain()
            ]
    except BaseException:
        for rolling in writers:
            rolling.abort()
        _delete_files(table, task.bucket_path, after, what="compaction task")
        raise
    after += [dataclasses.replace(f, level=task.output_level) for f in task.upgrade]
    return CommitMessage(
        partition=task.partition,
        bucket=task.bucket,
        total_buckets=task.total_buckets,
        compact_increment=CompactIncrement(compact_before=task.files, compact_after=tuple(after)),
    )


def _read_for_rewrite(
    table: FileStoreTable, layout: FileLayout, task: CompactTask, file: DataFileMeta
) -> pa.Table:
    """One file's rows in the current schema's file layout (older schemas evolved by field id)."""
    return read_file_for_rewrite(
        table.file_io,
        table.schema,
        table.schema_manager,
        layout,
        bucket_path=task.bucket_path,
        file=file,
        guard=path_guard(table),
    )


def _merge_by_key(
    parts: Sequence[pa.Table],
    layout: FileLayout,
    files: Sequence[DataFileMeta],
    engine: MergeEngine,
    *,
    drop_delete: bool,
) -> pa.Table:
    """Per key the merge of ``parts`` (the rows of ``files``) in merge-on-read order
    (``_SEQUENCE_NUMBER``, then retractions before additions, then the newer file, then the later
    row) by ``engine`` (deduplicate: the last row), sorted by key; retractions dropped if
    ``drop_delete``."""
    data = pa.concat_tables(parts)
    n = data.num_rows
    if n == 0:
        return data
    # File age as the reader ranks it: higher level = older; within a level, lower max sequence.
    order = sorted(range(len(files)), key=lambda i: (-files[i].level, files[i].max_sequence_number))
    rank = np.empty(len(files), dtype=np.int32)
    rank[order] = np.arange(len(files), dtype=np.int32)
    age = np.repeat(rank, [p.num_rows for p in parts])
    kinds = data.column(VALUE_KIND_FIELD.name)
    key_names = [f.name for f in layout.key_fields]
    work = data.append_column("__add", pc.is_in(kinds, value_set=_ADD_KINDS))
    work = work.append_column("__row", pa.array(np.arange(n, dtype=np.int64)))
    sort_keys = [(k, "ascending") for k in key_names] + [(SEQUENCE_NUMBER_FIELD.name, "ascending")]
    work = work.append_column("__age", pa.array(age))
    sort_keys += [("__add", "ascending"), ("__age", "ascending"), ("__row", "ascending")]
    ordered = work.take(pc.sort_indices(work, sort_keys=sort_keys))
    if engine.name != DEDUPLICATE:
        merged = merge_key_value_rows(engine, layout, ordered.select(layout.arrow_schema().names))
        if drop_delete:
            merged = merged.filter(pc.is_in(merged.column(VALUE_KIND_FIELD.name), value_set=_ADD_KINDS))
        return merged
    keep = np.ones(n, dtype=bool)
    if n > 1:
        same_as_next = np.ones(n - 1, dtype=bool)
        for name in key_names:
            column = ordered.column(name)
            equal = pc.equal(column.slice(0, n - 1), column.slice(1))
            same_as_next &= np.asarray(pc.fill_null(equal, False).combine_chunks(), dtype=bool)
        keep[:-1] = ~same_as_next  # the last row of each run of equal keys wins
    if drop_delete:
        keep &= np.asarray(ordered.column("__add").combine_chunks(), dtype=bool)
    return ordered.filter(pa.array(keep)).select(layout.arrow_schema().names)


# ---- committing -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactResult:
    """What :func:`compact` committed (``snapshot_ids`` empty: nothing needed compaction)."""

    snapshot_ids: tuple[int, ...]
    attempts: int
    conflicts: int
    buckets: int
    files_before: int
    files_after: int
    rows_rewritten: int


TaskRunner = Callable[[FileStoreTable, Sequence[CompactTask]], list[CommitMessage]]


def run_tasks_locally(table: FileStoreTable, tasks: Sequence[CompactTask]) -> list[CommitMessage]:
    """Run every task in this process, one after the other."""
    return [run_task(table, task) for task in tasks]


def new_files(message: CommitMessage) -> list[DataFileMeta]:
    """The files a compaction message wrote: ``compact_after`` minus upgrades (an upgraded file is
    the live input file under a new level, and must never be deleted on abort)."""
    before = {f.file_name for f in message.compact_increment.compact_before}
    return [f for f in message.compact_increment.compact_after if f.file_name not in before]


def abort_compaction(table: FileStoreTable, messages: Sequence[CommitMessage]) -> None:
    """Delete the files uncommitted compaction messages wrote (upgraded files are kept)."""
    types = [f.type for f in table.schema.partition_type.fields]
    for m in messages:
        bucket_dir = table.paths.bucket_path(deserialize_row(m.partition, types), m.bucket)
        _delete_files(table, bucket_dir, new_files(m), what="abort of a compaction")


def _delete_files(
    table: FileStoreTable, bucket_dir: str, files: Sequence[DataFileMeta], *, what: str
) -> None:
    """Delete written files a message names; a name or external path that is not the table's (a message
    from a remote task runner says anything) is refused and logged, never deleted (table.file_guard)."""
    guard = path_guard(table)
    refused: list[str] = []
    for f in files:
        path = guard.deletable(bucket_dir, f.file_name, f.external_path, refused, what=what)
        if path is not None:
            table.file_io.delete(path)


def _still_live(message: CommitMessage, live: set[tuple[bytes, int, int, str]]) -> bool:
    return all(
        (message.partition, message.bucket, f.level, f.file_name) in live
        for f in message.compact_increment.compact_before
    )


def _live_identities(
    table: FileStoreTable, partition_filter: PartitionFilterArg | None
) -> set[tuple[bytes, int, int, str]]:
    return {
        (s.partition, s.bucket, f.level, f.file_name)
        for s in _scan_all_levels(table, partition_filter).splits()
        for f in s.files
    }


def compact(
    table: FileStoreTable,
    *,
    runner: TaskRunner = run_tasks_locally,
    partition_filter: PartitionFilterArg | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    commit_user: str | None = None,
    strategy: UniversalCompaction | None = None,
) -> CompactResult:
    """Compact ``table`` (open for writing) and commit one COMPACT snapshot (as ``commit_user``, else a
    fresh one): fully, or only the runs ``strategy`` picks in each primary-key bucket.

    ``runner`` executes the rewrite tasks (in this process by default; ``spark_jobs.compaction``
    runs them on executors). On ``CommitConflictError`` the plan is redone on the new snapshot:
    rewrites whose inputs are all still live are reused, the others are deleted and redone, up to
    ``max_attempts`` plans. A definitely failed commit deletes the new files; an unknown outcome
    deletes nothing.
    """
    carried: list[CommitMessage] = []
    conflicts = 0
    for attempt in range(1, max_attempts + 1):
        plan = plan_compaction(table, partition_filter=partition_filter, strategy=strategy)
        if carried:
            live = _live_identities(table, partition_filter)
            stale = [m for m in carried if not _still_live(m, live)]
            abort_compaction(table, stale)
            carried = [m for m in carried if _still_live(m, live)]
        done = {(m.partition, m.bucket) for m in carried}
        tasks = [t for t in plan.tasks if t.key not in done]
        messages = carried + runner(table, tasks)
        if not messages:
            return CompactResult(
                (), attempt, conflicts, buckets=0, files_before=0, files_after=0, rows_rewritten=0
            )
        builder = table.new_batch_write_builder()
        if commit_user is not None:
            builder.commit_user = commit_user
        commit = builder.new_commit()
        try:
            outcome = commit.commit(messages)
        except CommitConflictError as e:
            conflicts += 1
            log.info("compaction of %s conflicted (%s); re-planning", table.path, e)
            carried = messages
            continue
        except CommitOutcomeUnknownError:
            raise
        except Exception:
            abort_compaction(table, messages)
            raise
        return CompactResult(
            snapshot_ids=outcome.snapshot_ids,
            attempts=attempt,
            conflicts=conflicts,
            buckets=len(messages),
            files_before=sum(len(m.compact_increment.compact_before) for m in messages),
            files_after=sum(len(m.compact_increment.compact_after) for m in messages),
            rows_rewritten=sum(f.row_count for m in messages for f in new_files(m)),
        )
    abort_compaction(table, carried)
    raise CommitConflictError(
        f"compaction of {table.path} conflicted {conflicts} times; giving up",
        reason="compaction_retries_exhausted",
        attempts=max_attempts,
    )
