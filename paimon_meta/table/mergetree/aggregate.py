"""Java's field aggregators (``org.apache.paimon.mergetree.compact.aggregate.Field*Agg``, Paimon 1.0), applied
to whole key groups at once.

Rows arrive sorted in merge order (key, then sequence), cut into groups of one key by ``starts``. Each
function folds a group's values the way Java's ``agg(accumulator, input)`` / ``retract(accumulator, input)``
would, starting from a null accumulator, and returns one value per group (singleton groups are the caller's
business: Java's ``ReducerMergeFunctionWrapper`` returns a lone row as it is). Retractions (-U/-D) call
``retract``; a function without one fails as Java does, unless ``fields.<f>.ignore-retract`` makes it a
no-op.

What Java computes is reproduced value for value: integer sums and products wrap as Java's ``int``/``long``
arithmetic does, float sums are added in order in the column's precision, DECIMAL sums follow
``DecimalUtils.add`` (a compact precision keeps an over-precise result, a wide one becomes null), DECIMAL
products round HALF_UP to the column's scale and become null when too wide, ``min``/``max`` order floats
as ``Double.compare`` (-0.0 < 0.0 < NaN) and strings/bytes as unsigned bytes.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.types import AtomicType, DataType, TypeRoot

Index = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

PRIMARY_KEY = "primary-key"
SUM = "sum"
PRODUCT = "product"
MIN = "min"
MAX = "max"
LAST_VALUE = "last_value"
LAST_NON_NULL_VALUE = "last_non_null_value"
FIRST_VALUE = "first_value"
FIRST_NON_NULL_VALUE = "first_non_null_value"
FIRST_NOT_NULL_VALUE = "first_not_null_value"  # Java's legacy name of first_non_null_value
LISTAGG = "listagg"
BOOL_AND = "bool_and"
BOOL_OR = "bool_or"
IMPLEMENTED = frozenset(
    {
        PRIMARY_KEY,
        SUM,
        PRODUCT,
        MIN,
        MAX,
        LAST_VALUE,
        LAST_NON_NULL_VALUE,
        FIRST_VALUE,
        FIRST_NON_NULL_VALUE,
        LISTAGG,
        BOOL_AND,
        BOOL_OR,
    }
)
# Java's other FieldAggregatorFactory identifiers (1.0 and later): known, not implemented here.
NOT_IMPLEMENTED = frozenset(
    {
        "collect",
        "merge_map",
        "merge_map_with_keytime",
        "nested_update",
        "nested_partial_update",
        "theta_sketch",
        "hll_sketch",
        "rbm32",
        "rbm64",
    }
)
# retract() exists for these (FieldAggregator's default throws UnsupportedOperationException)
RETRACTABLE = frozenset({PRIMARY_KEY, SUM, PRODUCT, LAST_VALUE, LAST_NON_NULL_VALUE})
_NUMERIC = frozenset(
    {
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.FLOAT,
        TypeRoot.DOUBLE,
        TypeRoot.DECIMAL,
    }
)
_INT_BITS = {TypeRoot.TINYINT: 8, TypeRoot.SMALLINT: 16, TypeRoot.INT: 32, TypeRoot.BIGINT: 64}
_COMPARABLE = frozenset(
    {
        *_NUMERIC,
        TypeRoot.DATE,
        TypeRoot.TIME,
        TypeRoot.TIMESTAMP,
        TypeRoot.TIMESTAMP_LTZ,
        TypeRoot.BINARY,
        TypeRoot.VARBINARY,
        TypeRoot.CHAR,
        TypeRoot.VARCHAR,
    }
)
_COMPACT_DECIMAL_PRECISION = 18  # Decimal.MAX_COMPACT_PRECISION
_EXACT = decimal.Context(prec=100)  # wide enough that no DECIMAL(38) value or product rounds


@dataclass(frozen=True, slots=True)
class FieldFunction:
    """The aggregate function of one value field (``fields.<field>.aggregate-function`` resolved)."""

    field: str
    data_type: DataType
    name: str
    ignore_retract: bool = False
    delimiter: str = ","

    def check_type(self) -> None:
        """ValidationError with Java's message when the factory refuses the field's type."""
        root = self.data_type.root
        if self.name in (SUM, PRODUCT) and root not in _NUMERIC:
            raise ValidationError(
                f"Data type for {self.name} column must be 'NumericType' but was '{self.data_type}'.",
                field=self.field,
                function=self.name,
            )
        if self.name == LISTAGG and root is not TypeRoot.VARCHAR:
            raise ValidationError(
                f"Data type for list agg column must be 'VarCharType' but was '{self.data_type}'.",
                field=self.field,
                function=self.name,
            )
        if self.name in (BOOL_AND, BOOL_OR) and root is not TypeRoot.BOOLEAN:
            kind = "bool and" if self.name == BOOL_AND else "bool or"
            raise ValidationError(
                f"Data type for {kind} column must be 'BooleanType' but was '{self.data_type}'.",
                field=self.field,
                function=self.name,
            )

    @property
    def retracts(self) -> bool:
        """Whether a -U/-D row can reach this field without an error."""
        return self.ignore_retract or self.name in RETRACTABLE


def retraction_message(function: str) -> str:
    """Java's ``FieldAggregator.retract`` message."""
    return (
        f"Aggregate function '{function}' does not support retraction, If you allow this function to "
        "ignore retraction messages, you can configure 'fields.${field_name}.ignore-retract'='true'."
    )


