"""Bound rules (:mod:`paimon_meta.governance.rules`) evaluated over Arrow record batches, as Java's
``LeafPredicate.test`` and ``Transform.transform`` evaluate them row by row.

Null semantics are Java's, which are two-valued: a comparison with a null value or a null literal is
false (not unknown), ``IN`` skips null literals and ``NOT IN`` with a null literal is false, ``IS_NULL``
is the only test true on null; ``AND``/``OR`` then combine plain booleans. Orders are Java's
``compareTo``: numbers by value except FLOAT/DOUBLE, which follow ``Float/Double.compare`` (NaN equals
itself and is above +inf, -0.0 is below 0.0); strings and bytes bytewise (UTF-8 order is code point
order); dates, times and timestamps by instant. A transform propagates nulls as Java's do
(``CONCAT`` is null when any input is, ``CONCAT_WS`` skips null values, ...); positions are one-based,
as ``BinaryString.substringSQL`` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import PolicyRuleError, ValidationError
from paimon_meta.governance.literals import Timestamp
from paimon_meta.governance.rules import FLOATS, FieldRef, Input, Leaf, Predicate, Transform, position_value
from paimon_meta.model.types import TypeRoot
from paimon_meta.table.casting.casts import cast_array

T = TypeRoot
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_UNIT_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
# Java's regex '.' (LIKE's '_') matches any character but a line terminator.
_ANY_BUT_LINE_END = "[^\\n\\r\\x{85}\\x{2028}\\x{2029}]"


def predicate_mask(predicate: Predicate, batch: pa.RecordBatch) -> pa.Array:
    """The rows of ``batch`` the predicate keeps: a boolean array without nulls."""
    if isinstance(predicate, Leaf):
        return _leaf(predicate, batch)
    masks = [predicate_mask(c, batch) for c in predicate.children]
    combine = pc.and_ if predicate.function == "AND" else pc.or_
    out = masks[0]
    for m in masks[1:]:
        out = combine(out, m)
    return out


def transform_values(
    transform: Transform, batch: pa.RecordBatch, null_type: pa.DataType | None = None
) -> pa.Array:
    """The transform's value for each row of ``batch`` (``null_type``: the type of ``NULL``'s output;
    a mask's is its column's)."""
    n = batch.num_rows
    name = transform.name
    if name == "NULL":
        return pa.nulls(n, type=null_type or pa.bool_())
    if name == "FIELD_REF":
        return _column(batch, transform.inputs[0])
    if name == "CAST":
        ref = transform.inputs[0]
        assert isinstance(ref, FieldRef) and transform.cast_to is not None
        try:
            return cast_array(_column(batch, ref), ref.type, transform.cast_to)
        except ValidationError as e:
            raise PolicyRuleError(
                f"CAST of {ref.name!r}: {e}", rule="rule", reason="type", name="CAST"
            ) from e
    if name in _DATE_PARTS:
        return _date_part(name, _column(batch, transform.inputs[0]))
    strings = [
        _strings(i, batch) if not _is_position(name, k) else None for k, i in enumerate(transform.inputs)
    ]
    if name in ("UPPER", "LOWER"):
        return (pc.utf8_upper if name == "UPPER" else pc.utf8_lower)(strings[0])
    if name == "CONCAT":
        return pc.binary_join_element_wise(*strings, "")
    if name == "CONCAT_WS":
        return _concat_ws(strings[0], strings[1:])
    if name == "LENGTH":
        return pc.cast(pc.utf8_length(strings[0]), pa.int32())
    if name == "BIT_LENGTH":
        return pc.cast(pc.multiply(pc.binary_length(strings[0]), 8), pa.int32())
    if name == "TRIM":
        return _trim(transform, batch, strings)
    per_row = _PER_ROW[name]
    args = [
        _positions(i, batch) if _is_position(name, k) else _values(strings[k])
        for k, i in enumerate(transform.inputs)
    ]
    out = [per_row(transform, *row) for row in zip(*args, strict=True)]
    return pa.array(out, type=pa.string())


# ---- leaves ------------------------------------------------------------------------------------------


def _leaf(leaf: Leaf, batch: pa.RecordBatch) -> pa.Array:
    n = batch.num_rows
    function = leaf.function
    if function in ("TRUE", "FALSE"):
        return pa.array(np.full(n, function == "TRUE"), type=pa.bool_())
    values = transform_values(leaf.transform, batch)
    if function == "IS_NULL":
        return pc.is_null(values)
    if function == "IS_NOT_NULL":
        return pc.is_valid(values)
    if function == "IS_NAN":
        return pc.fill_null(pc.is_nan(values), False)
    lits = leaf.literals
    if function in ("IN", "NOT_IN"):
        if function == "NOT_IN" and any(v is None for v in lits):
            return _constant(False, n)
        keys, scalars = _comparable(values, leaf, [v for v in lits if v is not None])
        if not scalars:
            return _constant(False, n)
        found = pc.is_in(keys, value_set=pa.array(scalars, type=keys.type))
        hit = found if function == "IN" else pc.invert(found)
        return pc.and_(pc.fill_null(hit, False), pc.is_valid(values))
    if any(v is None for v in lits):
        return _constant(False, n)  # a null literal: Java's comparison is false
    if function in ("STARTS_WITH", "ENDS_WITH", "CONTAINS", "LIKE"):
        return pc.fill_null(_string_test(function, values, lits[0]), False)
    keys, scalars = _comparable(values, leaf, list(lits))
    if function in ("BETWEEN", "NOT_BETWEEN"):
        low, high = scalars
        if function == "BETWEEN":
            result = pc.and_(pc.greater_equal(keys, low), pc.less_equal(keys, high))
        else:
            result = pc.or_(pc.less(keys, low), pc.greater(keys, high))
        return pc.fill_null(result, False)
    compare = {
        "EQUAL": pc.equal,
        "NOT_EQUAL": pc.not_equal,
        "LESS_THAN": pc.less,
        "LESS_OR_EQUAL": pc.less_equal,
        "GREATER_THAN": pc.greater,
        "GREATER_OR_EQUAL": pc.greater_equal,
    }[function]
    return pc.fill_null(compare(keys, scalars[0]), False)


def _comparable(values: pa.Array, leaf: Leaf, lits: list[Any]) -> tuple[pa.Array, list[pa.Scalar]]:
    """``values`` and the literals as arrays/scalars that Arrow orders as Java does."""
    root = leaf.transform.output.root
    if root in FLOATS:
        width = 32 if root is T.FLOAT else 64
        return _float_keys(values, width), [pa.scalar(_float_key(float(v), width)) for v in lits]
    return values, [_scalar(v, values.type) for v in lits]


def _scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    if isinstance(value, Timestamp):
        nanos = _UNIT_NANOS[arrow_type.unit]
        return pa.scalar(value.seconds * (10**9 // nanos) + value.nanos // nanos, type=arrow_type)
    if isinstance(value, Decimal) and pa.types.is_decimal(arrow_type):
        return pa.scalar(value, type=arrow_type)
    if pa.types.is_time(arrow_type):  # TIME literals are milliseconds of the day
        unit = _UNIT_NANOS[arrow_type.unit]
        return pa.scalar(value * 10**6 // unit, type=arrow_type)
    return pa.scalar(value, type=arrow_type)


def _float_key(value: float, width: int) -> int:
    """``Float/Double.compare`` as an integer order: the bits of the (NaN-canonical) value, negative
    ones with their magnitude bits flipped."""
    array = _float_keys(pa.array([value], type=pa.float32() if width == 32 else pa.float64()), width)
    return int(array[0].as_py())


def _float_keys(values: pa.Array, width: int) -> pa.Array:
    floats = np.asarray(
        values.cast(pa.float32() if width == 32 else pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
    )
    floats = np.where(np.isnan(floats), np.float32("nan") if width == 32 else np.float64("nan"), floats)
    bits = floats.view(np.int32 if width == 32 else np.int64).astype(np.int64)
    flip = (1 << (width - 1)) - 1
    keys = np.where(bits < 0, bits ^ flip, bits)
    mask = np.asarray(values.is_null().to_numpy(zero_copy_only=False)) if values.null_count else None
    return pa.array(keys, type=pa.int64(), mask=mask)


def _string_test(function: str, values: pa.Array, literal: str) -> pa.Array:
    if function == "STARTS_WITH":
        return pc.starts_with(values, pattern=literal)
    if function == "ENDS_WITH":
        return pc.ends_with(values, pattern=literal)
    if function == "CONTAINS":
        return pc.match_substring(values, pattern=literal)
    return pc.match_substring_regex(values, pattern=like_regex(literal))


def like_regex(pattern: str) -> str:
    """Java's ``Like.sqlToRegexLike`` for RE2, anchored (``matches()``): ``%`` any text, ``_`` one
    character but a line end, ``\\`` escapes ``%``, ``_`` and itself (others were refused when the rule
    was parsed)."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(_literal_char(pattern[i + 1]))
            i += 2
            continue
        out.append("(?s:.*)" if c == "%" else _ANY_BUT_LINE_END if c == "_" else _literal_char(c))
        i += 1
    return "\\A(?:" + "".join(out) + ")\\z"


