"""What TableWrite accepts: the table checks (``check_writable``), the options it reads, and the input
normalisation (``normalize_input``: column casts exactly as Java's, timestamps floored to the column's
precision, the ``_row_kind`` column of primary-key tables)."""

from __future__ import annotations

import enum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import to_arrow_type
from paimon_meta.model.options import parse_memory_size
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField
from paimon_meta.table.file_layout import FileLayout
from paimon_meta.table.mergetree.merge_engine import DEDUPLICATE, IGNORE_DELETE_KEYS, MergeEngine
from paimon_meta.table.option_policy import check_main_branch, check_write_options

ROW_KIND_COLUMN = "_row_kind"
WRITE_BUFFER_SIZE = "write-buffer-size"
DEFAULT_WRITE_BUFFER_SIZE = "256 mb"
DEFAULT_TARGET_FILE_SIZE_PK = 128 * 1024 * 1024  # CoreOptions.targetFileSize(true)
DEFAULT_TARGET_FILE_SIZE_APPEND = 256 * 1024 * 1024  # CoreOptions.targetFileSize(false)
UNAWARE_BUCKET = -1
NUM_LEVELS = "num-levels"
DEFAULT_NUM_LEVELS = 5


class RowKind(enum.IntEnum):
    """Java's ``RowKind`` byte values, as stored in ``_VALUE_KIND``."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3


_ROW_KIND_TEXT = {
    "+I": RowKind.INSERT,
    "-U": RowKind.UPDATE_BEFORE,
    "+U": RowKind.UPDATE_AFTER,
    "-D": RowKind.DELETE,
}


# ---- what we can write -------------------------------------------------------------------------


def _option(schema: TableSchema, key: str, default: str) -> str:
    return (schema.options.get(key) or default).strip()


def check_writable(schema: TableSchema) -> None:
    """Raise ``UnsupportedError`` naming the feature when writing ``schema`` needs something
    paimon_meta does not implement (dynamic/postpone buckets, merge-engine options, options
    :mod:`paimon_meta.table.option_policy` refuses for writes, ...)."""
    check_write_options(schema.options)
    check_main_branch(schema.options)
    opts = schema.core_options
    buckets = opts.bucket
    if buckets == 0 or buckets < -2:
        raise ValidationError(f"bucket={buckets} is not a valid bucket number", option="bucket")
    if buckets == -2:
        raise UnsupportedError("postpone-bucket tables (bucket = -2) are not supported", option="bucket")
    if schema.primary_keys:
        if buckets == UNAWARE_BUCKET:
            raise UnsupportedError(
                "primary-key tables with dynamic bucket mode (bucket = -1) are not supported; "
                "set a fixed 'bucket' number",
                option="bucket",
            )
        engine = MergeEngine.for_schema(schema)
        engine.check_fields(schema.fields)
        changelog = _option(schema, "changelog-producer", "none").lower()
        if engine.name != DEDUPLICATE and changelog != "none":
            # Java's writers of these engines produce changelog files at compaction (lookup,
            # full-compaction); ours write none, which streaming readers would miss.
            raise UnsupportedError(
                f"changelog-producer={changelog} is not supported with merge-engine={engine.name}",
                option="changelog-producer",
            )
        if schema.options.get("sequence.field"):
            raise UnsupportedError(
                "primary-key tables with 'sequence.field' are not supported", option="sequence.field"
            )
        if opts.deletion_vectors_enabled:
            # Java readers skip level-0 files of deletion-vector tables until compaction, which we
            # do not run: written rows would stay invisible.
            raise UnsupportedError(
                "primary-key tables with deletion-vectors.enabled are not supported (no compaction)",
                option="deletion-vectors.enabled",
            )
        if _option(schema, "changelog-producer", "none").lower() == "input":
            raise UnsupportedError(
                "changelog-producer=input is not supported (changelog files are not written)",
                option="changelog-producer",
            )
    for key in ("row-tracking.enabled", "data-evolution.enabled"):
        if _option(schema, key, "false").lower() == "true":
            raise UnsupportedError(f"{key} is not supported for writing", option=key)
    FileLayout.for_schema(schema)  # file.format / file.compression


def write_buffer_size(schema: TableSchema) -> int:
    """``write-buffer-size`` in bytes: how much a primary-key writer buffers before it sorts and spills."""
    return parse_memory_size(
        _option(schema, WRITE_BUFFER_SIZE, DEFAULT_WRITE_BUFFER_SIZE), key=WRITE_BUFFER_SIZE
    )


def ignore_delete(schema: TableSchema) -> bool:
    """``ignore-delete`` (or one of its fallback keys): retract rows are dropped on write."""
    for key in IGNORE_DELETE_KEYS:
        value = schema.options.get(key)
        if value is not None:
            return value.strip().lower() == "true"
    return False


def num_levels(schema: TableSchema) -> int:
    """``num-levels`` (Java's default 5 when unset): primary-key files live on levels 0..num-levels-1."""
    text = schema.options.get(NUM_LEVELS)
    return int(text) if text else DEFAULT_NUM_LEVELS


def target_file_size(schema: TableSchema) -> int:
    """``target-file-size``: 128 MB for primary-key tables, 256 MB for append tables by default."""
    explicit = schema.core_options.target_file_size
    if explicit:
        return explicit
    return DEFAULT_TARGET_FILE_SIZE_PK if schema.primary_keys else DEFAULT_TARGET_FILE_SIZE_APPEND


# ---- input validation ----------------------------------------------------------------------------


def _type_family(t: pa.DataType) -> str:
    types = pa.types
    if types.is_dictionary(t):
        return _type_family(t.value_type)
    if types.is_null(t):
        return "null"
    if types.is_integer(t) or types.is_floating(t) or types.is_decimal(t):
        return "numeric"
    if types.is_string(t) or types.is_large_string(t) or types.is_string_view(t):
        return "string"
    if (
        types.is_binary(t)
        or types.is_large_binary(t)
        or types.is_fixed_size_binary(t)
        or types.is_binary_view(t)
    ):
        return "binary"
    if types.is_timestamp(t):
        return "timestamp-tz" if t.tz is not None else "timestamp"
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t) or types.is_list_view(t):
        return "list"
    for name, check in (("bool", types.is_boolean), ("date", types.is_date), ("time", types.is_time)):
        if check(t):
            return name
    for name, check in (("map", types.is_map), ("struct", types.is_struct)):
        if check(t):
            return name
    return str(t)