class Groups:
    """Rows in merge order cut into key groups: ``starts[g]`` is group g's first row."""

    def __init__(self, starts: Index, n: int, kinds: npt.NDArray[np.int8]) -> None:
        self.n = n
        self.starts = starts
        self.count = len(starts)
        self.ends = np.append(starts[1:], n).astype(np.int64)
        self.lens = self.ends - starts
        self.last = self.ends - 1
        self.single = self.lens == 1
        self.row_group = np.repeat(np.arange(self.count, dtype=np.int64), self.lens)
        self.index = np.arange(n, dtype=np.int64)
        self.is_add = (kinds == 0) | (kinds == 2)  # +I, +U; -U and -D retract
        self.in_multi = ~self.single[self.row_group]

    def last_where(self, cond: Mask) -> Index:
        """Per group, the last row where ``cond`` holds (-1: none)."""
        return np.maximum.reduceat(np.where(cond, self.index, -1), self.starts)

    def first_where(self, cond: Mask) -> Index:
        """Per group, the first row where ``cond`` holds (-1: none)."""
        first = np.minimum.reduceat(np.where(cond, self.index, self.n), self.starts)
        return np.where(first == self.n, -1, first)

    def count_where(self, cond: Mask) -> npt.NDArray[np.int64]:
        return np.add.reduceat(cond.astype(np.int64), self.starts)


def valid_mask(column: pa.Array) -> Mask:
    if column.null_count == 0:
        return np.ones(len(column), dtype=bool)
    return np.asarray(column.is_valid(), dtype=bool)


def take(column: pa.Array, rows: Index) -> pa.Array:
    """``column`` at ``rows``, null where a row is -1."""
    rows = rows.astype(np.int64, copy=False)
    return column.take(pa.array(rows, pa.int64(), mask=rows < 0))


def aggregate(fn: FieldFunction, column: pa.Array, groups: Groups) -> pa.Array:
    """One value per group: ``fn`` folded over each group (see the module docstring)."""
    g = groups
    valid = valid_mask(column)
    retract = ~g.is_add
    if fn.ignore_retract:
        # FieldIgnoreRetractAgg: retract() returns the accumulator, so retractions are skipped.
        retract = np.zeros(g.n, dtype=bool)
    elif fn.name not in RETRACTABLE and np.any(retract & g.in_multi):
        raise UnsupportedError(retraction_message(fn.name), field=fn.field, function=fn.name)
    seen = g.is_add | retract  # the rows that reach agg() or retract()
    name = fn.name
    if name == PRIMARY_KEY:  # agg and retract both return the input
        return take(column, g.last_where(seen))
    if name == LAST_VALUE:  # agg: the input; retract: null
        last = g.last_where(seen)
        return take(column, np.where((last >= 0) & g.is_add[last], last, -1))
    if name == LAST_NON_NULL_VALUE:  # agg: the input unless null; retract of a non-null: null
        last = g.last_where(seen & valid)
        return take(column, np.where((last >= 0) & g.is_add[last], last, -1))
    if name in (FIRST_VALUE, FIRST_NON_NULL_VALUE):
        cond = g.is_add if name == FIRST_VALUE else g.is_add & valid
        return take(column, g.first_where(cond))
    if name in (MIN, MAX):
        return _min_max(fn, column, g, g.is_add & valid)
    if name in (BOOL_AND, BOOL_OR):
        return _bool(name, column, g, g.is_add & valid)
    if name == LISTAGG:
        return _listagg(fn.delimiter, column, g, g.is_add & valid)
    if name == SUM:
        return _sum(fn, column, g, seen & valid, retract)
    if name == PRODUCT:
        return _product(fn, column, g, seen & valid, retract)
    raise UnsupportedError(f"aggregate function {name!r} is not supported", field=fn.field, function=name)