def _literal_char(c: str) -> str:
    return c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}"


def _constant(value: bool, n: int) -> pa.Array:
    return pa.array(np.full(n, value), type=pa.bool_())


# ---- transforms ----------------------------------------------------------------------------------------

_DATE_PARTS: dict[str, Callable[[Any], Any]] = {
    "YEAR": pc.year,
    "MONTH": pc.month,
    "DAY": pc.day,
    "HOUR": pc.hour,
    "MINUTE": pc.minute,
    "SECOND": pc.second,
    "QUARTER": pc.quarter,
    "DAY_OF_YEAR": pc.day_of_year,
    "WEEKDAY": lambda c: pc.day_of_week(c, count_from_zero=True, week_start=1),
    "ISO_DAY_OF_WEEK": lambda c: pc.day_of_week(c, count_from_zero=False, week_start=1),
    "DAY_OF_WEEK": lambda c: pc.day_of_week(c, count_from_zero=False, week_start=7),
    "WEEK": pc.iso_week,
    "YEAR_OF_WEEK": pc.iso_year,
}


def _date_part(name: str, column: pa.Array) -> pa.Array:
    """Java's ``DateExtractTransform``: a DATE is read at the start of its day."""
    if pa.types.is_date(column.type):
        column = pc.cast(column, pa.timestamp("us"))
    return pc.cast(_DATE_PARTS[name](column), pa.int32())


