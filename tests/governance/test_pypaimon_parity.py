"""Our application of row filters and column masks equals pypaimon 2.1.0's on the same rows.

Every case is an ``/auth`` answer (``filter``, ``columnMasking``) in Java's JSON shapes, applied to one
Arrow table by ``QueryRules`` here and, in pypaimon 2.1.0's venv (one subprocess for all cases), by
pypaimon's own ``TableQueryAuthResult.extract_row_filter`` and ``apply_auth_masking``: the rows and values
must be identical. The data has nulls, non-ASCII text, negative and boundary positions. Java's orders
that pypaimon does not reproduce (NaN, -0.0) are tested apart, against Java's ``compareTo``."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.governance.permissions import APPLICABLE
from paimon_meta.governance.policies import QueryRules
from paimon_meta.model.types import BIGINT, BOOLEAN, DATE, DECIMAL, DOUBLE, INT, STRING, TIMESTAMP, DataField
from tests.fixtures.interop import run_pypaimon

pytestmark = pytest.mark.interop

FIELDS = [
    DataField(0, "id", INT()),
    DataField(1, "name", STRING()),
    DataField(2, "email", STRING()),
    DataField(3, "region", STRING()),
    DataField(4, "amount", DOUBLE()),
    DataField(5, "qty", BIGINT()),
    DataField(6, "day", DATE()),
    DataField(7, "ts", TIMESTAMP(6)),
    DataField(8, "price", DECIMAL(10, 2)),
    DataField(9, "flag", BOOLEAN()),
    DataField(10, "pos", INT()),
    DataField(11, "chars", STRING()),
]
TYPES = {f.name: f.type.to_json() for f in FIELDS}
INDEX = {f.name: f.id for f in FIELDS}


def _table() -> pa.Table:
    ts = dt.datetime(2026, 1, 31, 12, 0, 0, 123000)
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5, 6, None, 8], pa.int32()),
            "name": ["alice", "Bob", "ünïcödé", None, "xxanaxx", "", "Zoë-Ann", "carl"],
            "email": [
                "alice@example.com",
                "bob@corp.eu",
                None,
                "d@x.io",
                "ana@example.org",
                "",
                "zoe@a_c.com",
                "c",
            ],
            "region": ["eu", "us", "eu", None, "apac", "eu", "us", "EU"],
            "amount": [1.5, -2.0, 0.0, None, 1e9, 3.25, -0.5, 7.0],
            "qty": pa.array([10, -5, 0, 2**40, None, 7, 3, 1], pa.int64()),
            "day": pa.array(
                [
                    *(dt.date(2026, 1, 30), dt.date(2026, 1, 31), dt.date(2026, 2, 1), None),
                    *(
                        dt.date(2025, 12, 31),
                        dt.date(2024, 2, 29),
                        dt.date(1969, 12, 31),
                        dt.date(2026, 6, 7),
                    ),
                ],
                pa.date32(),
            ),
            "ts": pa.array(
                [
                    *(ts, ts - dt.timedelta(microseconds=1), ts + dt.timedelta(days=1), None),
                    *(dt.datetime(1970, 1, 1), ts, dt.datetime(2026, 12, 31, 23, 59, 59, 999999), ts),
                ],
                pa.timestamp("us"),
            ),
            "price": pa.array(
                [
                    *(Decimal("12.50"), Decimal("-1.00"), None, Decimal("0.00")),
                    *(Decimal("99999999.99"), Decimal("12.49"), Decimal("12.51"), Decimal("1.00")),
                ],
                pa.decimal128(10, 2),
            ),
            "flag": [True, False, None, True, False, True, None, False],
            "pos": pa.array([1, 2, -2, 0, None, 3, 100, -100], pa.int32()),
            "chars": ["a", "x", None, "", "x", "b", "-", "c"],
        }
    )


def ref(name: str) -> dict[str, Any]:
    return {"index": INDEX[name], "name": name, "type": TYPES[name]}


def fld(name: str) -> dict[str, Any]:
    return {"name": "FIELD_REF", "fieldRef": ref(name)}


def tf(name: str, *inputs: Any, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "inputs": [ref(i[1:]) if isinstance(i, str) and i.startswith("$") else i for i in inputs],
    } | extra


def leaf(transform: dict[str, Any], function: str, *literals: Any) -> str:
    return json.dumps(
        {"kind": "LEAF", "transform": transform, "function": function, "literals": list(literals)}
    )


def both(function: str, *children: str) -> str:
    return json.dumps(
        {"kind": "COMPOUND", "function": function, "children": [json.loads(c) for c in children]}
    )


FILTERS: dict[str, list[str]] = {
    "equal": [leaf(fld("region"), "EQUAL", "eu")],
    "not_equal_drops_nulls": [leaf(fld("region"), "NOT_EQUAL", "eu")],
    "null_literal_is_false": [leaf(fld("region"), "EQUAL", None)],
    "less_than": [leaf(fld("id"), "LESS_THAN", 4)],
    "greater_or_equal_double": [leaf(fld("amount"), "GREATER_OR_EQUAL", 0)],
    "less_or_equal_bigint": [leaf(fld("qty"), "LESS_OR_EQUAL", 7)],
    "greater_than": [leaf(fld("qty"), "GREATER_THAN", -5)],
    "in_with_nulls": [leaf(fld("id"), "IN", 1, None, 3, 8)],
    "in_empty": [leaf(fld("id"), "IN")],
    "not_in": [leaf(fld("region"), "NOT_IN", "eu", "us")],
    "not_in_with_null": [leaf(fld("region"), "NOT_IN", "eu", None)],
    "between": [leaf(fld("id"), "BETWEEN", 2, 5)],
    "not_between": [leaf(fld("price"), "NOT_BETWEEN", 0, 12.5)],
    "is_null": [leaf(fld("name"), "IS_NULL")],
    "is_not_null": [leaf(fld("flag"), "IS_NOT_NULL")],
    "boolean": [leaf(fld("flag"), "EQUAL", True)],
    "starts_with": [leaf(fld("email"), "STARTS_WITH", "a")],
    "ends_with": [leaf(fld("email"), "ENDS_WITH", ".com")],
    "contains": [leaf(fld("email"), "CONTAINS", "@")],
    "like": [leaf(fld("email"), "LIKE", "%@example.%")],
    "like_underscore_and_escape": [leaf(fld("email"), "LIKE", "%a\\_c%")],
    "like_single_chars": [leaf(fld("name"), "LIKE", "_o%")],
    "true": [leaf({"name": "NULL"}, "TRUE")],
    "false": [leaf({"name": "NULL"}, "FALSE")],
    "upper": [leaf(tf("UPPER", "$name"), "STARTS_WITH", "ZO")],
    "lower": [leaf(tf("LOWER", "$region"), "EQUAL", "eu")],
    "cast_to_bigint": [leaf({"name": "CAST", "fieldRef": ref("id"), "type": "BIGINT"}, "GREATER_THAN", 2)],
    "cast_to_string": [leaf({"name": "CAST", "fieldRef": ref("qty"), "type": "STRING"}, "EQUAL", "10")],
    "date_text": [leaf(fld("day"), "GREATER_OR_EQUAL", "2026-01-31")],
    "date_array": [leaf(fld("day"), "EQUAL", [2026, 2, 1])],
    "timestamp_array": [leaf(fld("ts"), "LESS_THAN", [2026, 1, 31, 12, 0, 0, 123000000])],
    "decimal": [leaf(fld("price"), "EQUAL", 12.5)],
    "year": [leaf({"name": "YEAR", "fieldRef": ref("day")}, "EQUAL", 2026)],
    "month_of_timestamp": [leaf({"name": "MONTH", "fieldRef": ref("ts")}, "EQUAL", 1)],
    "day_of_week": [leaf({"name": "DAY_OF_WEEK", "fieldRef": ref("day")}, "EQUAL", 1)],
    "iso_week": [leaf({"name": "WEEK", "fieldRef": ref("day")}, "GREATER_THAN", 5)],
    "length": [leaf(tf("LENGTH", "$name"), "GREATER_THAN", 4)],
    "bit_length": [leaf(tf("BIT_LENGTH", "$name"), "EQUAL", 56)],
    "substring": [leaf(tf("SUBSTRING", "$email", 1, 3), "EQUAL", "ali")],
    "substring_negative": [leaf(tf("SUBSTRING", "$name", -2), "EQUAL", "nn")],
    "substring_by_column": [leaf(tf("SUBSTRING", "$name", "$pos"), "STARTS_WITH", "o")],
    "trim": [leaf(tf("TRIM", "$name", "x", trimFlag="BOTH"), "EQUAL", "ana")],
    "trim_by_column": [leaf(tf("TRIM", "$name", "$chars", trimFlag="LEADING"), "EQUAL", "lice")],
    "concat": [leaf(tf("CONCAT", "$region", "-", "$name"), "EQUAL", "eu-alice")],
    "concat_ws": [leaf(tf("CONCAT_WS", "|", "$region", None, "$name"), "ENDS_WITH", "|Bob")],
    "pad": [leaf(tf("PAD", "$region", 4, "*", direction="LEFT"), "EQUAL", "**eu")],
    "overlay": [leaf(tf("OVERLAY", "$name", "##", 2), "STARTS_WITH", "a##")],
    "translate": [leaf(tf("TRANSLATE", "$region", "eu", "EU"), "EQUAL", "EU")],
    "compound": [
        both(
            "OR",
            both("AND", leaf(fld("region"), "EQUAL", "eu"), leaf(fld("amount"), "GREATER_THAN", 1)),
            leaf(fld("name"), "IS_NULL"),
        )
    ],
    "anded": [
        leaf(fld("id"), "GREATER_THAN", 1),
        leaf(fld("email"), "IS_NOT_NULL"),
        leaf(fld("flag"), "EQUAL", False),
    ],
}

MASKS: dict[str, dict[str, str]] = {
    "null_string": {"email": json.dumps({"name": "NULL"})},
    "null_number": {"amount": json.dumps({"name": "NULL"}), "price": json.dumps({"name": "NULL"})},
    "null_date": {"day": json.dumps({"name": "NULL"})},
    "upper": {"name": json.dumps(tf("UPPER", "$name"))},
    "first_letter": {"name": json.dumps(tf("SUBSTRING", "$name", 1, 1))},
    "concat_ws": {"email": json.dumps(tf("CONCAT_WS", "@", "***", "$region"))},
    "concat_literal": {"email": json.dumps(tf("CONCAT", "***", None))},
    "cast": {"qty": json.dumps({"name": "CAST", "fieldRef": ref("id"), "type": "BIGINT"})},
    "other_column": {"region": json.dumps(fld("name"))},
    "pad": {"name": json.dumps(tf("PAD", "$name", 6, "*", direction="RIGHT"))},
    "overlay": {"email": json.dumps(tf("OVERLAY", "$email", "****", 1, 5))},
    "translate": {"region": json.dumps(tf("TRANSLATE", "$region", "eu", "E"))},
    "trim": {"name": json.dumps(tf("TRIM", "$name", "x", trimFlag="TRAILING"))},
    "several": {"email": json.dumps({"name": "NULL"}), "name": json.dumps(tf("LOWER", "$name"))},
}

CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    **{f"filter/{k}": (v, {}) for k, v in FILTERS.items()},
    **{f"mask/{k}": ([], v) for k, v in MASKS.items()},
    "filter_and_mask_of_one_column": ([leaf(fld("email"), "CONTAINS", "example")], MASKS["null_string"]),
    "filters_and_masks": (FILTERS["anded"], MASKS["several"]),
}

PYPAIMON_SCRIPT = """
import json, sys
import pyarrow as pa
from pypaimon.catalog.table_query_auth import TableQueryAuthResult
from pypaimon.read.reader.auth_masking_reader import apply_auth_masking, compile_auth_masking_rules