# ---- min / max ---------------------------------------------------------------------------------------


_INT_KEYED = frozenset(
    {
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.DATE,
        TypeRoot.TIME,
        TypeRoot.TIMESTAMP,
        TypeRoot.TIMESTAMP_LTZ,
    }
)


def _numeric_order_key(column: pa.Array, root: TypeRoot) -> npt.NDArray[np.int64] | None:
    """An int64 per row ordered as Java's ``InternalRowUtils.compare`` orders the values (nulls: any
    value), for the types that have one; None for the others (strings, bytes, decimals)."""
    if root in _INT_KEYED:
        # dates, times and timestamps are their integer count of days/millis/units (one unit a column)
        width = {8: pa.int8(), 16: pa.int16(), 32: pa.int32()}.get(column.type.bit_width, pa.int64())
        return np.asarray(column.view(width).fill_null(0)).astype(np.int64)
    if root not in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return None
    # Float.compare/Double.compare: -0.0 < 0.0 and NaN (canonicalised by floatToIntBits) above all
    values = np.asarray(column.fill_null(0))
    bits_type = np.int32 if values.dtype == np.float32 else np.int64
    canonical_nan = np.array(np.nan, dtype=values.dtype).view(bits_type)
    bits = np.where(np.isnan(values), canonical_nan, values.view(bits_type))
    magnitude = np.iinfo(bits_type).max
    return np.where(bits < 0, bits ^ magnitude, bits).astype(np.int64)


def _min_max(fn: FieldFunction, column: pa.Array, g: Groups, candidate: Mask) -> pa.Array:
    root = fn.data_type.root
    if root not in _COMPARABLE:
        if np.any(g.count_where(candidate) > 1):  # InternalRowUtils.compare throws on the first compare
            raise UnsupportedError(f"Incomparable type: {root.value}", field=fn.field, function=fn.name)
        return take(column, g.last_where(candidate))
    numeric = _numeric_order_key(column, root)
    if numeric is not None:
        # Per group the best key among the candidates, then a candidate holding it (equal keys are
        # equal values, so which one does not matter).
        if fn.name == MIN:
            best = np.minimum.reduceat(np.where(candidate, numeric, np.iinfo(np.int64).max), g.starts)
        else:
            best = np.maximum.reduceat(np.where(candidate, numeric, np.iinfo(np.int64).min), g.starts)
        return take(column, g.last_where(candidate & (numeric == best[g.row_group])))
    key = column
    # min: candidates first, ascending -> a group's first row; max: candidates last -> its last row.
    flag = np.where(candidate, 0, 1) if fn.name == MIN else np.where(candidate, 1, 0)
    order = (
        pc.sort_indices(
            pa.table({"g": g.row_group, "f": flag, "v": key}),
            sort_keys=[("g", "ascending"), ("f", "ascending"), ("v", "ascending")],
        )
        .to_numpy()
        .astype(np.int64)
    )
    picked = order[g.starts if fn.name == MIN else g.last]
    return take(column, np.where(candidate[picked], picked, -1))


# ---- bool_and / bool_or / listagg ---------------------------------------------------------------------


def _bool(name: str, column: pa.Array, g: Groups, candidate: Mask) -> pa.Array:
    values = np.asarray(column.fill_null(False), dtype=bool)
    if name == BOOL_AND:
        folded = np.logical_and.reduceat(np.where(candidate, values, True), g.starts)
    else:
        folded = np.logical_or.reduceat(np.where(candidate, values, False), g.starts)
    return pa.array(folded, pa.bool_(), mask=g.count_where(candidate) == 0)


