"""Schema evolution on read: map a data file's columns to the read schema by field id, and cast.

Java's ``SchemaEvolutionUtil`` + ``CastExecutors``: every file was written with the schema of its
``schema_id``; a column is found by *field id* (so renames and reorders are transparent), a field the
file does not have reads as null, a dropped field is simply not read, and a type change is a cast
from the file's type to the read type. Casts follow Java where Arrow's differ: float to integer
truncates toward zero and saturates (NaN -> 0), and numbers/timestamps/times cast to STRING print as
Java prints them (``10.0``, ``2024-01-01 00:00:00.123``). TIMESTAMP <-> TIMESTAMP_LTZ casts take the
session zone as UTC.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.spec.arrow import to_arrow_type
from paimon_meta.spec.types import MAX_LENGTH, AtomicType, DataType, RowType, TypeRoot
from paimon_meta.table.java_text import (
    java_double_to_string,
    java_float_to_string,
    sql_time_text,
    sql_timestamp_text,
)

# pa.Array | pa.ChunkedArray: pyarrow ships no type information, so mypy sees Any either way.
ArrowArray: TypeAlias = Any

_INTEGER_ROOTS = (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT)
_FLOAT_ROOTS = (TypeRoot.FLOAT, TypeRoot.DOUBLE)
_STRING_ROOTS = (TypeRoot.CHAR, TypeRoot.VARCHAR)


def _same_type(a: DataType, b: DataType) -> bool:
    """Equal ignoring nullability (and, for ROW, ignoring field names: ids decide)."""
    return a.with_nullable(True) == b.with_nullable(True)


def _map_values(arr: ArrowArray, fn: Callable[[Any], str]) -> pa.Array:
    values = arr.to_pylist()
    return pa.array([None if v is None else fn(v) for v in values], type=pa.string())


_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)


def _timestamps_to_text(arr: ArrowArray, precision: int) -> pa.Array:
    """``formatTimestamp(ts, precision)`` per value, through int64 so nanoseconds survive."""
    unit = arr.type.unit
    per_second = _PER_SECOND[unit]
    ints = pc.cast(pc.cast(arr, pa.timestamp(unit)), pa.int64()).to_pylist()
    out: list[str | None] = []
    for v in ints:
        if v is None:
            out.append(None)
            continue
        secs, frac = divmod(v, per_second)
        nanos = frac * (1_000_000_000 // per_second)
        out.append(sql_timestamp_text(_EPOCH + dt.timedelta(seconds=secs), nanos, precision))
    return pa.array(out, type=pa.string())


def _to_string(arr: ArrowArray, source: DataType, target: DataType) -> ArrowArray:
    root = source.root
    if root is TypeRoot.DOUBLE:
        out: ArrowArray = _map_values(arr, java_double_to_string)
    elif root is TypeRoot.FLOAT:
        out = _map_values(arr, java_float_to_string)
    elif root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        out = _timestamps_to_text(arr, getattr(source, "precision", 6) or 0)
    elif root is TypeRoot.TIME:
        millis = pc.cast(pc.cast(arr, pa.time32("ms")), pa.int32())
        precision = getattr(source, "precision", 0) or 0
        out = _map_values(millis, lambda ms: sql_time_text(int(ms), precision))
    elif root in (TypeRoot.BINARY, TypeRoot.VARBINARY):
        out = _map_values(arr, lambda b: bytes(b).decode("utf-8", errors="replace"))
    else:
        out = pc.cast(arr, pa.string())
    return _fit_length(out, target)


def _fit_length(arr: ArrowArray, target: DataType) -> ArrowArray:
    """Java's ``toCharacterString``: VARCHAR(n) truncates to n characters, CHAR(n) also pads."""
    if not isinstance(target, AtomicType) or target.length is None or target.length == MAX_LENGTH:
        return arr
    n = target.length
    out = pc.utf8_slice_codeunits(arr, 0, n)
    if target.root is TypeRoot.CHAR:
        out = pc.utf8_rpad(out, n, " ")
    return out


def _float_to_integer(arr: ArrowArray, target_arrow: pa.DataType) -> ArrowArray:
    info = np.iinfo(target_arrow.to_pandas_dtype())
    as_double = pc.cast(arr, pa.float64())
    no_nan = pc.if_else(pc.is_nan(as_double), 0.0, as_double)
    low = pc.max_element_wise(no_nan, float(info.min), skip_nulls=False)
    clipped = pc.min_element_wise(low, float(info.max), skip_nulls=False)
    return pc.cast(clipped, target_arrow, safe=False)


def _cast_row(arr: ArrowArray, source: RowType, target: RowType) -> ArrowArray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    by_id = {f.id: (i, f) for i, f in enumerate(source.fields)}
    children = []
    for f in target.fields:
        hit = by_id.get(f.id)
        if hit is None:
            children.append(pa.nulls(len(arr), to_arrow_type(f.type)))
        else:
            i, sf = hit
            children.append(cast_array(arr.field(i), sf.type, f.type))
    struct_type = to_arrow_type(target)
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask)


def cast_array(arr: ArrowArray, source: DataType, target: DataType) -> ArrowArray:
    """Cast a column read with Paimon type ``source`` to ``target`` (Java cast semantics) and to
    ``target``'s exact Arrow type."""
    target_arrow = to_arrow_type(target)
    if isinstance(source, RowType) and isinstance(target, RowType):
        return _cast_row(arr, source, target)
    src, dst = source.root, target.root
    try:
        if not _same_type(source, target):
            if dst in _STRING_ROOTS:
                arr = _to_string(arr, source, target)
            elif src in _FLOAT_ROOTS and dst in _INTEGER_ROOTS:
                return _float_to_integer(arr, target_arrow)
            elif src in _STRING_ROOTS and dst in (TypeRoot.BINARY, TypeRoot.VARBINARY):
                arr = pc.cast(arr, pa.binary())
            elif src in _STRING_ROOTS or dst in (TypeRoot.BOOLEAN, TypeRoot.DATE):
                arr = pc.cast(arr, target_arrow)  # parsing: invalid text is an error, as in Java
            else:
                arr = pc.cast(arr, target_arrow, safe=False)
        if arr.type != target_arrow:
            arr = pc.cast(arr, target_arrow, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise UnsupportedError(f"cannot cast {source} to {target}: {e}") from e
    return arr


def evolve_columns(
    table: pa.Table,
    file_fields: Mapping[int, tuple[str, DataType]],
    target: Sequence[tuple[int, str, DataType]],
    *,
    fill: Mapping[int, pa.Array] | None = None,
) -> list[ArrowArray]:
    """The target columns of one file's ``table``: by field id from ``file_fields`` (id -> (column
    name, type in the file's schema)), else from ``fill`` (e.g. partition values), else nulls."""
    out: list[ArrowArray] = []
    names = set(table.column_names)
    for fid, name, dtype in target:
        source = file_fields.get(fid)
        if source is not None and source[0] in names:
            col = table.column(source[0])
            try:
                out.append(cast_array(col, source[1], dtype))
            except UnsupportedError as e:
                raise ValidationError(f"column {name!r} (field id {fid}): {e.message}", field=name) from e
        elif fill is not None and fid in fill:
            out.append(fill[fid])
        else:
            out.append(pa.nulls(table.num_rows, to_arrow_type(dtype)))
    return out
