"""Write Parquet/ORC data files from Arrow tables and describe each with a ``DataFileMeta``.

Matches Java's ``RowDataFileWriter`` (append tables) and ``KeyValueDataFileWriter`` (primary-key
tables) behind ``RollingFileWriter``: a writer streams chunks into the current file, rolls to a new
file once the file reaches ``target-file-size``, and describes every finished file with its size,
row count, sequence-number range, key range (primary-key tables), stats and creation time.

The columns a file holds are its :class:`~paimon_meta.table.file_layout.FileLayout` (``KeyValue.schema``,
``SpecialFields``). With ``data-file.thin-mode`` (Java >= 1.0, ``KeyValueThinDataFileWriterImpl``) the
``_KEY_`` copies are left out; the key stats in the metadata are then the value stats of the key columns,
which get ``truncate(128)`` like ``_KEY_`` columns do. Parquet columns carry field ids, decimals of
precision <= 18 are INT32/INT64 and TIME is INT32 millis adjusted to UTC, as Java writes them.

Bytes are produced in memory and written through ``FileIO.write`` in one piece: a file is never
visible half-written, and the same code serves local disks and S3.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq

from paimon_meta.errors import ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.binary_row import EMPTY_ROW_BYTES, Timestamp, serialize_row
from paimon_meta.model.manifest import EMPTY_STATS, DataFileMeta, FileSource
from paimon_meta.model.types import ArrayType, DataField, DataType, RowType, TypeRoot
from paimon_meta.table.file_layout import ORC_CODECS, PARQUET_CODECS, FileLayout
from paimon_meta.table.paths import DataFilePathFactory
from paimon_meta.table.write.stats import (
    ColStats,
    ColumnStatsAccumulator,
    StatsMode,
    stats_modes,
    to_simple_stats,
    value_stats,
)

# Upper bound on the Arrow bytes written as one Parquet row group / ORC write call.
MAX_CHUNK_BYTES = 64 * 1024 * 1024
_EPOCH = dt.datetime(1970, 1, 1)


def local_now_millis() -> int:
    """``Timestamp.fromLocalDateTime(LocalDateTime.now()).toMillisTimestamp()``: the local wall-clock
    time read as if it were UTC, in epoch milliseconds (what Java stores in ``_CREATION_TIME``)."""
    return (dt.datetime.now() - _EPOCH) // dt.timedelta(milliseconds=1)


# ---- Arrow values -> BinaryRow values ------------------------------------------------------------


def _timestamp_from_int(value: int, unit: str) -> Timestamp:
    if unit == "s":
        return Timestamp.from_epoch_millis(value * 1000)
    if unit == "ms":
        return Timestamp.from_epoch_millis(value)
    if unit == "us":
        return Timestamp.from_epoch_micros(value)
    return Timestamp.from_epoch_nanos(value)


def arrow_to_internal(value: pa.Scalar, data_type: DataType) -> Any:
    """One Arrow scalar as the Python value :mod:`paimon_meta.model.binary_row` expects for
    ``data_type`` (timestamps as :class:`Timestamp` at full precision, TIME as millis of the day)."""
    if not value.is_valid:
        return None
    root = data_type.root
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return _timestamp_from_int(value.cast(pa.int64()).as_py(), str(value.type.unit))
    if root is TypeRoot.TIME:
        return value.cast(pa.int32()).as_py()
    if isinstance(data_type, ArrayType):
        return [arrow_to_internal(v, data_type.element) for v in value.values]
    if isinstance(data_type, RowType):
        return tuple(arrow_to_internal(value[f.name], f.type) for f in data_type.fields)
    return value.as_py()


def row_values(table: pa.Table, row: int, fields: Sequence[DataField]) -> list[Any]:
    """The BinaryRow values of ``fields`` (columns of ``table`` in order) in row ``row``."""
    return [arrow_to_internal(table.column(i)[row], f.type) for i, f in enumerate(fields)]


# ---- one format writer over an in-memory sink ------------------------------------------------------


def _has_nanos(pa_type: pa.DataType) -> bool:
    if pa.types.is_timestamp(pa_type):
        return bool(pa_type.unit == "ns")
    return any(_has_nanos(pa_type.field(i).type) for i in range(pa_type.num_fields))


def _unannotated(pa_type: pa.DataType) -> pa.DataType:
    """``pa_type`` with every millisecond/microsecond timestamp, nested ones too, as plain int64."""
    if pa.types.is_timestamp(pa_type):
        return pa_type if pa_type.unit == "ns" else pa.int64()
    if pa.types.is_struct(pa_type):
        return pa.struct([f.with_type(_unannotated(f.type)) for f in pa_type])
    if pa.types.is_map(pa_type):
        return pa.map_(
            pa_type.key_field.with_type(_unannotated(pa_type.key_type)),
            pa_type.item_field.with_type(_unannotated(pa_type.item_type)),
        )
    if pa.types.is_list(pa_type):
        return pa.list_(pa_type.value_field.with_type(_unannotated(pa_type.value_type)))
    return pa_type


def parquet_layout(schema: pa.Schema) -> tuple[pa.Schema, bool]:
    """(the schema handed to pyarrow's Parquet writer, whether it writes timestamps as INT96) for rows of
    ``schema``, so that every timestamp is stored as Java stores it: TIMESTAMP(7..9) as INT96, the lower
    precisions as INT64 millis (<= 3) or micros (<= 6). Java 0.9/1.0 read nothing else there
    (ParquetSplitReaderUtil: INT96 for 7..9, INT64 for <= 6, nested fields too).

    pyarrow's INT96 switch (``use_deprecated_int96_timestamps``) covers every timestamp of a file, so a
    file that has TIMESTAMP(7..9) hands its lower-precision timestamps to the writer as plain int64 of
    their unit: the INT64 values Java writes, without the TIMESTAMP logical annotation. Paimon reads them
    by the column's precision (0.9/1.0's LongColumnReader; later versions'
    ParquetVectorUpdaterFactory.timestampUnit falls back to the precision for an unannotated INT64), and
    so do our reader, pypaimon 2.1.0 and paimon-rust (tests/interop)."""
    if not any(_has_nanos(f.type) for f in schema):
        return schema, False
    fields = [f.with_type(_unannotated(f.type)) for f in schema]
    return pa.schema(fields, metadata=schema.metadata), True


class _FormatWriter:
    """A pyarrow Parquet/ORC writer streaming into memory, with a running size estimate."""

    def __init__(self, layout: FileLayout, schema: pa.Schema, orc_ratio: float) -> None:
        self.sink = pa.BufferOutputStream()
        self.format = layout.file_format
        self._orc_ratio = orc_ratio
        self._unflushed = 0  # ORC: Arrow bytes written since the sink last grew
        self._flushed_at = 0
        self.arrow_bytes = 0
        self._parquet: pq.ParquetWriter | None = None
        self._orc: pa_orc.ORCWriter | None = None
        self._parquet_schema: pa.Schema | None = None  # set when it differs from the rows' schema
        if self.format == "parquet":
            codec = PARQUET_CODECS[layout.compression]
            parquet_schema, int96 = parquet_layout(schema)
            if parquet_schema != schema:
                self._parquet_schema = parquet_schema
            self._parquet = pq.ParquetWriter(
                self.sink,
                parquet_schema,
                compression=codec,
                compression_level=layout.zstd_level if codec == "zstd" else None,
                write_statistics=True,
                store_schema=False,
                store_decimal_as_integer=True,
                write_time_adjusted_to_utc=True,
                # TIMESTAMP(7..9) as INT96, as Java writes and 0.9/1.0 read them: parquet_layout
                use_deprecated_int96_timestamps=int96,
            )
        else:
            self._orc = pa_orc.ORCWriter(self.sink, compression=ORC_CODECS[layout.compression])

    def write(self, chunk: pa.Table) -> None:
        self.arrow_bytes += chunk.nbytes
        if self._parquet is not None:
            # Arrow never lets a row group cross a chunk boundary: a table assembled from many small input
            # batches would become many small row groups, which encode about 2x slower and read worse.
            if self._parquet_schema is not None:
                chunk = chunk.cast(self._parquet_schema)  # timestamps to int64: a reinterpretation
            self._parquet.write_table(chunk.combine_chunks())
            return
        assert self._orc is not None
        self._orc.write(_orc_compatible(chunk))
        size = self.sink.tell()
        if size != self._flushed_at:
            self._flushed_at, self._unflushed = size, 0
        else:
            self._unflushed += chunk.nbytes

    def estimated_size(self) -> int:
        """Bytes the file would have if closed now: exact for Parquet (row groups are flushed per
        write), flushed stripes plus a ratio-scaled estimate of buffered rows for ORC."""
        return int(self.sink.tell()) + int(self._unflushed * self._orc_ratio)

    def finish(self) -> bytes:
        if self._parquet is not None:
            self._parquet.close()
        else:
            assert self._orc is not None
            self._orc.close()
        return bytes(self.sink.getvalue())


def _orc_compatible(table: pa.Table) -> pa.Table:
    """pyarrow's ORC writer cannot write Arrow TIME; Java stores TIME in ORC as INT millis anyway."""
    if not any(pa.types.is_time(f.type) for f in table.schema):
        return table
    cols = [c.cast(pa.int32()) if pa.types.is_time(c.type) else c for c in table.columns]
    fields = [
        pa.field(f.name, pa.int32(), f.nullable, f.metadata) if pa.types.is_time(f.type) else f
        for f in table.schema
    ]
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


