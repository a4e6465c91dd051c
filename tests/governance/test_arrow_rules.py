"""Rules over the types the pypaimon comparison does not reach (TIME, timestamps with a local time zone,
bytes, FLOAT, wide decimals), each literal form Java's Jackson writes, and what a read must supply."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.errors import PolicyRuleError
from paimon_meta.governance.arrow_rules import like_regex
from paimon_meta.governance.policies import QueryRules
from paimon_meta.model.types import BYTES, DECIMAL, FLOAT, INT, STRING, TIME, TIMESTAMP_LTZ, DataField

FIELDS = [
    DataField(0, "t", TIME(3)),
    DataField(1, "at", TIMESTAMP_LTZ(3)),
    DataField(2, "raw", BYTES()),
    DataField(3, "f", FLOAT()),
    DataField(4, "big", DECIMAL(38, 10)),
    DataField(5, "s", STRING()),
    DataField(6, "n", INT()),
]
UTC = dt.UTC
TABLE = pa.table(
    {
        "t": pa.array([1000, 3_600_000, None, 45_296_789], pa.time32("ms")),
        "at": pa.array(
            [
                dt.datetime(2026, 1, 1, tzinfo=UTC),
                dt.datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
                None,
                dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
            ],
            pa.timestamp("ms", tz="UTC"),
        ),
        "raw": [b"\x00\x01", b"\xff", None, b""],
        "f": pa.array([0.1, 1.5, None, -0.0], pa.float32()),
        "big": pa.array(
            [Decimal("1234567890123456789012345678.0000000001"), Decimal(0), None, Decimal("-1.5")],
            pa.decimal128(38, 10),
        ),
        "s": ["a\nb", "a_b", "100%", None],
        "n": pa.array([1, 2, 3, 4], pa.int32()),
    }
)


def keep(column: str, type_json: Any, function: str, *literals: Any) -> list[int]:
    """The ``n`` of the rows a leaf keeps; a Decimal literal is written as its exact JSON number."""
    ref = {"index": 0, "name": column, "type": type_json}
    rule = {"kind": "LEAF", "transform": {"name": "FIELD_REF", "fieldRef": ref}, "function": function}
    numbers = {f"@{i}": str(v) for i, v in enumerate(literals) if isinstance(v, Decimal)}
    rule["literals"] = [f"@{i}" if isinstance(v, Decimal) else v for i, v in enumerate(literals)]
    text = json.dumps(rule)
    for mark, number in numbers.items():
        text = text.replace(f'"{mark}"', number)
    out = QueryRules.parse([text], {}, FIELDS).apply(TABLE)
    return list(out.column("n").to_pylist())


@pytest.mark.parametrize("literal", ["01:00:00", "01:00", [1, 0, 0, 0], [1, 0]])
def test_time_literals(literal: Any) -> None:
    assert keep("t", "TIME(3)", "EQUAL", literal) == [2]


@pytest.mark.parametrize(
    "literal",
    ["2026-01-01T00:00:00.001Z", "2026-01-01T01:00:00.001+01:00", Decimal("1767225600.001")],
)
def test_instant_literals(literal: Any) -> None:
    assert keep("at", "TIMESTAMP(3) WITH LOCAL TIME ZONE", "EQUAL", literal) == [2]
    assert keep("at", "TIMESTAMP(3) WITH LOCAL TIME ZONE", "LESS_THAN", "1970-01-01T00:00:00Z") == [4]


def test_bytes_compare_unsigned_as_java() -> None:
    b64 = base64.b64encode(b"\x80").decode()
    assert keep("raw", "BYTES", "GREATER_THAN", b64) == [2]  # 0xff > 0x80 > 0x00 (unsigned)
    assert keep("raw", "BYTES", "EQUAL", "") == [4]
    with pytest.raises(PolicyRuleError, match="base64"):
        keep("raw", "BYTES", "EQUAL", "not base64!")


def test_float_literals_round_to_float_as_java() -> None:
    assert keep("f", "FLOAT", "EQUAL", 0.1) == [1]  # 0.1 read as Java's (float) 0.1
    assert keep("f", "FLOAT", "LESS_THAN", 0) == [4]  # -0.0 < 0.0 under Float.compare


def test_wide_decimals_compare_exactly() -> None:
    assert keep("big", "DECIMAL(38, 10)", "GREATER_THAN", Decimal("1234567890123456789012345678")) == [1]
    assert keep("big", "DECIMAL(38, 10)", "EQUAL", Decimal("-1.5")) == [4]
    with pytest.raises(PolicyRuleError, match="without rounding"):
        keep("big", "DECIMAL(38, 10)", "EQUAL", Decimal("0.00000000001"))


def test_like_as_java_reads_it() -> None:
    assert keep("s", "STRING", "LIKE", "a_b") == [2]  # '_' matches no line end (Java's '.')
    assert keep("s", "STRING", "LIKE", "a%b") == [1, 2]  # '%' matches line ends ((?s:.*))
    assert keep("s", "STRING", "LIKE", "100\\%") == [3]
    assert keep("s", "STRING", "LIKE", "a\\_b") == [2]
    assert like_regex("x.y") == "\\A(?:x\\x{2e}y)\\z"


def test_a_read_without_the_columns_a_rule_needs_is_refused() -> None:
    rule = json.dumps(
        {
            "kind": "LEAF",
            "transform": {"name": "FIELD_REF", "fieldRef": {"index": 6, "name": "n", "type": "INT"}},
            "function": "EQUAL",
            "literals": [1],
        }
    )
    rules = QueryRules.parse([rule], {}, FIELDS)
    with pytest.raises(PolicyRuleError, match="'n' is not among the columns read"):
        rules.apply(TABLE.select(["s"]))
    assert rules.apply(TABLE.select(["s", "n"])).num_rows == 1
    # a mask on a column the read leaves out changes nothing and needs nothing
    masked = QueryRules.parse([], {"s": json.dumps({"name": "UPPER", "inputs": ["x"]})}, FIELDS)
    assert masked.apply(TABLE.select(["n"])).equals(TABLE.select(["n"]))
    assert masked.apply(TABLE.select(["s"])).column("s").to_pylist() == ["X", "X", "X", "X"]
    empty = TABLE.slice(0, 0)
    assert masked.apply(empty).num_rows == 0