def _listagg(delimiter: str, column: pa.Array, g: Groups, candidate: Mask) -> pa.Array:
    counts = g.count_where(candidate)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), column.filter(pa.array(candidate)))
    joined = pc.binary_join(lists, delimiter)
    return pc.if_else(pa.array(counts == 0), pa.nulls(g.count, column.type), joined)


# ---- sum ----------------------------------------------------------------------------------------------


def _sum(fn: FieldFunction, column: pa.Array, g: Groups, seen: Mask, retract: Mask) -> pa.Array:
    """agg(null, v) = v, retract(null, v) = -v, then + / - in order; null inputs are skipped."""
    root = fn.data_type.root
    nonnull = g.count_where(seen)
    empty = nonnull == 0
    if root is TypeRoot.DECIMAL:
        return _decimal_fold(fn, column, g, seen, retract, step=_decimal_sum_step)
    if root in _INT_BITS:
        values = np.asarray(column.fill_null(0)).astype(np.int64)
        signed = np.where(retract, -values, values)  # int64 arithmetic wraps like Java's long
        total = np.add.reduceat(np.where(seen, signed, 0), g.starts)
        # Narrower ints wrap at every step in Java; modulo 2^bits the order does not matter.
        out = total.astype(column.type.to_pandas_dtype())
        return pa.array(out, column.type, mask=empty)
    floats = np.asarray(column.fill_null(0))
    signed = np.where(retract, -floats, floats).astype(floats.dtype)
    return pa.array(_ordered_float_sum(np.where(seen, signed, -0.0), g), column.type, mask=empty)


def _ordered_float_sum(values: npt.NDArray[Any], g: Groups) -> npt.NDArray[Any]:
    """Per group, ((v0 + v1) + v2) + ... in the values' precision: Java adds one row at a time, and
    numpy's reductions would add pairwise. -0.0 is the exact identity (x + -0.0 == x, -0.0 included),
    so skipped rows hold it and every group can start from it. Groups are padded to the next power of
    two of their length and accumulated row-wise, so the padding never exceeds the data."""
    out = np.empty(g.count, dtype=values.dtype)
    width_of = np.left_shift(1, np.ceil(np.log2(g.lens)).astype(np.int64))
    for width in np.unique(width_of):
        sel = np.flatnonzero(width_of == width)
        cols = np.arange(width, dtype=np.int64)
        rows = g.starts[sel, None] + cols[None, :]
        inside = cols[None, :] < g.lens[sel, None]
        matrix = np.where(inside, values[np.minimum(rows, g.n - 1)], values.dtype.type(-0.0))
        with np.errstate(all="ignore"):  # inf - inf is NaN, as in Java
            out[sel] = np.add.accumulate(matrix, axis=1)[:, -1]
    return out


# ---- product and DECIMAL: folded row by row ------------------------------------------------------------

Step = Callable[[Any, Any, bool], Any]


