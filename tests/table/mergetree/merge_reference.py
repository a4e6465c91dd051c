"""A row-at-a-time transcription of Java Paimon 1.0's merge functions, the oracle the vectorized engine is
checked against: ``ReducerMergeFunctionWrapper`` (a lone row is returned as it is) over
``PartialUpdateMergeFunction`` (no sequence groups), ``AggregateMergeFunction`` with the ``Field*Agg``
classes, ``FirstRowMergeFunction`` and ``DeduplicateMergeFunction``. Values are Python objects as
``to_pylist`` gives them; Java's arithmetic is emulated per type (wrapping ints, float32 steps, compact and
wide decimals)."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from paimon_meta.model.types import DataType, TypeRoot

Row = tuple[list[Any], int, int]  # values, kind, sequence
BITS = {TypeRoot.TINYINT: 8, TypeRoot.SMALLINT: 16, TypeRoot.INT: 32, TypeRoot.BIGINT: 64}


class JavaError(Exception):
    """What Java throws (the message is only for debugging)."""


def wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def digits(d: Decimal) -> int:
    t = d.as_tuple()
    return max(len(t.digits), 1) if d != 0 else 1


def from_big_decimal(d: Decimal, p: int, s: int) -> Decimal | None:
    with localcontext() as ctx:
        ctx.prec = 200
        r = d.quantize(Decimal(1).scaleb(-s), rounding=ROUND_HALF_UP)
    unscaled = int(r.scaleb(s))
    return None if len(str(abs(unscaled))) > p else r


class Num:
    """Java arithmetic on one column type."""

    def __init__(self, t: DataType) -> None:
        self.t = t
        self.root = t.root

    def add(self, a: Any, b: Any, sign: int = 1) -> Any:
        if self.root in BITS:
            return wrap(a + sign * b, BITS[self.root])
        if self.root is TypeRoot.FLOAT:
            with np.errstate(all="ignore"):
                return float(np.float32(a) + np.float32(sign) * np.float32(b))
        if self.root is TypeRoot.DOUBLE:
            return a + b if sign > 0 else a - b
        p, s = self.t.precision, self.t.scale  # type: ignore[attr-defined]
        with localcontext() as ctx:
            ctx.prec = 200
            exact = a + b if sign > 0 else a - b
            ua, ub = int(a.scaleb(s)), int(b.scaleb(s))
        ur = ua + ub if sign > 0 else ua - ub
        if p <= 18 and -(2**63) <= ur < 2**63:
            return exact  # compact longs: no precision check
        return from_big_decimal(exact, p, s)

    def neg(self, v: Any) -> Any:
        if self.root in BITS:
            return wrap(-v, BITS[self.root])
        if self.root is TypeRoot.FLOAT:
            return float(-np.float32(v))
        return -v

    def mul(self, a: Any, b: Any) -> Any:
        if self.root in BITS:
            return wrap(a * b, BITS[self.root])
        if self.root is TypeRoot.FLOAT:
            with np.errstate(all="ignore"):
                return float(np.float32(a) * np.float32(b))
        if self.root is TypeRoot.DOUBLE:
            return a * b
        with localcontext() as ctx:
            ctx.prec = 200
            return from_big_decimal(a * b, self.t.precision, self.t.scale)  # type: ignore[attr-defined]

    def div(self, a: Any, b: Any) -> Any:
        if self.root in BITS:
            if b == 0:
                raise JavaError("/ by zero")
            q = abs(a) // abs(b)
            return wrap(q if (a < 0) == (b < 0) else -q, BITS[self.root])
        if self.root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
            scalar = np.float32 if self.root is TypeRoot.FLOAT else np.float64
            with np.errstate(all="ignore"):  # IEEE: x / 0.0 is +-Infinity or NaN
                return float(scalar(a) / scalar(b))
        if b == 0:
            raise JavaError("Division by zero")
        q = Fraction(a) / Fraction(b)
        den = q.denominator
        for prime in (2, 5):
            while den % prime == 0:
                den //= prime
        if den != 1:
            raise JavaError("Non-terminating decimal expansion")
        with localcontext() as ctx:
            ctx.prec = 200
            exact = Decimal(q.numerator) / Decimal(q.denominator)
            return from_big_decimal(exact, self.t.precision, self.t.scale)  # type: ignore[attr-defined]


def java_compare(a: Any, b: Any, root: TypeRoot) -> int:
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        fmt, canon = (">f", 0x7FC00000) if root is TypeRoot.FLOAT else (">d", 0x7FF8000000000000)
        size = 4 if root is TypeRoot.FLOAT else 8

        def key(x: float) -> int:
            bits = canon if math.isnan(x) else int.from_bytes(struct.pack(fmt, x), "big", signed=True)
            return bits ^ ((1 << (size * 8 - 1)) - 1) if bits < 0 else bits

        ka, kb = key(a), key(b)
        return (ka > kb) - (ka < kb)
    if root is TypeRoot.BOOLEAN:
        raise JavaError("Incomparable type: BOOLEAN")
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR):
        a, b = a.encode(), b.encode()
    return int(a > b) - int(a < b)


class Agg:
    """One FieldAggregator instance (stateful like Java's: first_value remembers initialisation)."""

    def __init__(self, name: str, t: DataType, ignore_retract: bool, delimiter: str) -> None:
        self.name, self.t, self.ignore_retract, self.delimiter = name, t, ignore_retract, delimiter
        self.num = Num(t)
        self.initialized = False

    def agg(self, acc: Any, v: Any) -> Any:
        n = self.name
        if n in ("primary-key", "last_value"):
            return v
        if n == "last_non_null_value":
            return acc if v is None else v
        if n == "first_value":
            if not self.initialized:
                self.initialized = True
                return v
            return acc
        if n == "first_non_null_value":
            if not self.initialized and v is not None:
                self.initialized = True
                return v
            return acc
        if acc is None or v is None:
            return v if acc is None else acc
        if n == "sum":
            return self.num.add(acc, v)
        if n == "product":
            return self.num.mul(acc, v)
        if n == "min":
            return acc if java_compare(acc, v, self.t.root) < 0 else v
        if n == "max":
            return v if java_compare(acc, v, self.t.root) < 0 else acc
        if n == "bool_and":
            return acc and v
        if n == "bool_or":
            return acc or v
        if n == "listagg":
            return acc + self.delimiter + v
        raise AssertionError(n)

    def retract(self, acc: Any, v: Any) -> Any:
        if self.ignore_retract:
            return acc
        n = self.name
        if n == "primary-key":
            return v
        if n == "last_value":
            return None
        if n == "last_non_null_value":
            return None if v is not None else acc
        if n == "sum":
            if acc is None or v is None:
                return self.num.neg(v) if acc is None and v is not None else acc
            return self.num.add(acc, v, -1)
        if n == "product":
            if acc is None or v is None:
                return v if acc is None else acc
            return self.num.div(acc, v)
        raise JavaError(f"Aggregate function '{n}' does not support retraction")


def is_add(kind: int) -> bool:
    return kind in (0, 2)


def merge_group(
    engine: str,
    rows: Sequence[Row],
    *,
    aggs: Sequence[tuple[str, DataType, bool, str]] = (),
    ignore_delete: bool = False,
    remove_record_on_delete: bool = False,
) -> Row | None:
    """The Java result of one key's rows in merge order (None: no row, Java's null)."""
    if len(rows) == 1:
        return rows[0]
    width = len(rows[0][0])
    if engine == "deduplicate":
        return rows[-1]
    if engine == "first-row":
        first = None
        for values, kind, seq in rows:
            if not is_add(kind):
                if ignore_delete:
                    continue
                raise JavaError("first-row delete")
            if first is None:
                first = (values, kind, seq)
        return first
    if engine == "partial-update":
        row: list[Any] = [None] * width
        delete_row, latest = False, -1
        for values, kind, seq in rows:
            delete_row = False
            if not is_add(kind):
                if ignore_delete:
                    continue
                if remove_record_on_delete:
                    if kind == 3:
                        delete_row, row = True, [None] * width
                    continue
                raise JavaError("partial-update delete")
            latest = seq
            row = [v if v is not None else old for v, old in zip(values, row)]
        # Java leaves latestSequenceNumber at a previous key's value when no row was an addition; the
        # key's last sequence number is what the engine uses instead.
        return (row, 3 if delete_row else 0, latest if latest >= 0 else rows[-1][2])
    fns = [Agg(*a) for a in aggs]
    row = [None] * width
    for values, kind, seq in rows:
        row = [(f.agg(acc, v) if is_add(kind) else f.retract(acc, v)) for f, acc, v in zip(fns, row, values)]
        latest = seq
    return (row, 0, latest)


SeqGroup = tuple[Sequence[int], Sequence[int]]  # sequence field indexes, member field indexes


def partial_update_with_groups(
    rows: Sequence[Row],
    groups: Sequence[SeqGroup],
    roots: Sequence[TypeRoot],
    *,
    ignore_delete: bool = False,
    aggs: dict[int, tuple[str, DataType, bool, str]] | None = None,
) -> Row:
    """Java 0.9/1.0 ``PartialUpdateMergeFunction`` with sequence groups and field aggregators (``aggs``: by
    field index), row by row (``updateWithSequenceGroup`` / ``retractWithSequenceGroup``, ``aggReversed``
    as ``FieldAggregator``'s: ``agg`` with the operands swapped) under ``ReducerMergeFunctionWrapper``.
    Java's result as it is: +I, primary-key fields null when no row was an addition."""
    if len(rows) == 1:
        return rows[0]
    fns = {i: Agg(*a) for i, a in (aggs or {}).items()}
    width = len(rows[0][0])
    comparator: dict[int, Sequence[int]] = {}
    for seq_fields, members in groups:
        for i in (*members, *seq_fields):
            comparator[i] = seq_fields

    def compare(a: Sequence[Any], b: Sequence[Any], seq_fields: Sequence[int]) -> int:
        for i in seq_fields:  # UserDefinedSeqComparator: nulls first
            if a[i] is None or b[i] is None:
                if a[i] is None and b[i] is None:
                    continue
                return -1 if a[i] is None else 1
            c = java_compare(a[i], b[i], roots[i])
            if c:
                return c
        return 0

    row: list[Any] = [None] * width
    latest = -1
    for values, kind, seq in rows:
        if not is_add(kind) and ignore_delete:
            continue
        if is_add(kind):
            latest = seq
        updated: set[int] = set()
        for i in range(width):
            fn = fns.get(i)
            if i not in comparator:
                if is_add(kind) and fn is not None:
                    row[i] = fn.agg(row[i], values[i])
                elif is_add(kind) and values[i] is not None:
                    row[i] = values[i]
                continue
            seq_fields = comparator[i]
            if all(values[j] is None for j in seq_fields):
                continue  # skip null sequence group
            if compare(values, row, seq_fields) >= 0:
                if i in seq_fields:
                    for j in seq_fields:
                        if j not in updated or is_add(kind):
                            row[j] = values[j]
                            updated.add(j)
                if is_add(kind):
                    row[i] = values[i] if fn is None else fn.agg(row[i], values[i])
                elif i not in seq_fields:
                    row[i] = None if fn is None else fn.retract(row[i], values[i])  # retract the field
            elif fn is not None:
                row[i] = fn.agg(values[i], row[i]) if is_add(kind) else fn.retract(row[i], values[i])
    return (row, 0, latest if latest >= 0 else rows[-1][2])
