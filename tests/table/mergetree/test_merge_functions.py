"""The vectorized merge engines against a row-at-a-time transcription of Java's merge functions
(``tests/table/mergetree/merge_reference.py``): every engine, every aggregate function on
every type it takes, random
keys of 1..7 rows with nulls, edge values (wrapping ints, -0.0, NaN, infinities, over-precise decimals) and
every row kind; where Java throws, the engine must refuse too. Hand-picked cases pin the values down."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import to_arrow_type
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import (
    BIGINT,
    BINARY,
    BOOLEAN,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    SMALLINT,
    STRING,
    TIMESTAMP,
    TINYINT,
    DataField,
    DataType,
)
from paimon_meta.table.mergetree.merge_engine import MergeEngine, MergeResult, key_group_starts
from tests.table.mergetree.merge_reference import JavaError, Row, merge_group

Gen = Callable[[random.Random], Any]
ROUNDS = 6  # x 100 keys of 1..7 rows, a third of the rounds without retractions


def _pick(*values: Any) -> Gen:
    return lambda r: r.choice(values)


def _ints(bits: int) -> Gen:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return lambda r: r.choice((lo, hi, -1, 0, 1, 2, 3, r.randint(lo, hi), r.randint(-9, 9)))


def _floats(single: bool) -> Gen:
    def gen(r: random.Random) -> float:
        v = r.choice(
            (0.0, -0.0, math.nan, math.inf, -math.inf, 1e16, 1.0, 0.1, -2.5, r.uniform(-1e6, 1e6), r.random())
        )
        return float(np.float32(v)) if single else v

    return gen


def _decimals(precision: int, scale: int) -> Gen:
    top = 10 ** (precision - scale) - 1

    def gen(r: random.Random) -> Decimal:
        whole = r.choice((top, -top, 0, 1, 2, r.randint(-top, top)))
        return Decimal(whole) + Decimal(r.randint(0, 10**scale - 1)).scaleb(-scale) * (
            1 if whole >= 0 else -1
        )

    return gen


_STRINGS = _pick("", "a", "b", "ab", "é", "z", "~", "日本", "A")
TYPES: dict[str, tuple[DataType, Gen]] = {
    "tinyint": (TINYINT(), _ints(8)),
    "smallint": (SMALLINT(), _ints(16)),
    "int": (INT(), _ints(32)),
    "bigint": (BIGINT(), _ints(64)),
    "float": (FLOAT(), _floats(True)),
    "double": (DOUBLE(), _floats(False)),
    "dec52": (DECIMAL(5, 2), _decimals(5, 2)),
    "dec204": (DECIMAL(20, 4), _decimals(20, 4)),
    "string": (STRING(), _STRINGS),
    "char": (CHAR(3), _STRINGS),
    "bool": (BOOLEAN(), _pick(True, False)),
    "date": (DATE(), lambda r: dt.date(1970, 1, 1) + dt.timedelta(r.randint(-9999, 9999))),
    "timestamp": (
        TIMESTAMP(6),
        lambda r: dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=r.randint(-(10**12), 10**12)),
    ),
    "binary": (BINARY(2), _pick(b"\x00\x01", b"\xff\x00", b"\x7f\x80", b"\x80\x7f", b"ab")),
}
NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "dec52", "dec204")
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "sum": NUMERIC,
    "product": NUMERIC,
    "min": (*NUMERIC, "string", "char", "date", "timestamp", "binary", "bool"),
    "max": (*NUMERIC, "string", "char", "date", "timestamp", "binary", "bool"),
    "last_value": tuple(TYPES),
    "last_non_null_value": tuple(TYPES),
    "first_value": tuple(TYPES),
    "first_non_null_value": tuple(TYPES),
    "first_not_null_value": ("int",),
    "listagg": ("string",),
    "bool_and": ("bool",),
    "bool_or": ("bool",),
}


def random_groups(
    r: random.Random, gens: Sequence[Gen], *, retract_weight: float, groups: int = 100
) -> list[list[Row]]:
    out = []
    seq = 0
    for _ in range(groups):
        rows = []
        for _ in range(r.choice((1, 1, 2, 2, 3, 4, 7))):
            kind = r.choice((1, 3)) if r.random() < retract_weight else r.choice((0, 0, 2))
            values = [gens[0](r)] + [None if r.random() < 0.25 else gen(r) for gen in gens[1:]]
            rows.append((values, kind, seq))
            seq += r.choice((1, 1, 5))
        out.append(rows)
    return out


def run_engine(engine: MergeEngine, fields: Sequence[DataField], groups: list[list[Row]]) -> MergeResult:
    flat = [row for rows in groups for row in rows]
    columns = [pa.array([row[0][i] for row in flat], to_arrow_type(f.type)) for i, f in enumerate(fields)]
    kinds = np.array([row[1] for row in flat], np.int8)
    seqs = np.array([row[2] for row in flat], np.int64)
    starts = np.cumsum([0] + [len(rows) for rows in groups[:-1]]).astype(np.int64)
    return engine.merge(columns, fields, kinds, seqs, starts)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    return bool(a == b) and type(a) is type(b)


def check_against_reference(
    engine: MergeEngine, fields: Sequence[DataField], groups: list[list[Row]], **reference: Any
) -> int:
    """Compare the engine's result for ``groups`` with the reference; both must refuse alike. Returns how
    many groups were merged (0 when both refused)."""
    try:
        expected = [merge_group(engine.name, rows, **reference) for rows in groups]
    except JavaError:
        with pytest.raises((UnsupportedError, ValidationError)):
            run_engine(engine, fields, groups)
        return 0
    got = run_engine(engine, fields, groups)
    values = [c.to_pylist() for c in got.columns]
    for g, (rows, want) in enumerate(zip(groups, expected)):
        kind = int(got.kinds[g])
        if want is None or (engine.name == "partial-update" and want[1] == 0 and want[0][0] is None):
            # Java's null result, or its row of nulls where no addition is left: the key is dropped.
            assert kind == 3, (rows, kind)
            continue
        assert kind == want[1], (rows, want, kind)
        if kind == 3:
            continue
        assert int(got.sequences[g]) == want[2], (rows, want)
        row = [values[i][g] for i in range(len(fields))]
        assert all(same(a, b) for a, b in zip(row, want[0])), (rows, want[0], row)
    return len(groups)


def schema(fields: Sequence[DataField], options: dict[str, str]) -> TableSchema:
    return TableSchema(0, tuple(fields), len(fields), (), ("k",), options)


CASES = [(fn, t) for fn, types in FUNCTIONS.items() for t in types]


@pytest.mark.parametrize(("function", "type_name"), CASES, ids=[f"{f}-{t}" for f, t in CASES])
@pytest.mark.parametrize("ignore_retract", [False, True], ids=["retract", "ignore-retract"])
def test_aggregate_function_matches_java(function: str, type_name: str, ignore_retract: bool) -> None:
    data_type, gen = TYPES[type_name]
    fields = [DataField(0, "k", INT(False)), DataField(1, "v", data_type)]
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": function}
    if ignore_retract:
        options["fields.v.ignore-retract"] = "true"
    engine = MergeEngine.for_schema(schema(fields, options))
    name = function.replace("not_null", "non_null")  # the legacy name of first_non_null_value
    aggs = [("primary-key", INT(False), False, ","), (name, data_type, ignore_retract, ",")]
    rng = random.Random(f"{function}-{type_name}-{ignore_retract}")
    merged = 0
    for round_ in range(ROUNDS):
        groups = random_groups(rng, [lambda r: 7, gen], retract_weight=(0.0, 0.15, 0.5)[round_ % 3])
        merged += check_against_reference(engine, fields, groups, aggs=aggs)
    # Java compares no BOOLEANs: min/max of two non-null ones always throws; the rest merges somewhere.
    assert merged > 0 or (function in ("min", "max") and type_name == "bool")


ROW_FIELDS = [
    DataField(0, "k", INT(False)),
    DataField(1, "a", INT()),
    DataField(2, "s", STRING()),
    DataField(3, "d", DOUBLE()),
]
ROW_GENS: list[Gen] = [lambda r: 7, _ints(32), _STRINGS, _floats(False)]
ENGINE_CASES = [
    ("partial-update", {}),
    ("partial-update", {"ignore-delete": "true"}),
    ("partial-update", {"partial-update.ignore-delete": "true"}),
    ("partial-update", {"partial-update.remove-record-on-delete": "true"}),
    ("first-row", {}),
    ("first-row", {"first-row.ignore-delete": "true"}),
    ("deduplicate", {}),
]


@pytest.mark.parametrize(("name", "options"), ENGINE_CASES, ids=[f"{n}-{o}" for n, o in ENGINE_CASES])
def test_engine_matches_java(name: str, options: dict[str, str]) -> None:
    engine = MergeEngine.for_schema(schema(ROW_FIELDS, {"merge-engine": name, **options}))
    reference = {
        "ignore_delete": engine.ignore_delete,
        "remove_record_on_delete": engine.remove_record_on_delete,
    }
    rng = random.Random(f"{name}-{options}")
    merged = 0
    for round_ in range(ROUNDS):
        groups = random_groups(rng, ROW_GENS, retract_weight=(0.0, 0.15, 0.5)[round_ % 3])
        merged += check_against_reference(engine, ROW_FIELDS, groups, **reference)
    assert merged > 0


def merge_one(function: str, data_type: DataType, rows: list[tuple[Any, int]], **options: str) -> Any:
    """One key's ``(value, kind)`` rows through ``fields.v.aggregate-function=function``: (value, kind)."""
    fields = [DataField(0, "k", INT(False)), DataField(1, "v", data_type)]
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": function, **options}
    engine = MergeEngine.for_schema(schema(fields, opts))
    result = run_engine(engine, fields, [[([1, v], kind, i) for i, (v, kind) in enumerate(rows)]])
    return result.columns[1].to_pylist()[0], int(result.kinds[0])