# ---- rolling writer -----------------------------------------------------------------------------------


class _OpenFile:
    """Running state of the file being written."""

    def __init__(self, layout: FileLayout, name: str, path: str, external: str | None, writer: _FormatWriter):
        self.name = name
        self.path = path
        self.external_path = external
        self.writer = writer
        self.rows = 0
        self.min_seq: int | None = None
        self.max_seq: int | None = None
        self.deletes = 0
        self.first_key: list[Any] | None = None
        self.last_key: list[Any] | None = None
        fmt = layout.file_format
        # Thin files have no key columns: their key stats are the key's value stats (see _meta).
        key_fields = () if layout.thin else layout.key_fields
        self.key_stats = [ColumnStatsAccumulator(f.type, fmt) for f in key_fields]
        self.value_stats = [ColumnStatsAccumulator(f.type, fmt) for f in layout.value_fields]


class SizeEstimate:
    """Compressed/Arrow size ratio learned from finished ORC files (shared by a TableWrite's writers),
    used to estimate the size of rows an ORC writer still buffers."""

    def __init__(self) -> None:
        self.file_bytes = 0
        self.arrow_bytes = 0
        self._lock = threading.Lock()  # writers of different buckets may finish files concurrently

    @property
    def ratio(self) -> float:
        # Before any file is finished assume no compression: the first files come out smaller than
        # the target rather than larger.
        with self._lock:
            return self.file_bytes / self.arrow_bytes if self.arrow_bytes else 1.0

    def record(self, file_bytes: int, arrow_bytes: int) -> None:
        with self._lock:
            self.file_bytes += file_bytes
            self.arrow_bytes += arrow_bytes


