"""The write pipeline shared by the batch and streaming jobs: rows -> data files -> CommitMessages.

1. **Assign** (``mapInArrow`` over the input): per Arrow batch, the Paimon bucket of every row
   (``bucket_array``: murmur over the bucket-key BinaryRow, exactly as Java) and its partition
   (serialized BinaryRow bytes) give the row's write task (:func:`write_tasks`). The rows of each
   task are packed into Arrow IPC streams of a few MB: the step emits ``(task int, rows binary)``,
   one row per packed group, not one row per input row.
2. **Shuffle**: ``repartitionById`` by the task, so every (partition, bucket) is written by exactly
   one task. Primary-key tables need this (sequence numbers of a bucket come from one writer);
   append tables get one set of files per bucket instead of one per input partition. Shuffling
   packed Arrow instead of rows skips Spark's row conversions on both sides of the exchange (a
   row-by-row ``repartition`` of the same data costs about twice as much end to end).
   Bucket-unaware append tables (``bucket = -1``) skip steps 1-2: their files are independent.
3. **Write** (``mapInArrow``): each task opens the table by path (:class:`~spark_jobs.common.
   TableHandle`), feeds its rows to a ``TableWrite`` and returns one row per CommitMessage:
   ``(message binary, version int)`` in ``CommitMessageSerializer`` bytes.

The task of a row is derived from the Paimon partition bytes, not Spark's values: two Spark values
that become one Paimon partition (timestamps truncated to the column precision) must land in the
same task. Within one (partition, bucket), rows keep their order within each input partition; rows
of one primary key coming from different input partitions are ordered arbitrarily (as any Spark
shuffle orders them).

Task retries: Spark returns the output of exactly one successful attempt per task, so messages of
failed or speculative attempts never reach the commit. A failed attempt that raised deletes the files
it wrote; one whose process died leaves them behind as orphans (no snapshot references them; orphan
cleanup removes them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import deserialize_row, serialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.schema import TableSchema
from paimon_meta.serde.commit_message import (
    CURRENT_VERSION,
    deserialize_commit_message,
    serialize_commit_message,
)
from paimon_meta.table.file_guard import path_guard
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.arrow_input import ROW_KIND_COLUMN, UNAWARE_BUCKET, normalize_input
from paimon_meta.table.write.bucket import bucket_array
from paimon_meta.table.write.data_file import arrow_to_internal
from paimon_meta.table.write.table_write import TableWrite
from spark_jobs.common import TableHandle

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MESSAGE_SCHEMA = "message binary, version int"
PACKED_SCHEMA = "task int, rows binary"
# A task's rows are shipped once this many bytes are buffered for it (or the input ends); all
# buffers are shipped when together they exceed TOTAL_BUFFER_BYTES.
PACK_BYTES = 4 * 1024 * 1024
TOTAL_BUFFER_BYTES = 64 * 1024 * 1024
_MAX_INT32 = 2**31 - 1

TaskHook = Callable[[list[CommitMessage]], None]


# ---- step 1: which task writes a row ----------------------------------------------------------------


def _key_schema(schema: TableSchema, names: Sequence[str]) -> TableSchema:
    """``schema`` cut down to ``names`` (no primary key), so only those columns are validated/cast."""
    fields = tuple(schema.field(n) for n in names)
    return dataclasses.replace(schema, fields=fields, primary_keys=())


def _partition_hash(partition: bytes) -> int:
    # Deterministic across processes (Python's hash() is salted per process); 31 bits, so that
    # hash * buckets + bucket stays far inside int64.
    return int.from_bytes(hashlib.blake2b(partition, digest_size=4).digest(), "big") >> 1


def partition_bytes(data: pa.Table, schema: TableSchema) -> pa.Array:
    """The serialized partition BinaryRow of every row of ``data`` (normalized to ``schema``'s
    types), computed once per distinct partition."""
    keys = list(schema.partition_keys)
    n = data.num_rows
    types = [schema.field(k).type for k in keys]
    if not keys:
        return pa.repeat(pa.scalar(serialize_row((), []), pa.binary()), n)
    groups = np.zeros(n, dtype=np.int64)
    for key in keys:
        encoded = pc.dictionary_encode(data.column(key), null_encoding="encode").combine_chunks()
        combined = groups * len(encoded.dictionary) + np.asarray(encoded.indices).astype(np.int64)
        # re-densify after each key so the combined ids never overflow
        groups = np.unique(combined, return_inverse=True)[1].astype(np.int64).reshape(-1)
    first_rows = np.unique(groups, return_index=True)[1]
    encoded_rows = [
        serialize_row([arrow_to_internal(data.column(k)[int(row)], t) for k, t in zip(keys, types)], types)
        for row in first_rows
    ]
    return pa.array(encoded_rows, pa.binary()).take(pa.array(groups))


def write_tasks(schema: TableSchema, batch: pa.RecordBatch) -> npt.NDArray[np.int32]:
    """The write task of every row (int32; Spark takes it modulo the task count): equal for rows of
    one (partition, bucket). Bucket-major -- ``hash(partition) * buckets + bucket`` -- so with a task
    count that is a multiple of the bucket count a partition's buckets go to different tasks, and an
    unpartitioned table's bucket ``b`` is task ``b``. Different (partition, bucket)s may share a
    task; one (partition, bucket) never spans two."""
    names = list(dict.fromkeys([*schema.partition_keys, *schema.bucket_keys]))
    data, _ = normalize_input(_key_schema(schema, names), pa.Table.from_batches([batch]).select(names))
    keys = list(schema.bucket_keys)
    num_buckets = schema.num_buckets
    buckets = bucket_array(
        [data.column(k) for k in keys], [schema.field(k).type for k in keys], num_buckets
    ).astype(np.int64)
    if not schema.partition_keys:
        return buckets.astype(np.int32)
    encoded = pc.dictionary_encode(partition_bytes(data, schema))
    hashes = np.array([_partition_hash(p) for p in encoded.dictionary.to_pylist()], dtype=np.int64)
    tasks: npt.NDArray[np.int64] = (hashes[np.asarray(encoded.indices)] * num_buckets + buckets) % _MAX_INT32
    return tasks.astype(np.int32)


class _Packer:
    """Buffers each task's rows and ships them as Arrow IPC streams."""

    def __init__(self) -> None:
        self.buffers: dict[int, list[pa.RecordBatch]] = {}
        self.sizes: dict[int, int] = {}
        self.total = 0

    def add(self, task: int, rows: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.buffers.setdefault(task, []).append(rows)
        self.sizes[task] = self.sizes.get(task, 0) + rows.nbytes
        self.total += rows.nbytes
        if self.total > TOTAL_BUFFER_BYTES:
            return self.drain()
        if self.sizes[task] >= PACK_BYTES:
            return [self._ship(task)]
        return []

    def drain(self) -> list[pa.RecordBatch]:
        return [self._ship(task) for task in list(self.buffers)]

    def _ship(self, task: int) -> pa.RecordBatch:
        batches = self.buffers.pop(task)
        self.total -= self.sizes.pop(task)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batches[0].schema) as writer:
            for b in batches:
                writer.write_batch(b)
        return _packed(task, sink.getvalue())