def _cast_column(name: str, column: pa.ChunkedArray, field: DataField) -> pa.ChunkedArray:
    target = to_arrow_type(field.type)
    if column.type == target:
        return column
    source_family, target_family = _type_family(column.type), _type_family(target)
    if source_family not in ("null", target_family):
        raise ValidationError(
            f"column {name!r} has Arrow type {column.type}, which cannot be written to {field.type} "
            f"(expected {target})",
            field=name,
            arrow_type=str(column.type),
        )
    try:
        if target_family in ("timestamp", "timestamp-tz") and source_family == target_family:
            return _floor_timestamps(column, target)
        # Everything else must convert exactly (no overflow, no lost fraction, no decimal rounding).
        return column.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise ValidationError(
            f"column {name!r} ({column.type}) cannot be cast to {field.type}: {e}",
            field=name,
            arrow_type=str(column.type),
        ) from e


_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _floor_timestamps(column: pa.ChunkedArray, target: pa.TimestampType) -> pa.ChunkedArray:
    """Timestamps at the target unit, finer digits dropped towards the past: Java keeps a
    ``Timestamp``'s epoch millis floored (``Timestamp.getMillisecond``) and writes only the digits
    of the column's precision. (Arrow's unsafe cast would round negative values towards zero.)"""
    source_unit, target_unit = str(column.type.unit), str(target.unit)
    ratio = _UNITS_PER_SECOND[source_unit] // _UNITS_PER_SECOND[target_unit]
    if ratio <= 1:
        return column.cast(target, safe=True)
    chunks = []
    for chunk in column.chunks:
        values = np.asarray(pc.fill_null(chunk.cast(pa.int64()), 0)) // ratio
        mask = np.asarray(chunk.is_null()) if chunk.null_count else None
        chunks.append(pa.array(values, pa.int64(), mask=mask).cast(target))
    return pa.chunked_array(chunks, target)


def _row_kinds(column: pa.ChunkedArray, name: str) -> pa.Array:
    """The ``_row_kind`` column as int8 Java RowKind bytes (ValidationError on anything else)."""
    if column.null_count:
        raise ValidationError(f"column {name!r} has {column.null_count} nulls", field=name)
    family = _type_family(column.type)
    if family == "string":
        text = column.cast(pa.string())
        codes = pc.index_in(text, value_set=pa.array(list(_ROW_KIND_TEXT)))
        if codes.null_count:
            bad = pc.filter(text, pc.is_null(codes)).to_pylist()[:3]
            raise ValidationError(
                f"column {name!r} holds {bad}, expected one of {list(_ROW_KIND_TEXT)}",
                field=name,
            )
        return pa.array(np.asarray(codes.combine_chunks()).astype(np.int8), pa.int8())
    if pa.types.is_integer(column.type):
        values = np.asarray(column.combine_chunks()).astype(np.int64)
        if values.size and (values.min() < 0 or values.max() > 3):
            raise ValidationError(
                f"column {name!r} holds values outside 0..3 (+I, -U, +U, -D)",
                field=name,
            )
        return pa.array(values.astype(np.int8), pa.int8())
    raise ValidationError(
        f"column {name!r} must be int8 (0..3) or string (+I, -U, +U, -D), got {column.type}",
        field=name,
    )


def normalize_input(
    schema: TableSchema, data: pa.Table, *, row_kind_column: str = ROW_KIND_COLUMN
) -> tuple[pa.Table, pa.Array | None]:
    """Validate ``data`` against ``schema`` and return it in the table's column order and Arrow
    types, plus the row kinds (None when there is no ``_row_kind`` column).

    Raises ValidationError naming the column: unknown or missing columns, types that cannot be cast
    exactly, nulls in NOT NULL columns, bad row kinds.
    """
    names = data.column_names
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValidationError(f"column {name!r} appears twice in the input", field=name)
        seen.add(name)
    table_names = set(schema.field_names)
    for name in names:
        if name not in table_names and name != row_kind_column:
            raise ValidationError(
                f"column {name!r} is not a column of the table {schema.field_names}", field=name
            )
    columns = []
    for field in schema.fields:
        if field.name not in seen:
            raise ValidationError(f"column {field.name!r} is missing from the input", field=field.name)
        column = _cast_column(field.name, data.column(field.name), field)
        if not field.type.nullable and column.null_count:
            raise ValidationError(
                f"column {field.name!r} is NOT NULL but the input has {column.null_count} nulls in it",
                field=field.name,
                null_count=column.null_count,
            )
        columns.append(column)
    arrow_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.type), f.type.nullable) for f in schema.fields]
    )
    table = pa.Table.from_arrays(columns, schema=arrow_schema)
    kinds = _row_kinds(data.column(row_kind_column), row_kind_column) if row_kind_column in seen else None
    if kinds is not None and not schema.primary_keys and pc.any(pc.not_equal(kinds, 0)).as_py():
        raise ValidationError(
            f"append tables accept only +I rows, but column {row_kind_column!r} holds other kinds",
            field=row_kind_column,
        )
    return table, kinds