def _column(batch: pa.RecordBatch, ref: Input) -> pa.Array:
    assert isinstance(ref, FieldRef)
    index = batch.schema.get_field_index(ref.name)
    if index < 0:
        raise PolicyRuleError(
            f"column {ref.name!r} is not among the columns read {batch.schema.names}",
            rule="rule",
            reason="column",
            column=ref.name,
        )
    column = batch.column(index)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_large_string(column.type) or pa.types.is_string_view(column.type):
        column = column.cast(pa.string())
    return column


def _strings(value: Input, batch: pa.RecordBatch) -> pa.Array:
    if isinstance(value, FieldRef):
        return _column(batch, value)
    if value is None:
        return pa.nulls(batch.num_rows, type=pa.string())
    return pa.array(np.full(batch.num_rows, value, dtype=object), type=pa.string())


def _is_position(name: str, k: int) -> bool:
    return (name, k) in {("SUBSTRING", 1), ("SUBSTRING", 2), ("OVERLAY", 2), ("OVERLAY", 3), ("PAD", 1)}


def _values(array: pa.Array | None) -> list[Any]:
    assert array is not None
    return list(array.to_pylist())


def _positions(value: Input, batch: pa.RecordBatch) -> list[int | None]:
    if isinstance(value, FieldRef):
        return list(_column(batch, value).to_pylist())
    return [position_value(value)] * batch.num_rows