def _packed(task: int, stream: pa.Buffer) -> pa.RecordBatch:
    """A one-row ``(task, rows)`` batch whose binary value *is* ``stream`` (no copy)."""
    offsets = pa.py_buffer(np.array([0, stream.size], dtype=np.int32).tobytes())
    rows = pa.BinaryArray.from_buffers(pa.binary(), 1, [None, offsets, stream])
    return pa.RecordBatch.from_arrays([pa.array([task], pa.int32()), rows], names=["task", "rows"])


def pack_by_task(handle: TableHandle, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of step 1: the input's rows grouped by write task, as packed IPC."""
    schema = handle.open().schema
    packer = _Packer()
    for batch in batches:
        if batch.num_rows == 0:
            continue
        tasks = write_tasks(schema, batch)
        order = np.argsort(tasks, kind="stable")
        ordered = batch.take(pa.array(order)) if not np.all(order[1:] > order[:-1]) else batch
        sorted_tasks = tasks[order]
        starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_tasks)) + 1, [len(order)]))
        for lo, hi in itertools.pairwise(starts):
            yield from packer.add(int(sorted_tasks[lo]), ordered.slice(int(lo), int(hi - lo)))
    yield from packer.drain()


def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """The rows shipped by :func:`pack_by_task` (zero-copy views of the received buffers)."""
    for batch in batches:
        packed = batch.column("rows")
        for i in range(len(packed)):
            yield pa.ipc.open_stream(packed[i].as_buffer()).read_all()


# ---- step 3: writing ---------------------------------------------------------------------------------


def delete_message_files(table: FileStoreTable, messages: Sequence[CommitMessage]) -> None:
    """Delete the new data files of writer messages that will never be committed. A file a message
    names outside the table is refused and logged, never deleted (``paimon_meta.table.file_guard``)."""
    types = [f.type for f in table.schema.partition_type.fields]
    guard = path_guard(table)
    refused: list[str] = []
    for m in messages:
        bucket_dir = table.paths.bucket_path(deserialize_row(m.partition, types), m.bucket)
        for f in m.data_increment.new_files:
            path = guard.deletable(bucket_dir, f.file_name, f.external_path, refused, what="spark abort")
            if path is not None:
                table.file_io.delete(path)


def encode_messages(messages: Sequence[CommitMessage]) -> pa.RecordBatch:
    """One row per message: its bytes and the serializer version they were written with."""
    return pa.RecordBatch.from_pydict(
        {
            "message": pa.array(
                [serialize_commit_message(m, CURRENT_VERSION) for m in messages], pa.binary()
            ),
            "version": pa.array([CURRENT_VERSION] * len(messages), pa.int32()),
        }
    )