class Field:
    def __init__(self, name):
        self.name = name

cases = json.load(open(sys.argv[1]))
table = pa.ipc.open_file(sys.argv[2]).read_all().combine_chunks()
out = {}
for name, (filters, masks, path) in cases.items():
    try:
        batch = table.to_batches()[0]
        rules = TableQueryAuthResult(filters or None, masks or None)
        keep = rules.extract_row_filter()
        if keep is not None:
            batch = batch.filter(keep(batch))
        if rules.column_masking:
            read = [Field(n) for n in batch.schema.names]
            compiled = compile_auth_masking_rules(rules.column_masking, read)
            batch = apply_auth_masking(batch, compiled)
        with pa.ipc.new_file(path, batch.schema) as w:
            w.write_batch(batch)
        out[name] = "ok"
    except Exception as e:
        out[name] = "error: " + repr(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pypaimon_results(tmp_path_factory: pytest.TempPathFactory, pypaimon_python: Path) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("parity")
    data = work / "data.arrow"
    table = _table()
    with pa.ipc.new_file(str(data), table.schema) as w:
        w.write_table(table)
    cases = {name: (f, m, str(work / f"{i}.arrow")) for i, (name, (f, m)) in enumerate(CASES.items())}
    (work / "cases.json").write_text(json.dumps(cases))
    status = run_pypaimon(PYPAIMON_SCRIPT, str(work / "cases.json"), str(data), python=pypaimon_python)
    out: dict[str, Any] = {}
    for name, (_f, _m, path) in cases.items():
        out[name] = pa.ipc.open_file(path).read_all() if status[name] == "ok" else status[name]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_rows_and_values_as_pypaimon(name: str, pypaimon_results: dict[str, Any]) -> None:
    filters, masks = CASES[name]
    theirs = pypaimon_results[name]
    assert isinstance(theirs, pa.Table), theirs
    ours = QueryRules.parse(filters, masks, FIELDS).apply(_table())
    assert ours.column_names == theirs.column_names
    assert ours.to_pylist() == theirs.to_pylist()
    if filters:  # a filter that keeps every row or none proves nothing
        assert (
            0 < ours.num_rows < _table().num_rows
            or name in ("filter/true", "filter/false")
            or (name.endswith(("null_literal_is_false", "in_empty", "not_in_with_null")))
        ), (name, ours.num_rows)


def test_floats_order_as_javas_compare_to() -> None:
    """Java compares FLOAT/DOUBLE with ``Double.compare``: NaN equals NaN and is above +inf, -0.0 is
    below 0.0 (pypaimon 2.1.0 uses IEEE comparisons and differs here)."""
    table = pa.table({"amount": [float("nan"), float("inf"), 0.0, -0.0, -1.0, None]})
    fields = [DataField(4, "amount", DOUBLE())]

    def rows(function: str, *literals: Any) -> list[Any]:
        rule = leaf(
            {"name": "FIELD_REF", "fieldRef": {"index": 4, "name": "amount", "type": "DOUBLE"}},
            function,
            *literals,
        )
        kept = QueryRules.parse([rule], {}, fields).apply(table).column("amount").to_pylist()
        return ["nan" if v is not None and math.isnan(v) else v for v in kept]

    assert rows("GREATER_THAN", 1e308) == ["nan", float("inf")]
    assert rows("LESS_THAN", 0) == [-0.0, -1.0]
    assert rows("EQUAL", 0) == [0.0]
    assert rows("IS_NAN") == ["nan"]
    assert rows("NOT_EQUAL", 0) == ["nan", float("inf"), -0.0, -1.0]


def test_the_access_table_is_pypaimons(pypaimon_python: Path) -> None:
    """Which access applies to which resource type: our table and pypaimon 2.1.0's, value for value."""
    theirs = run_pypaimon(
        "import json\n"
        "from pypaimon.management.permission_access import PermissionAccess\n"
        "print(json.dumps({t.name: sorted(a) for t, a in PermissionAccess._BUILT_INS.items()}))\n",
        python=pypaimon_python,
    )
    assert theirs == {t.value: sorted(a.value for a in accesses) for t, accesses in APPLICABLE.items()}