class RollingDataFileWriter:
    """Writes one (partition, bucket)'s rows into data files of about ``target_file_size`` bytes.

    Input tables must have ``layout.arrow_schema()``. For primary-key layouts rows must arrive
    sorted by key (each file's min/max key are its first/last row, as ``KeyValueDataFileWriter``)
    and carry their ``_SEQUENCE_NUMBER``; append rows get ``first_sequence + i``. Finished files are
    on storage; :meth:`drain` hands their metadata out, :meth:`abort` deletes those not handed out.
    """

    def __init__(
        self,
        file_io: FileIO,
        layout: FileLayout,
        path_factory: DataFilePathFactory,
        target_file_size: int,
        *,
        estimate: SizeEstimate | None = None,
    ) -> None:
        if target_file_size <= 0:
            raise ValidationError(f"target file size must be positive, got {target_file_size}")
        self.file_io = file_io
        self.layout = layout
        self.path_factory = path_factory
        self.target_file_size = target_file_size
        self.estimate = estimate or SizeEstimate()
        self._file_schema = layout.file_arrow_schema()
        # StatsCollectorFactories over the file's columns; in thin mode with the key names, so the key
        # value columns get truncate(128), and the key stats are theirs.
        key_names = [f.name for f in layout.key_fields] if layout.thin else []
        modes = stats_modes(layout.options, [f.name for f in layout.file_fields], key_names=key_names)
        value_offset = 2 if layout.thin else layout.value_offset
        self._value_modes: list[StatsMode] = modes[value_offset:]
        self._key_modes: list[StatsMode] = [] if layout.thin else modes[: layout.key_arity]
        # Each chunk becomes one Parquet row group; at most half a target so files overshoot little.
        self._chunk_bytes = max(1, min(MAX_CHUNK_BYTES, target_file_size // 2))
        self._current: _OpenFile | None = None
        self._finished: list[DataFileMeta] = []
        self._finished_paths: list[str] = []

    # -- writing --
    def write(self, data: pa.Table, *, first_sequence: int = 0) -> None:
        """Append ``data``; for append layouts row ``i`` gets sequence number ``first_sequence + i``."""
        n = data.num_rows
        if n == 0:
            return
        row_bytes = max(1, data.nbytes // n)
        step = max(1, self._chunk_bytes // row_bytes)
        start = 0
        while start < n:
            chunk = data.slice(start, min(step, n - start))
            self._write_chunk(chunk, first_sequence + start)
            start += chunk.num_rows
            assert self._current is not None
            if self._current.writer.estimated_size() >= self.target_file_size:
                self.flush()

    def _open(self) -> _OpenFile:
        name = self.path_factory.new_data_file_name()
        path, external = self.path_factory.new_path(name)
        writer = _FormatWriter(self.layout, self._file_schema, self.estimate.ratio)
        return _OpenFile(self.layout, name, path, external, writer)

    def _write_chunk(self, chunk: pa.Table, first_sequence: int) -> None:
        if self._current is None:
            self._current = self._open()
        f = self._current
        layout = self.layout
        stored = chunk.select(list(range(layout.key_arity, chunk.num_columns))) if layout.thin else chunk
        f.writer.write(stored)
        n = chunk.num_rows
        for i, acc in enumerate(f.key_stats):
            acc.update(chunk.column(i))
        for i, acc in enumerate(f.value_stats):
            acc.update(chunk.column(layout.value_offset + i))
        if layout.is_key_value:
            seq = pc.min_max(chunk.column(layout.key_arity))
            low, high = seq["min"].as_py(), seq["max"].as_py()
            kinds = chunk.column(layout.key_arity + 1)
            # RowKind.isRetract: -U (1) and -D (3) count as deletes.
            f.deletes += pc.sum(pc.is_in(kinds, pa.array([1, 3], pa.int8()))).as_py() or 0
            if f.first_key is None:
                f.first_key = row_values(chunk, 0, layout.key_fields)
            f.last_key = row_values(chunk, n - 1, layout.key_fields)
        else:
            low, high = first_sequence, first_sequence + n - 1
        f.min_seq = low if f.min_seq is None else min(f.min_seq, low)
        f.max_seq = high if f.max_seq is None else max(f.max_seq, high)
        f.rows += n

    def flush(self) -> None:
        """Finish the open file (if any): write it to storage and record its metadata."""
        f, self._current = self._current, None
        if f is None or f.rows == 0:
            return
        data = f.writer.finish()
        try:
            self.file_io.write(f.path, data)
        except Exception:
            # The write may have landed even though it failed (lost response). Nothing references
            # a data file before it is committed, so removing it is always safe.
            with contextlib.suppress(Exception):
                self.file_io.delete(f.path)
            raise
        self._finished_paths.append(f.path)
        if self.layout.file_format == "orc":
            self.estimate.record(len(data), f.writer.arrow_bytes)
        self._finished.append(self._meta(f, len(data)))

    def _meta(self, f: _OpenFile, size: int) -> DataFileMeta:
        layout = self.layout
        values = [m.convert(acc.result()) for m, acc in zip(self._value_modes, f.value_stats)]
        cols, vstats = value_stats(values, layout.value_fields, layout.options)
        assert f.min_seq is not None and f.max_seq is not None
        if layout.is_key_value:
            assert f.first_key is not None and f.last_key is not None
            key_types = [k.type for k in layout.key_fields]
            keys: list[ColStats]
            if layout.thin:  # KeyValueThinDataFileWriterImpl.fetchKeyValueStats
                keys = [values[i] for i in layout.key_value_positions]
            else:
                keys = [m.convert(acc.result()) for m, acc in zip(self._key_modes, f.key_stats)]
            min_key = serialize_row(f.first_key, key_types)
            max_key = serialize_row(f.last_key, key_types)
            kstats = to_simple_stats(keys, layout.key_fields)
        else:
            min_key = max_key = EMPTY_ROW_BYTES
            kstats = EMPTY_STATS
        return DataFileMeta(
            file_name=f.name,
            file_size=size,
            row_count=f.rows,
            min_key=min_key,
            max_key=max_key,
            key_stats=kstats,
            value_stats=vstats,
            min_sequence_number=f.min_seq,
            max_sequence_number=f.max_seq,
            schema_id=layout.schema_id,
            level=0,
            extra_files=(),
            creation_time=local_now_millis(),
            delete_row_count=f.deletes,
            embedded_index=None,
            file_source=FileSource.APPEND,
            value_stats_cols=cols,
            external_path=f.external_path,
        )

    # -- handing out and cleaning up --
    def drain(self) -> list[DataFileMeta]:
        """Metadata of the files finished since the last drain (they now belong to the caller)."""
        out, self._finished, self._finished_paths = self._finished, [], []
        return out

    def abort(self) -> None:
        """Drop the open file and delete finished files not yet handed out by :meth:`drain`."""
        self._current = None
        for path in self._finished_paths:
            self.file_io.delete(path)
        self._finished, self._finished_paths = [], []