def _wrap(value: int, bits: int) -> int:
    """Java's two's-complement narrowing of an exact integer to ``bits`` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _java_div(a: int, b: int) -> int:
    if b == 0:
        raise ValidationError("/ by zero (product retraction divides by a zero input)", function=PRODUCT)
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _product(fn: FieldFunction, column: pa.Array, g: Groups, seen: Mask, retract: Mask) -> pa.Array:
    """agg(null, v) = v and retract(null, v) = v; then * (agg) and / (retract) in order."""
    root = fn.data_type.root
    if root is TypeRoot.DECIMAL:
        return _decimal_fold(fn, column, g, seen, retract, step=_decimal_product_step)
    if root in _INT_BITS:
        bits = _INT_BITS[root]

        def int_step(acc: Any, value: Any, is_retract: bool) -> Any:
            return _wrap(_java_div(acc, value) if is_retract else acc * value, bits)

        return _fold(column, g, seen, retract, step=int_step, convert=lambda v: v)
    scalar = np.float32 if root is TypeRoot.FLOAT else np.float64

    def float_step(acc: Any, value: Any, is_retract: bool) -> Any:
        with np.errstate(all="ignore"):  # Java: x / 0.0 is Infinity or NaN, no exception
            return acc / value if is_retract else acc * value

    return _fold(column, g, seen, retract, step=float_step, convert=scalar)


def _fold(
    column: pa.Array, g: Groups, seen: Mask, retract: Mask, *, step: Step, convert: Callable[[Any], Any]
) -> pa.Array:
    """The general row-by-row fold of ``step`` over each group's ``seen`` rows (the first one is the
    starting accumulator whatever its kind, as ``agg(null, v)`` and ``retract(null, v)`` of product)."""
    rows = np.flatnonzero(seen)
    values = column.take(pa.array(rows)).to_pylist()
    row_groups = g.row_group[rows]
    out: list[Any] = [None] * g.count
    for value, row, group in zip(values, rows.tolist(), row_groups.tolist()):
        acc = out[group]
        out[group] = convert(value) if acc is None else step(acc, convert(value), bool(retract[row]))
    return pa.array(
        [None if v is None else v.item() if isinstance(v, np.generic) else v for v in out], column.type
    )


def _decimal_fold(
    fn: FieldFunction, column: pa.Array, g: Groups, seen: Mask, retract: Mask, *, step: Callable[..., Any]
) -> pa.Array:
    """DECIMAL sum/product over unscaled integers at the column's scale (``None`` = Java's null)."""
    data_type = fn.data_type
    assert isinstance(data_type, AtomicType) and data_type.precision is not None
    precision, scale = data_type.precision, data_type.scale or 0
    rows = np.flatnonzero(seen)
    values = column.take(pa.array(rows)).to_pylist()
    out: list[int | None] = [None] * g.count
    started = np.zeros(g.count, dtype=bool)
    for value, row, group in zip(values, rows.tolist(), g.row_group[rows].tolist()):
        unscaled = int(value.scaleb(scale, _EXACT))
        if not started[group]:
            started[group] = True
            out[group] = step(None, unscaled, bool(retract[row]), precision, scale)
        else:
            out[group] = step(out[group], unscaled, bool(retract[row]), precision, scale)
    return _decimal_array(out, precision, scale)


def _digits(unscaled: int) -> int:
    return len(str(abs(unscaled)))  # BigDecimal.precision() (0 has one digit)


def _decimal_sum_step(
    acc: int | None, value: int, is_retract: bool, precision: int, scale: int
) -> int | None:
    if acc is None:
        # agg(null, v) = v; retract(null, v) = negative(v) (fromBigDecimal: same digits, never null)
        return -value if is_retract else value
    result = acc - value if is_retract else acc + value
    if precision <= _COMPACT_DECIMAL_PRECISION and -(2**63) <= result < 2**63:
        return result  # DecimalUtils.add/subtract on compact longs: no precision check
    return None if _digits(result) > precision else result


def _decimal_product_step(
    acc: int | None, value: int, is_retract: bool, precision: int, scale: int
) -> int | None:
    if acc is None:
        return value
    if is_retract:  # BigDecimal.divide: the exact quotient, or ArithmeticException
        if value == 0:
            raise ValidationError("Division by zero (DECIMAL product retraction)", function=PRODUCT)
        exact = Fraction(acc, value)  # (acc / 10^s) / (value / 10^s)
        denominator = exact.denominator
        for prime in (2, 5):
            while denominator % prime == 0:
                denominator //= prime
        if denominator != 1:
            raise ValidationError(
                "Non-terminating decimal expansion; no exact representable decimal result.", function=PRODUCT
            )
        quotient = exact * 10**scale
    else:
        quotient = Fraction(acc * value, 10**scale)  # (acc * value) / 10^(2s), rescaled to s
    rounded = _half_up(quotient)
    return None if _digits(rounded) > precision else rounded


def _half_up(value: Fraction) -> int:
    """RoundingMode.HALF_UP to an integer: ties away from zero."""
    magnitude = abs(value)
    whole = magnitude.numerator // magnitude.denominator
    if magnitude - whole >= Fraction(1, 2):
        whole += 1
    return whole if value >= 0 else -whole


def _decimal_array(unscaled: list[int | None], precision: int, scale: int) -> pa.Array:
    """Decimals from unscaled integers, kept even when wider than ``precision`` (Java keeps such compact
    sums): built at the widest precision and relabelled without a check."""
    wide = pa.decimal128(38, scale)
    values = [None if u is None else _EXACT.create_decimal(u).scaleb(-scale, _EXACT) for u in unscaled]
    return pa.array(values, wide).cast(pa.decimal128(precision, scale), safe=False)
