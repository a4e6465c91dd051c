"""Java Paimon's casts (``CastExecutors`` and its rules), value for value, on Arrow arrays.

A data file written before ``ALTER TABLE ... MODIFY COLUMN`` is read with its old type and cast to the
new one exactly as Java's ``SchemaEvolutionUtil`` does: ROW fields by field id, ARRAY elements and MAP
values element by element (MAP keys must not change), any other pair through the rule
``CastExecutors.resolve`` finds. :func:`can_cast` is what ``updateColumnType`` allows
(``DataTypeCasts.supportsExplicitCast`` and a rule that resolves).

The rules, as Java has them (apache/paimon 2.x):

* integer -> integer wraps (Java's narrowing); float -> integer is Java's ``(long)``/``(int)`` cast
  (NaN 0, saturating), then a wrap to SMALLINT/TINYINT; integers to FLOAT/DOUBLE round to nearest;
* DECIMAL: ``BigDecimal`` rounded HALF_UP to the target scale, **null** when the precision overflows;
  from FLOAT/DOUBLE through ``Double.toString`` (NaN and infinities throw); to an integer truncated
  towards zero, then wrapped; to DOUBLE as ``unscaled / 10^scale`` in double arithmetic (precision
  <= 18);
* BOOLEAN -> numeric 1/0; integer -> BOOLEAN ``!= 0``;
* to STRING: ``Integer/Long.toString``, ``Float/Double.toString``, ``BigDecimal.toPlainString``,
  ``true``/``false``, then truncated to the length (CHAR also padded); DATE, TIME and TIMESTAMP only to
  ``STRING`` itself (Java has no rule to VARCHAR(n)/CHAR(n)); BINARY -> STRING keeps the bytes (no
  length applied);
* from STRING: :mod:`paimon_meta.table.casting.java_parse` (bad values fail the read, as they fail Java's);
* BINARY(n) pads with zero bytes and truncates, VARBINARY(n) truncates;
* TIMESTAMP -> TIMESTAMP of a lower precision: ``DateTimeUtils.truncate`` (up to millisecond precision
  the epoch millis are truncated towards zero); -> DATE/TIME floor of the epoch millis; -> INT/BIGINT
  epoch seconds truncated towards zero (INT wraps); DATE/TIME -> TIMESTAMP; INT/BIGINT seconds ->
  TIMESTAMP (``* 1000``, wrapping).

TIMESTAMP_LTZ casts take the session time zone as UTC (as everywhere in paimon_meta). Java 0.9/1.0 read
some values otherwise, fixed since upstream (tests/interop/test_java_casts.py lists each): a numeric
STRING as a TIMESTAMP epoch (#4246) or with a leading ``-`` (#5710), the ``'T'`` separator (#9115), a
BIGINT beyond int range to BOOLEAN (#4519), TIMESTAMP -> DATE/TIME before 1970 (#9203), and truncation of
nanoseconds with fewer digits than the precision (#8767); they cast no ARRAY/MAP elements at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import to_arrow_type
from paimon_meta.model.types import (
    MAX_LENGTH,
    ArrayType,
    AtomicType,
    DataType,
    MapType,
    RowType,
    TypeRoot,
)
from paimon_meta.table.casting import java_parse as jp
from paimon_meta.table.casting.java_text import (
    java_date_text,
    java_double_to_string,
    java_float_to_string,
    java_timestamp_text,
    sql_time_text,
)

# pa.Array | pa.ChunkedArray: pyarrow ships no type information, so mypy sees Any either way.
ArrowArray: TypeAlias = Any
CastFn: TypeAlias = Callable[[pa.Array], pa.Array]

T = TypeRoot
INTEGER_BITS = {T.TINYINT: 8, T.SMALLINT: 16, T.INT: 32, T.BIGINT: 64}
FLOATS = (T.FLOAT, T.DOUBLE)
STRINGS = (T.CHAR, T.VARCHAR)
BINARIES = (T.BINARY, T.VARBINARY)
TIMESTAMPS = (T.TIMESTAMP, T.TIMESTAMP_LTZ)
NUMERIC = (*INTEGER_BITS, *FLOATS, T.DECIMAL)
_PREDEFINED = (T.BOOLEAN, *NUMERIC, *STRINGS, *BINARIES, T.DATE, T.TIME, *TIMESTAMPS)
_CONSTRUCTED = (T.ARRAY, T.MULTISET, T.MAP, T.ROW)
_DATETIME = (T.DATE, T.TIME, *TIMESTAMPS)
_MILLIS_PER_DAY = 86_400_000
_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1000, "ns": 1}


# ---- which casts exist (DataTypeCasts.supportsExplicitCast) ------------------------------------------

_NUMBER_SOURCES = (*NUMERIC, *STRINGS, T.BOOLEAN, *TIMESTAMPS)
_EXPLICIT: dict[TypeRoot, tuple[TypeRoot, ...]] = {
    T.CHAR: (*_PREDEFINED, *_CONSTRUCTED),
    T.VARCHAR: (*_PREDEFINED, *_CONSTRUCTED),
    T.BOOLEAN: (T.BOOLEAN, *STRINGS, *INTEGER_BITS),
    T.BINARY: (*BINARIES, *STRINGS),
    T.VARBINARY: (*BINARIES, *STRINGS),
    T.DECIMAL: _NUMBER_SOURCES,
    **{root: _NUMBER_SOURCES for root in (*INTEGER_BITS, *FLOATS)},
    T.DATE: (T.DATE, *TIMESTAMPS, *STRINGS),
    T.TIME: (T.TIME, *TIMESTAMPS, *STRINGS),
    T.TIMESTAMP: (*_DATETIME, *STRINGS, *NUMERIC),
    T.TIMESTAMP_LTZ: (*_DATETIME, *STRINGS, *NUMERIC),
}


_IMPLICIT: dict[TypeRoot, tuple[TypeRoot, ...]] = {
    T.VARCHAR: STRINGS,
    T.VARBINARY: BINARIES,
    T.DECIMAL: NUMERIC,
    T.SMALLINT: (T.TINYINT, T.SMALLINT),
    T.INT: (T.TINYINT, T.SMALLINT, T.INT),
    T.BIGINT: tuple(INTEGER_BITS),
    T.FLOAT: (*INTEGER_BITS, T.FLOAT, T.DECIMAL),
    T.DOUBLE: NUMERIC,
    T.DATE: (T.DATE, T.TIMESTAMP),
    T.TIME: (T.TIME, T.TIMESTAMP),
    T.TIMESTAMP: TIMESTAMPS,
    T.TIMESTAMP_LTZ: TIMESTAMPS,
}


def supports_implicit_cast(source: DataType, target: DataType) -> bool:
    """``DataTypeCasts.supportsImplicitCast``: widening without losing information, by type root."""
    if _same_type(source, target):
        return True
    return source.root in _IMPLICIT.get(target.root, (target.root,))


def supports_explicit_cast(source: DataType, target: DataType) -> bool:
    """``DataTypeCasts.supportsExplicitCast``: the SQL ``CAST`` matrix by type root."""
    if _same_type(source, target):
        return True
    return source.root in _EXPLICIT.get(target.root, (target.root,))


def can_cast(source: DataType, target: DataType, *, allow_explicit: bool = True) -> bool:
    """Whether Java's ``updateColumnType`` lets a column of ``source`` become ``target``
    (``allow_explicit=False``: the table has ``disable-explicit-type-casting``)."""
    supported = supports_explicit_cast if allow_explicit else supports_implicit_cast
    if not supported(source, target):
        return False
    if _same_type(source, target):
        return True
    if isinstance(source, AtomicType) and isinstance(target, AtomicType):
        return resolve(source, target) is not None
    return False


def _same_type(a: DataType, b: DataType) -> bool:
    return a.with_nullable(True) == b.with_nullable(True)


def _is_string_type(t: DataType) -> bool:
    """``VarCharType.STRING_TYPE`` (nullable VARCHAR(MAX)): the only target of DATE/TIME/TIMESTAMP."""
    return t.root is T.VARCHAR and isinstance(t, AtomicType) and t.length == MAX_LENGTH and t.nullable


# ---- value helpers ---------------------------------------------------------------------------------


def _map(arr: pa.Array, fn: Callable[[Any], Any], out_type: pa.DataType) -> pa.Array:
    out: list[Any] = []
    for value in arr.to_pylist():
        if value is None:
            out.append(None)
            continue
        try:
            out.append(fn(value))
        except jp.JavaCastError as e:
            raise jp.JavaCastError(f"value {value!r}: {e}") from e
    return pa.array(out, type=out_type)


def _ints(arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """The values as int64 (nulls as 0) and the null mask (None without nulls)."""
    mask = np.asarray(arr.is_null()) if arr.null_count else None
    values = np.asarray(pc.fill_null(arr.cast(pa.int64()), 0), dtype=np.int64)
    return values, mask


def _from_ints(values: np.ndarray, mask: np.ndarray | None, target: pa.DataType) -> pa.Array:
    storage = pa.int32() if pa.types.is_date32(target) or pa.types.is_time32(target) else pa.int64()
    if pa.types.is_integer(target):
        storage = target
    return pa.array(values, storage, mask=mask).cast(target)


def _fit_string(target: DataType) -> Callable[[str], str]:
    """``BinaryStringUtils.toCharacterString``: VARCHAR(n) truncates to n code points, CHAR(n) also
    pads with spaces."""
    assert isinstance(target, AtomicType) and target.length is not None
    n, pad = target.length, target.root is T.CHAR
    if n == MAX_LENGTH:
        return lambda s: s
    return lambda s: s[:n].ljust(n) if pad else s[:n]


def _fit_binary(target: DataType) -> Callable[[bytes], bytes]:
    """``BinaryStringUtils.toBinaryString``: BINARY(n) pads with zero bytes and truncates, VARBINARY(n)
    truncates."""
    assert isinstance(target, AtomicType) and target.length is not None
    n, pad = target.length, target.root is T.BINARY
    return lambda b: b[:n].ljust(n, b"\0") if pad else b[:n]


# ---- Paimon Timestamps: (epoch millis, nano of milli) ----------------------------------------------


def _timestamp_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Epoch millis, nano of milli (>= 0, as Paimon's ``Timestamp``) and the null mask."""
    per_unit = _NANOS_PER_UNIT[arr.type.unit]
    raw, mask = _ints(arr.cast(pa.timestamp(arr.type.unit)))
    if per_unit >= 1_000_000:  # s or ms
        return raw * (per_unit // 1_000_000), np.zeros_like(raw), mask
    millis, rest = np.divmod(raw, 1_000_000 // per_unit)
    return millis, rest * per_unit, mask


def _timestamps(millis: np.ndarray, nanos: np.ndarray, mask: np.ndarray | None, target: DataType) -> pa.Array:
    arrow = to_arrow_type(target)
    per_unit = _NANOS_PER_UNIT[arrow.unit]
    per_milli = 1_000_000 // per_unit
    live = millis if mask is None else millis[~mask]
    if live.size and (live.max() > jp.LONG_MAX // per_milli or live.min() < jp.LONG_MIN // per_milli):
        raise jp.JavaCastError(f"a timestamp is beyond the range of Arrow's timestamp[{arrow.unit}]")
    raw = millis * per_milli + nanos // per_unit
    return pa.array(raw, pa.int64(), mask=mask).cast(arrow)


def _truncate(millis: np.ndarray, nanos: np.ndarray, precision: int) -> tuple[np.ndarray, np.ndarray]:
    """``DateTimeUtils.truncate``: up to milliseconds the epoch millis lose digits (towards zero) and
    the nanoseconds go; above, the nano-of-milli digits beyond ``precision`` go."""
    if precision <= 3:
        step = 10 ** (3 - precision)
        truncated = np.where(millis < 0, -((-millis) // step), millis // step) * step
        return truncated, np.zeros_like(nanos)
    step = 10 ** (9 - precision)
    return millis, nanos // step * step


def _precision(t: DataType) -> int:
    value = getattr(t, "precision", None)
    return 6 if value is None else int(value)


# ---- the rules -------------------------------------------------------------------------------------


def _numeric_to_integer(source: DataType, bits: int) -> CastFn:
    """``Number.byteValue()`` ... ``longValue()``; floats through Java's ``(int)``/``(long)``."""
    dtype = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[bits]

    def fn(arr: pa.Array) -> pa.Array:
        mask = np.asarray(arr.is_null()) if arr.null_count else None
        if source.root in FLOATS:
            d = np.asarray(pc.fill_null(arr.cast(pa.float64()), 0.0), dtype=np.float64)
            d = np.where(np.isnan(d), 0.0, np.trunc(d))
            if bits == 64:
                ints = np.where(d >= 2.0**63, jp.LONG_MAX, np.where(d <= -(2.0**63), jp.LONG_MIN, 0)).astype(
                    np.int64
                )
                inside = (d < 2.0**63) & (d > -(2.0**63))
                ints[inside] = d[inside].astype(np.int64)
            else:
                ints = np.clip(d, jp.INT_MIN, jp.INT_MAX).astype(np.int64)
        else:
            ints, _ = _ints(arr)
        return pa.array(ints.astype(dtype), mask=mask)  # astype wraps, as Java's narrowing

    return fn


def _numeric_to_float(target: DataType) -> CastFn:
    dtype = np.float32 if target.root is T.FLOAT else np.float64

    def fn(arr: pa.Array) -> pa.Array:
        mask = np.asarray(arr.is_null()) if arr.null_count else None
        filled = pc.fill_null(arr, 0 if pa.types.is_integer(arr.type) else 0.0)
        with np.errstate(over="ignore"):  # a double beyond float's range is infinite, as Java's (float)
            values = np.asarray(filled.to_numpy(zero_copy_only=False)).astype(dtype)
        return pa.array(values, mask=mask)

    return fn


def _decimal_to_number(source: DataType, target: DataType) -> CastFn:
    precision = getattr(source, "precision", 38) or 38
    arrow = to_arrow_type(target)
    if target.root in INTEGER_BITS:
        bits = INTEGER_BITS[target.root]
        # DecimalUtils.castToIntegral: setScale(0, DOWN).longValue() (wraps), then Java's narrowing
        return lambda arr: _map(arr, lambda d: jp.wrap(jp.wrap(int(d), 64), bits), arrow)

    def to_double(d: Decimal) -> float:
        exponent = d.as_tuple().exponent
        assert isinstance(exponent, int)
        if precision <= 18:  # DecimalUtils.doubleValue of a compact decimal: double arithmetic
            return float(int(d.scaleb(-exponent))) / float(10**-exponent)
        return float(d)

    if target.root is T.FLOAT:
        return lambda arr: _map(arr, lambda d: float(np.float32(to_double(d))), arrow)
    return lambda arr: _map(arr, to_double, arrow)


def _to_decimal(source: DataType, target: DataType) -> CastFn:
    p, s = getattr(target, "precision", 38) or 38, getattr(target, "scale", 0) or 0
    arrow = to_arrow_type(target)
    root = source.root

    def value(v: Any) -> Decimal:
        if root in FLOATS:  # BigDecimal.valueOf(double): Double.toString's digits
            if not math.isfinite(v):
                raise jp.JavaCastError("Infinite or NaN")
            return Decimal(java_double_to_string(float(np.float32(v)) if root is T.FLOAT else v))
        if root is T.BOOLEAN:
            return Decimal(int(v))
        if root in STRINGS:
            return jp.parse_big_decimal(v)
        return Decimal(v)

    return lambda arr: _map(arr, lambda v: jp.decimal_fit(value(v), p, s), arrow)


def _to_string(source: DataType, target: DataType) -> CastFn | None:
    root = source.root
    fit = _fit_string(target)
    out = pa.string()
    if root in INTEGER_BITS:
        return lambda arr: _map(arr, lambda v: fit(str(v)), out)
    if root is T.FLOAT:
        return lambda arr: _map(arr, lambda v: fit(java_float_to_string(v)), out)
    if root is T.DOUBLE:
        return lambda arr: _map(arr, lambda v: fit(java_double_to_string(v)), out)
    if root is T.DECIMAL:
        return lambda arr: _map(arr, lambda v: fit(format(v, "f")), out)
    if root is T.BOOLEAN:
        return lambda arr: _map(arr, lambda v: fit("true" if v else "false"), out)
    if root in STRINGS:
        return lambda arr: _map(arr, fit, out)
    if root in BINARIES:  # BinaryString.fromBytes: no length applied
        return lambda arr: _map(arr, lambda b: bytes(b).decode("utf-8", errors="replace"), out)
    if not _is_string_type(target):
        return None  # DATE/TIME/TIMESTAMP rules are registered for STRING only
    if root is T.DATE:
        return lambda arr: _map(arr.cast(pa.int32()), java_date_text, out)
    if root is T.TIME:
        precision = getattr(source, "precision", 0) or 0
        return lambda arr: _map(arr.cast(pa.int32()), lambda ms: sql_time_text(ms, precision), out)
    if root in TIMESTAMPS:
        precision = _precision(source)

        def timestamps(arr: pa.Array) -> pa.Array:
            millis, nanos, mask = _timestamp_parts(arr)
            texts = [
                None if mask is not None and mask[i] else java_timestamp_text(int(ms), int(ns), precision)
                for i, (ms, ns) in enumerate(zip(millis, nanos))
            ]
            return pa.array(texts, out)

        return timestamps
    return None


def _from_string(target: DataType) -> CastFn | None:
    root = target.root
    arrow = to_arrow_type(target)
    if root is T.BOOLEAN:
        return lambda arr: _map(arr, jp.to_boolean, arrow)
    if root in INTEGER_BITS:
        parse = {8: jp.to_byte, 16: jp.to_short, 32: jp.to_int, 64: jp.to_long}[INTEGER_BITS[root]]
        return lambda arr: _map(arr, parse, arrow)
    if root is T.FLOAT:
        return lambda arr: _map(arr, jp.parse_float, arrow)
    if root is T.DOUBLE:
        return lambda arr: _map(arr, jp.parse_double, arrow)
    if root in BINARIES:
        fit = _fit_binary(target)
        return lambda arr: _map(arr, lambda s: fit(s.encode("utf-8")), arrow)
    if root is T.DATE:
        return lambda arr: _map(arr, jp.to_date, pa.int32()).cast(arrow)
    if root is T.TIME:
        return lambda arr: _map(arr, jp.to_time, pa.int32()).cast(arrow)
    if root in TIMESTAMPS:
        precision = _precision(target)
        ltz = root is T.TIMESTAMP_LTZ

        def timestamps(arr: pa.Array) -> pa.Array:
            millis = np.zeros(len(arr), dtype=np.int64)
            nanos = np.zeros(len(arr), dtype=np.int64)
            for i, text in enumerate(arr.to_pylist()):
                if text is not None:
                    try:
                        millis[i], nanos[i] = jp.to_timestamp(text, precision, local_zone=ltz)
                    except jp.JavaCastError as e:
                        raise jp.JavaCastError(f"value {text!r}: {e}") from e
            mask = np.asarray(arr.is_null()) if arr.null_count else None
            return _timestamps(millis, nanos, mask, target)

        return timestamps
    return None


def _from_timestamp(source: DataType, target: DataType) -> CastFn | None:
    root = target.root
    if root in TIMESTAMPS:
        source_precision, target_precision = _precision(source), _precision(target)

        def timestamps(arr: pa.Array) -> pa.Array:
            millis, nanos, mask = _timestamp_parts(arr)
            if target_precision < source_precision:
                millis, nanos = _truncate(millis, nanos, target_precision)
            return _timestamps(millis, nanos, mask, target)

        return timestamps
    if root in (T.DATE, T.TIME, T.INT, T.BIGINT):

        def numbers(arr: pa.Array) -> pa.Array:
            millis, _, mask = _timestamp_parts(arr)
            if root is T.DATE:
                values = millis // _MILLIS_PER_DAY
            elif root is T.TIME:
                values = millis % _MILLIS_PER_DAY
            else:  # DateTimeUtils.unixTimestamp: millis / 1000, truncated towards zero
                values = np.where(millis < 0, -((-millis) // 1000), millis // 1000)
                if root is T.INT:
                    values = values.astype(np.int32).astype(np.int64)  # Java's (int) wraps
            return _from_ints(values, mask, to_arrow_type(target))

        return numbers
    return None


def _to_timestamp(source: DataType, target: DataType) -> CastFn | None:
    root = source.root
    if root not in (T.DATE, T.TIME, T.INT, T.BIGINT):
        return None  # NumericPrimitiveToTimestamp has no executor for other numbers

    def fn(arr: pa.Array) -> pa.Array:
        values, mask = _ints(arr.cast(pa.int32()) if root in (T.DATE, T.TIME) else arr)
        if root is T.DATE:
            millis = values * _MILLIS_PER_DAY
        elif root is T.TIME:
            millis = values
        else:  # seconds; Java's long multiplication wraps
            millis = values * 1000
        return _timestamps(millis, np.zeros_like(millis), mask, target)

    return fn


def resolve(source: DataType, target: DataType) -> CastFn | None:
    """``CastExecutors.resolve``: the cast of atomic ``source`` values to ``target``, or None when Java
    has no rule for the pair."""
    src, dst = source.root, target.root
    if dst in STRINGS:
        return _to_string(source, target)
    if dst is T.DECIMAL and src in (*NUMERIC, T.BOOLEAN, *STRINGS):
        return _to_decimal(source, target)
    if src in STRINGS:
        return _from_string(target)
    if src in TIMESTAMPS:
        return _from_timestamp(source, target)
    if dst in TIMESTAMPS:
        return _to_timestamp(source, target)
    if src is T.DECIMAL and dst in (*INTEGER_BITS, *FLOATS):
        return _decimal_to_number(source, target)
    if src in (*INTEGER_BITS, *FLOATS) and dst in INTEGER_BITS:
        return _numeric_to_integer(source, INTEGER_BITS[dst])
    if src in (*INTEGER_BITS, *FLOATS) and dst in FLOATS:
        return _numeric_to_float(target)
    if src is T.BOOLEAN and dst in (*INTEGER_BITS, *FLOATS):
        out = to_arrow_type(target)
        return lambda arr: arr.cast(pa.int8()).cast(out)
    if src in INTEGER_BITS and dst is T.BOOLEAN:
        return lambda arr: pc.not_equal(arr, 0)
    if src in BINARIES and dst in BINARIES:
        fit = _fit_binary(target)
        return lambda arr: _map(arr, lambda b: fit(bytes(b)), pa.binary())
    return None


# ---- nested types and the entry point ---------------------------------------------------------------


def _cast_row(arr: pa.Array, source: RowType, target: RowType) -> pa.Array:
    by_id = {f.id: (i, f) for i, f in enumerate(source.fields)}
    children = []
    for f in target.fields:
        hit = by_id.get(f.id)
        if hit is None:
            children.append(pa.nulls(len(arr), to_arrow_type(f.type)))
        else:
            i, sf = hit
            children.append(_cast(arr.field(i), sf.type, f.type))
    struct_type = to_arrow_type(target)
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask)


def _cast(arr: pa.Array, source: DataType, target: DataType) -> pa.Array:
    target_arrow = to_arrow_type(target)
    if _same_type(source, target):
        out = arr
    elif isinstance(source, RowType) and isinstance(target, RowType):
        return _cast_row(arr, source, target)
    elif isinstance(source, ArrayType) and isinstance(target, ArrayType):
        values = _cast(arr.values, source.element, target.element)
        mask = arr.is_null() if arr.null_count else None
        out = pa.ListArray.from_arrays(arr.offsets, values, type=target_arrow, mask=mask)
    elif isinstance(source, MapType) and isinstance(target, MapType):
        if source.key != target.key:
            raise UnsupportedError(
                f"Cannot cast map type {source} to map type {target}, because they have different key types."
            )
        items = _cast(arr.items, source.value, target.value)
        mask = arr.is_null() if arr.null_count else None
        out = pa.MapArray.from_arrays(arr.offsets, arr.keys, items, type=target_arrow, mask=mask)
    else:
        fn = (
            resolve(source, target)
            if isinstance(source, AtomicType) and isinstance(target, AtomicType)
            else None
        )
        if fn is None:
            raise UnsupportedError(f"Cannot cast from type {source} to type {target}")
        out = fn(arr)
    if out.type != target_arrow:
        out = pc.cast(out, target_arrow, safe=False)
    return out


def cast_array(arr: ArrowArray, source: DataType, target: DataType) -> ArrowArray:
    """Cast a column read with Paimon type ``source`` to ``target`` as Java's schema evolution does,
    into ``target``'s Arrow type. ``UnsupportedError`` when Java has no cast for the pair,
    ``ValidationError`` naming the value when Java's cast throws on one."""
    try:
        if isinstance(arr, pa.ChunkedArray):
            chunks = [_cast(chunk, source, target) for chunk in arr.chunks]
            return pa.chunked_array(chunks, type=to_arrow_type(target))
        return _cast(arr, source, target)
    except jp.JavaCastError as e:
        raise ValidationError(
            f"cannot cast {source} to {target}: {e}", source=str(source), target=str(target)
        ) from e