def _concat_ws(separator: pa.Array, values: Sequence[pa.Array]) -> pa.Array:
    """``CONCAT_WS``: null when the separator is, null values skipped. Row by row: Arrow's
    ``binary_join_element_wise(null_handling="skip")`` drops rows whose separator is null (pyarrow 26)."""
    columns = [_values(v) for v in values]
    out = [
        None if sep is None else sep.join(v for v in row if v is not None)
        for sep, *row in zip(_values(separator), *columns, strict=True)
    ]
    return pa.array(out, type=pa.string())


def _trim(transform: Transform, batch: pa.RecordBatch, strings: list[pa.Array | None]) -> pa.Array:
    source = strings[0]
    flag = transform.flag
    if len(transform.inputs) == 1:
        chars: Input = " "  # Java's one-argument TRIM trims spaces only
    else:
        chars = transform.inputs[1]
    if chars is None:
        return pa.nulls(batch.num_rows, type=pa.string())
    if isinstance(chars, str):
        kernel = {"BOTH": pc.utf8_trim, "LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}[flag or "BOTH"]
        return kernel(source, characters=chars)
    strip = {"BOTH": str.strip, "LEADING": str.lstrip, "TRAILING": str.rstrip}[flag or "BOTH"]
    per_row = zip(_values(source), _values(strings[1]), strict=True)
    return pa.array([None if v is None or c is None else strip(v, c) for v, c in per_row], type=pa.string())


def _wrap32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def _substring_sql(value: str, pos: int, length: int) -> str:
    """``BinaryString.substringSQL``: one-based, 0 reads as 1, negative counts from the end."""
    chars = len(value)
    start = pos - 1 if pos > 0 else (chars + pos if pos < 0 else 0)
    end = min(max(start + length, _INT_MIN), _INT_MAX)  # Java saturates the long end into an int
    if end <= start or start >= chars:
        return ""
    return value[max(start, 0) : min(max(end, 0), chars)]


def _substring(
    _t: Transform, value: str | None, pos: int | None, length: int | None = _INT_MAX
) -> str | None:
    if value is None or pos is None or length is None:
        return None
    return _substring_sql(value, pos, length)


def _overlay(
    _t: Transform, value: str | None, repl: str | None, pos: int | None, length: Any = -1
) -> str | None:
    if value is None or repl is None or pos is None or length is None:
        return None
    replaced = len(repl) if length < 0 else length
    # OverlayTransform computes pos - 1 and pos + replaced in 32-bit int arithmetic
    return (
        _substring_sql(value, 1, _wrap32(pos - 1))
        + repl
        + _substring_sql(value, _wrap32(pos + replaced), _INT_MAX)
    )


def _pad(t: Transform, value: str | None, length: int | None, pad: str | None) -> str | None:
    if value is None or length is None or pad is None:
        return None
    needed = length - len(value)
    if needed <= 0 or pad == "":
        return value[:length] if length > 0 else ""
    padding = pad * (needed // len(pad)) + pad[: needed % len(pad)]
    return padding + value if t.flag == "LEFT" else value + padding


def _translate(_t: Transform, value: str | None, matching: str | None, replacement: str | None) -> str | None:
    """``TranslateTransform``: the first mapping of a character wins; a character without a replacement
    (or mapped to U+0000) is deleted."""
    if value is None or matching is None or replacement is None:
        return None
    table: dict[str, str | None] = {}
    for i, ch in enumerate(matching):
        if ch not in table:
            mapped = replacement[i] if i < len(replacement) else None
            table[ch] = mapped if mapped is not None and mapped != "\x00" else None
    return "".join(ch if ch not in table else (table[ch] or "") for ch in value)


_PER_ROW: dict[str, Callable[..., str | None]] = {
    "SUBSTRING": _substring,
    "OVERLAY": _overlay,
    "PAD": _pad,
    "TRANSLATE": _translate,
}