D = Decimal
PINNED = [
    ("sum", INT(), [(2**31 - 1, 0), (1, 0)], -(2**31)),  # int wraps
    ("sum", TINYINT(), [(-128, 0), (-128, 1)], 0),
    ("sum", TINYINT(), [(None, 0), (-128, 1)], -128),  # retract(null, v) = -v, wrapped
    ("sum", BIGINT(), [(None, 0), (None, 2)], None),
    ("sum", DOUBLE(), [(1e16, 0), (1.0, 0), (1.0, 0)], 1e16),  # added in order, not pairwise
    ("sum", DOUBLE(), [(-0.0, 0), (None, 0)], -0.0),
    ("sum", FLOAT(), [(16777216.0, 0), (1.0, 0), (1.0, 2)], 16777216.0),  # float32 steps
    ("sum", DECIMAL(5, 2), [(D("999.99"), 0), (D("999.99"), 0)], D("1999.98")),  # compact: kept
    ("sum", DECIMAL(20, 0), [(D(10**20 - 1), 0), (D(1), 0), (D(5), 0)], D(5)),  # wide: null, restart
    ("sum", DOUBLE(), [(5.0, 0), (2.0, 1), (1.5, 3)], 1.5),
    ("product", DECIMAL(5, 2), [(D("1.05"), 0), (D("1.05"), 0)], D("1.10")),  # HALF_UP
    ("product", DECIMAL(5, 2), [(D("0.05"), 0), (D("0.10"), 0)], D("0.01")),
    ("product", DECIMAL(5, 2), [(D("6.00"), 0), (D("4.00"), 1)], D("1.50")),  # retract divides
    ("product", INT(), [(-7, 0), (3, 2), (2, 1)], -10),  # Java's int division truncates
    ("product", INT(), [(None, 0), (4, 3)], 4),  # retract(null, v) = v
    ("product", SMALLINT(), [(300, 0), (300, 0)], 24464),
    ("max", DOUBLE(), [(math.inf, 0), (math.nan, 0), (1.0, 0)], math.nan),  # Double.compare: NaN on top
    ("min", DOUBLE(), [(0.0, 0), (-0.0, 0)], -0.0),
    ("max", STRING(), [("z", 0), ("é", 0), (None, 0)], "é"),  # UTF-8 bytes, unsigned
    ("min", BINARY(1), [(b"\x80", 0), (b"\x7f", 0)], b"\x7f"),
    ("listagg", STRING(), [("a", 0), (None, 0), ("b", 2), ("", 0)], "a,b,"),
    ("bool_and", BOOLEAN(), [(True, 0), (None, 0), (False, 0)], False),
    ("bool_or", BOOLEAN(), [(None, 0), (None, 0)], None),
    ("last_value", INT(), [(1, 0), (2, 0), (None, 0)], None),
    ("last_value", INT(), [(1, 0), (2, 1)], None),  # retract: null
    ("last_non_null_value", INT(), [(1, 0), (None, 0)], 1),
    ("last_non_null_value", INT(), [(1, 0), (None, 1)], 1),  # a null retraction retracts nothing
    ("last_non_null_value", INT(), [(1, 0), (5, 1)], None),
    ("first_value", INT(), [(None, 0), (2, 0)], None),
    ("first_non_null_value", INT(), [(None, 0), (2, 0), (3, 0)], 2),
]