def decode_rows(rows: Sequence[Any]) -> list[CommitMessage]:
    """CommitMessages from collected ``(message, version)`` rows."""
    return [deserialize_commit_message(bytes(r["message"]), int(r["version"])) for r in rows]


def write_files(
    handle: TableHandle,
    commit_user: str,
    tables: Iterator[pa.Table],
    after_prepare: TaskHook | None = None,
) -> Iterator[pa.RecordBatch]:
    """Step 3: write one task's rows and return its CommitMessages."""
    table = handle.open()
    # One thread: Spark already runs one task per core, and TableWrite's own pool would compete.
    write = TableWrite(table, commit_user=commit_user, parallelism=1)
    messages: list[CommitMessage] = []
    try:
        for rows in tables:
            if rows.num_rows:
                write.write_arrow(rows)
        messages = write.prepare_commit()
        if after_prepare is not None:
            after_prepare(messages)
    except BaseException:
        # This attempt will not return its messages: nobody else knows about its files.
        write.abort()
        delete_message_files(table, messages)
        raise
    finally:
        write.close()
    if messages:
        yield encode_messages(messages)


# ---- the pipeline ----------------------------------------------------------------------------------


def check_columns(df: DataFrame, schema: TableSchema) -> None:
    """Fail on the driver, before any job runs, when columns are missing or unknown."""
    check_column_names(list(df.columns), schema)


def check_column_names(names: Sequence[str], schema: TableSchema) -> None:
    """``ValidationError`` unless ``names`` are the table's columns (any order), plus optionally
    ``_row_kind``."""
    missing = [n for n in schema.field_names if n not in names]
    unknown = [n for n in names if n not in schema.field_names and n != ROW_KIND_COLUMN]
    if missing or unknown:
        raise ValidationError(
            f"the DataFrame does not match the table columns {schema.field_names}: "
            f"missing {missing}, unknown {unknown}",
            missing=missing,
            unknown=unknown,
        )


def default_write_tasks(df: DataFrame, schema: TableSchema) -> int:
    """One task per bucket for unpartitioned tables, else ``spark.sql.shuffle.partitions``."""
    if not schema.partition_keys:
        return schema.num_buckets
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or "200")


def pack_and_shuffle(
    df: DataFrame, handle: TableHandle, schema: TableSchema, num_partitions: int | None = None
) -> DataFrame:
    """Steps 1-2: ``df``'s rows packed by write task (``PACKED_SCHEMA``) and shuffled so that every
    (partition, bucket) is in exactly one of ``num_partitions`` Spark partitions (default
    :func:`default_write_tasks`). Spark may coalesce these partitions, never split one."""
    tasks = num_partitions if num_partitions is not None else default_write_tasks(df, schema)
    packed = df.mapInArrow(lambda it: pack_by_task(handle, it), PACKED_SCHEMA)
    # Direct placement (no second hash of the task), so buckets spread evenly; Spark < 4.1 lacks
    # it and hashes instead (still one task per (partition, bucket), less evenly spread).
    by_id = getattr(packed, "repartitionById", None)
    shuffled: DataFrame = by_id(tasks, "task") if by_id is not None else packed.repartition(tasks, "task")
    return shuffled


def write_messages(
    df: DataFrame,
    handle: TableHandle,
    schema: TableSchema,
    commit_user: str,
    *,
    num_partitions: int | None = None,
    after_prepare: TaskHook | None = None,
    shuffle: bool = True,
) -> list[CommitMessage]:
    """Steps 1-3: write ``df``'s rows as data files on the executors and return the CommitMessages
    (nothing is committed). ``num_partitions`` is the number of write tasks.

    ``shuffle=False`` (append tables only) skips steps 1-2: each task computes the buckets of its own
    rows and writes a file for every (partition, bucket) it holds, so a bucket gets up to one file per
    input task (the dedicated compaction merges them later). 1.14x faster end to end in
    ``bench/bench_spark.py`` (10 M rows, local[2]); a primary-key table refuses it, because one key in
    two files of one commit would have no merge order.
    """
    check_columns(df, schema)
    if not shuffle and schema.primary_keys:
        raise ValidationError(
            "shuffle=False is for append tables: a primary-key table needs every key of a bucket in one "
            "writer (sequence numbers order the merge)",
            table_primary_keys=list(schema.primary_keys),
        )
    if schema.num_buckets == UNAWARE_BUCKET or not shuffle:
        frame = df.repartition(num_partitions) if num_partitions is not None else df

        def write_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            rows = (pa.Table.from_batches([b]) for b in batches)
            return write_files(handle, commit_user, rows, after_prepare)

        return decode_rows(frame.mapInArrow(write_rows, MESSAGE_SCHEMA).collect())

    shuffled = pack_and_shuffle(df, handle, schema, num_partitions)

    def write_packed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return write_files(handle, commit_user, unpack(batches), after_prepare)

    return decode_rows(shuffled.mapInArrow(write_packed, MESSAGE_SCHEMA).collect())
