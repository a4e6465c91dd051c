"""Paimon <-> Arrow types, and casts/field-id mapping on read."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import from_arrow_schema, from_arrow_type, to_arrow_schema, to_arrow_type
from paimon_meta.model.types import (
    BIGINT,
    BINARY,
    BOOLEAN,
    BYTES,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TINYINT,
    VARCHAR,
    ArrayType,
    DataField,
    DataType,
    MapType,
    MultisetType,
    RowType,
)
from paimon_meta.table.read.evolution import cast_array, evolve_columns

ROW = RowType(True, (DataField(5, "x", INT()), DataField(6, "y", ArrayType(True, STRING()))))


@pytest.mark.parametrize(
    ("paimon", "arrow"),
    [
        (BOOLEAN(), pa.bool_()),
        (TINYINT(), pa.int8()),
        (SMALLINT(), pa.int16()),
        (INT(), pa.int32()),
        (BIGINT(), pa.int64()),
        (FLOAT(), pa.float32()),
        (DOUBLE(), pa.float64()),
        (DECIMAL(38, 10), pa.decimal128(38, 10)),
        (STRING(), pa.string()),
        (VARCHAR(10), pa.string()),
        (CHAR(3), pa.string()),
        (BYTES(), pa.binary()),
        (BINARY(16), pa.binary()),
        (DATE(), pa.date32()),
        (TIME(3), pa.time32("ms")),
        (TIMESTAMP(0), pa.timestamp("ms")),
        (TIMESTAMP(3), pa.timestamp("ms")),
        (TIMESTAMP(6), pa.timestamp("us")),
        (TIMESTAMP(9), pa.timestamp("ns")),
        (TIMESTAMP_LTZ(6), pa.timestamp("us", tz="UTC")),
        (ArrayType(True, INT(False)), pa.list_(pa.field("item", pa.int32(), nullable=False))),
        (MapType(True, STRING(False), DOUBLE()), pa.map_(pa.string(), pa.float64())),
        (MultisetType(True, STRING()), pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))),
        (ROW, pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.list_(pa.string()))])),
    ],
)
def test_to_arrow(paimon: DataType, arrow: pa.DataType) -> None:
    assert to_arrow_type(paimon) == arrow


def test_schema_round_trip_and_field_ids() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.large_string()),
            pa.field(
                "r",
                pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.struct([pa.field("c", pa.bool_())]))]),
            ),
            pa.field("t", pa.timestamp("ns", tz="Asia/Tokyo")),
            pa.field("fixed", pa.binary(4)),
            pa.field("tm", pa.time64("us")),
            pa.field("blob", pa.large_binary()),
        ]
    )
    fields, highest = from_arrow_schema(schema)
    # ids as Java's Schema.Builder: a top-level field, then the fields nested in its type
    assert [(f.id, f.name) for f in fields] == [
        (0, "id"),
        (1, "s"),
        (2, "r"),
        (6, "t"),
        (7, "fixed"),
        (8, "tm"),
        (9, "blob"),
    ]
    nested = fields[2].type
    assert isinstance(nested, RowType)
    assert [(f.id, f.name) for f in nested.fields] == [(3, "a"), (4, "b")]
    assert highest == 9
    assert [str(f.type) for f in fields] == [
        "BIGINT NOT NULL",
        "STRING",
        "ROW<a INT, b ROW<c BOOLEAN>>",
        "TIMESTAMP(9) WITH LOCAL TIME ZONE",
        "BINARY(4)",
        "TIME(6)",
        "BYTES",
    ]
    back = to_arrow_schema(fields, field_ids=True)
    assert back.field("id").metadata == {b"PARQUET:field_id": b"0"}
    assert back.field("id").nullable is False
    assert back.field("s").type == pa.string()


def test_unsupported_arrow_types() -> None:
    with pytest.raises(UnsupportedError):
        from_arrow_type(pa.decimal256(40, 2))
    with pytest.raises(UnsupportedError):
        from_arrow_type(pa.duration("s"))
    with pytest.raises(ValidationError):
        from_arrow_schema(pa.schema([pa.field("a", pa.int8()), pa.field("a", pa.int8())]))


@pytest.mark.parametrize(
    ("values", "source", "target", "expected"),
    [
        (
            [1.9, -1.9, float("nan"), 1e20, -1e20, None],
            DOUBLE(),
            INT(),
            [1, -1, 0, 2**31 - 1, -(2**31), None],
        ),
        ([True, False, None], BOOLEAN(), STRING(), ["true", "false", None]),
        (["see", None], STRING(), BYTES(), [b"see", None]),
        ([10.0, 1e7, 0.0001], DOUBLE(), STRING(), ["10.0", "1.0E7", "1.0E-4"]),
        ([1.5], FLOAT(), STRING(), ["1.5"]),
        ([2**40 + 5], BIGINT(), INT(), [5]),  # Java's narrowing wraps
        ([7, None], INT(), BIGINT(), [7, None]),
        (["12", "x"], STRING(), INT(), None),  # unparsable text fails, as Java's cast does
        (["abcdef"], STRING(), VARCHAR(3), ["abc"]),
        (["ab"], STRING(), CHAR(4), ["ab  "]),
        ([b"hi"], BYTES(), STRING(), ["hi"]),
        ([dt.date(2024, 2, 29)], DATE(), STRING(), ["2024-02-29"]),
        ([3_723_004], TIME(3), STRING(), ["01:02:03.004"]),
    ],
)
def test_casts_follow_java(
    values: list[object], source: DataType, target: DataType, expected: list[object] | None
) -> None:
    arr = (
        pa.array(values, to_arrow_type(source))
        if source.root.name != "TIME"
        else pa.array(values, pa.int32()).cast(pa.time32("ms"))
    )
    if expected is None:
        with pytest.raises(ValidationError) as err:
            cast_array(arr, source, target)
        assert not isinstance(err.value, UnsupportedError)  # a bad value, not a missing cast
        return
    out = cast_array(arr, source, target)
    assert out.type == to_arrow_type(target)
    assert out.to_pylist() == expected


def test_timestamp_casts_keep_nanoseconds() -> None:
    ns = pa.array([1_000_000_123, None], pa.int64()).cast(pa.timestamp("ns"))
    assert cast_array(ns, TIMESTAMP(9), STRING()).to_pylist() == ["1970-01-01 00:00:01.000000123", None]
    assert cast_array(ns, TIMESTAMP(9), TIMESTAMP(6)).cast(pa.int64()).to_pylist() == [1_000_000, None]
    assert cast_array(ns, TIMESTAMP(9), TIMESTAMP_LTZ(9)).type == pa.timestamp("ns", tz="UTC")


def test_nested_row_maps_children_by_id() -> None:
    source = RowType(True, (DataField(5, "x", INT()), DataField(7, "gone", INT())))
    target = RowType(True, (DataField(8, "new", STRING()), DataField(5, "renamed", BIGINT())))
    arr = pa.array([{"x": 1, "gone": 2}, None], to_arrow_type(source))
    out = cast_array(arr, source, target)
    assert out.to_pylist() == [{"new": None, "renamed": 1}, None]


def test_evolve_columns_by_id() -> None:
    table = pa.table({"old_name": pa.array([1, 2], pa.int32()), "dropped": ["a", "b"], "v": [1.5, 2.5]})
    file_fields = {0: ("old_name", INT()), 1: ("dropped", STRING()), 2: ("v", DOUBLE())}
    target = [(2, "v", INT()), (0, "new_name", BIGINT()), (9, "added", STRING()), (4, "part", INT())]
    cols = evolve_columns(table, file_fields, target, fill={4: pa.array([7, 7], pa.int32())})
    assert [c.to_pylist() for c in cols] == [[1, 2], [1, 2], [None, None], [7, 7]]
    with pytest.raises(ValidationError) as err:
        evolve_columns(table, {1: ("dropped", STRING())}, [(1, "d", DATE())])
    assert err.value.fields["field"] == "d"