@pytest.mark.parametrize(("function", "data_type", "rows", "expected"), PINNED)
def test_pinned_values(
    function: str, data_type: DataType, rows: list[tuple[Any, int]], expected: Any
) -> None:
    value, kind = merge_one(function, data_type, rows)
    assert kind == 0
    assert same(value, expected), value


def test_listagg_delimiter_and_lone_rows() -> None:
    rows = [("a", 0), ("b", 0)]
    assert merge_one("listagg", STRING(), rows, **{"fields.v.list-agg-delimiter": " | "}) == ("a | b", 0)
    # A key with a single row keeps it, retraction included (ReducerMergeFunctionWrapper).
    assert merge_one("sum", INT(), [(5, 1)]) == (5, 1)
    assert merge_one("first_value", INT(), [(5, 3)]) == (5, 3)


def test_retraction_refused_unless_ignored() -> None:
    with pytest.raises(UnsupportedError, match="'max' does not support retraction") as e:
        merge_one("max", INT(), [(1, 0), (2, 1)])
    assert e.value.fields == {"field": "v", "function": "max"}
    assert merge_one("max", INT(), [(1, 0), (2, 1), (0, 0)], **{"fields.v.ignore-retract": "true"}) == (1, 0)
    with pytest.raises(ValidationError, match="by zero"):
        merge_one("product", INT(), [(1, 0), (0, 1)])
    with pytest.raises(ValidationError, match="Non-terminating"):
        merge_one("product", DECIMAL(5, 2), [(D("1.00"), 0), (D("3.00"), 1)])
    with pytest.raises(UnsupportedError, match="Incomparable type: BOOLEAN"):
        merge_one("min", BOOLEAN(), [(True, 0), (False, 0)])


def two_fields(**options: str) -> TableSchema:
    return schema(
        [DataField(0, "k", INT(False)), DataField(1, "v", INT()), DataField(2, "s", STRING())], options
    )


REFUSED = [
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "count"}, UnsupportedError, "count"),
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "collect"}, UnsupportedError, "collect"),
    (
        {"merge-engine": "aggregation", "fields.default-aggregate-function": "hll_sketch"},
        UnsupportedError,
        "hll",
    ),
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sumx"}, UnsupportedError, "spell"),
    ({"merge-engine": "aggregation", "fields.s.aggregate-function": "sum"}, ValidationError, "NumericType"),
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "listagg"}, ValidationError, "VarChar"),
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "bool_or"}, ValidationError, "Boolean"),
    (
        {"merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true"},
        UnsupportedError,
        "remove",
    ),
    ({"merge-engine": "aggregation", "fields.s.distinct": "true"}, UnsupportedError, "distinct"),
    (
        {
            "merge-engine": "partial-update",
            "fields.s.sequence-group": "v",
            "fields.v.aggregate-function": "first_value",
        },
        UnsupportedError,
        "first_value",
    ),
    (
        {"merge-engine": "partial-update", "partial-update.remove-record-on-sequence-group": "v"},
        UnsupportedError,
        "remove-record-on-sequence-group",
    ),
    (
        {"merge-engine": "partial-update", "fields.v.aggregate-function": "sum"},
        ValidationError,
        "sequence group",
    ),
    (
        {
            "merge-engine": "partial-update",
            "ignore-delete": "true",
            "partial-update.remove-record-on-delete": "true",
        },
        ValidationError,
        "conflicting",
    ),
    ({"merge-engine": "aggregation", "fields.v.sequence-group": "s"}, UnsupportedError, "sequence-group"),
    ({"merge-engine": "aggregation", "aggregation.some-future-option": "x"}, UnsupportedError, "unknown"),
    (
        {"merge-engine": "partial-update", "partial-update.some-future-option": "x"},
        UnsupportedError,
        "unknown",
    ),
    ({"merge-engine": "first-row", "sequence.field": "v"}, ValidationError, "sequence field"),
    ({"merge-engine": "last-row"}, ValidationError, "not a merge engine"),
]


@pytest.mark.parametrize(("options", "error", "match"), REFUSED)
def test_refused_options(options: dict[str, str], error: type[Exception], match: str) -> None:
    s = two_fields(**options)
    with pytest.raises(error, match=match) as e:
        MergeEngine.for_schema(s).check_fields(s.fields)
    assert e.type is error
    assert "option" in e.value.fields or "field" in e.value.fields  # type: ignore[attr-defined]


def test_key_group_starts() -> None:
    keys = [pa.array([1, 1, 2, 2, 2, 3]), pa.array(["a", "b", "b", "b", "c", "c"])]
    assert key_group_starts(keys, 6).tolist() == [0, 1, 2, 4, 5]
    assert key_group_starts([pa.array([], pa.int32())], 0).tolist() == []
    assert key_group_starts([], 3).tolist() == [0]  # the whole key is partition columns
