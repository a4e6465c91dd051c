"""Merge engines end to end: our writer (in-buffer merge), merge-on-read and full compaction of
``partial-update``, ``aggregation`` (every implemented function) and ``first-row`` tables, value by value
with nulls and retractions, over several commits; every table reads the same before and after compaction.
A model built from the row-at-a-time reference (``merge_reference``) checks random histories."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.compact import compact
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from tests.table.mergetree.merge_reference import merge_group

Row = dict[str, Any]


def create(tmp_path: Path, schema: pa.Schema, options: dict[str, str], name: str = "t") -> FileStoreTable:
    path = str(tmp_path / "db.db" / name)
    fields, highest = from_arrow_schema(schema)
    keys = tuple(f.name for f in schema if not f.nullable)
    table_schema = TableSchema(0, fields, highest, (), keys, {"bucket": "2", **options})
    assert SchemaManager(get_file_io(path), path).commit_new_schema(table_schema)
    return open_table(path)


def write(table: FileStoreTable, rows: list[Row]) -> None:
    """One commit of ``rows`` (``_row_kind`` defaults to +I)."""
    data = pa.Table.from_pylist([{"_row_kind": "+I", **r} for r in rows], schema=_with_kind(table))
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(data)
    builder.new_commit().commit(w.prepare_commit())
    w.close()


def _with_kind(table: FileStoreTable) -> pa.Schema:
    return table.arrow_schema().append(pa.field("_row_kind", pa.string()))


def read(table: FileStoreTable, columns: list[str] | None = None) -> list[Row]:
    builder = table.new_read_builder()
    if columns is not None:
        builder = builder.with_projection(columns)
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: r.get("k", 0))


def read_compact_read(table: FileStoreTable) -> list[Row]:
    """The rows, checked to read the same after a full compaction (which must rewrite something)."""
    before = read(table)
    result = compact(table)
    assert result.snapshot_ids, "nothing was compacted"
    after = read(table)
    assert repr(after) == repr(before)  # repr: NaN equals NaN, -0.0 differs from 0.0
    levels = {f.level for s in table.new_read_builder().new_scan().plan().splits() for f in s.files}
    assert levels == {4}
    return after


# ---- partial-update ---------------------------------------------------------------------------------

PU_SCHEMA = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.int64()), ("s", pa.string())])


def test_partial_update_keeps_the_last_non_null_value_of_each_field(tmp_path: Path) -> None:
    table = create(tmp_path, PU_SCHEMA, {"merge-engine": "partial-update"})
    write(table, [{"k": 1, "a": 1, "s": None}, {"k": 2, "a": None, "s": "x"}, {"k": 3, "a": 3, "s": "c"}])
    write(table, [{"k": 1, "a": None, "s": "one"}, {"k": 2, "a": 20, "s": None}, {"k": 1, "a": 10}])
    assert read(table) == [
        {"k": 1, "a": 10, "s": "one"},
        {"k": 2, "a": 20, "s": "x"},
        {"k": 3, "a": 3, "s": "c"},
    ]
    write(
        table,
        [
            {"k": 3, "a": None, "s": None},
            {"k": 4, "a": None, "s": None},
            {"k": 2, "s": "y", "_row_kind": "+U"},
        ],
    )
    assert read_compact_read(table) == [
        {"k": 1, "a": 10, "s": "one"},
        {"k": 2, "a": 20, "s": "y"},
        {"k": 3, "a": 3, "s": "c"},  # nulls never overwrite
        {"k": 4, "a": None, "s": None},
    ]
    write(table, [{"k": 4, "a": 4}])
    assert read(table)[3] == {"k": 4, "a": 4, "s": None}


def test_partial_update_refuses_deletes_by_default(tmp_path: Path) -> None:
    table = create(tmp_path, PU_SCHEMA, {"merge-engine": "partial-update"})
    write(table, [{"k": 1, "a": 1, "s": "a"}])
    with pytest.raises(ValidationError, match="Partial update can not accept delete records"):
        write(table, [{"k": 1, "_row_kind": "-D"}])
    assert read(table) == [{"k": 1, "a": 1, "s": "a"}]


def test_partial_update_ignore_delete(tmp_path: Path) -> None:
    table = create(
        tmp_path, PU_SCHEMA, {"merge-engine": "partial-update", "partial-update.ignore-delete": "true"}
    )
    write(table, [{"k": 1, "a": 1, "s": "a"}, {"k": 2, "a": 2}])
    write(
        table,
        [
            {"k": 1, "_row_kind": "-D"},
            {"k": 2, "a": 5, "_row_kind": "-U"},
            {"k": 2, "s": "b", "_row_kind": "+U"},
        ],
    )
    assert read_compact_read(table) == [{"k": 1, "a": 1, "s": "a"}, {"k": 2, "a": 2, "s": "b"}]


def test_partial_update_remove_record_on_delete(tmp_path: Path) -> None:
    table = create(
        tmp_path,
        PU_SCHEMA,
        {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    )
    write(table, [{"k": 1, "a": 1, "s": "a"}, {"k": 2, "a": 2, "s": "b"}, {"k": 3, "a": 3, "s": "c"}])
    # k=1 deleted; k=2 deleted then partly re-inserted (the old fields are gone); -U changes nothing
    write(
        table, [{"k": 1, "_row_kind": "-D"}, {"k": 2, "_row_kind": "-D"}, {"k": 3, "a": 3, "_row_kind": "-U"}]
    )
    write(table, [{"k": 2, "s": "new"}])
    assert read(table) == [{"k": 2, "a": None, "s": "new"}, {"k": 3, "a": 3, "s": "c"}]
    # A delete and a re-insert in one write buffer merge into a plain +I there (Java's in-buffer merge
    # is the same function), so the older file's fields survive; a delete of an unknown key vanishes.
    write(table, [{"k": 3, "_row_kind": "-D"}, {"k": 3, "a": 33}, {"k": 9, "_row_kind": "-D"}])
    assert read_compact_read(table) == [{"k": 2, "a": None, "s": "new"}, {"k": 3, "a": 33, "s": "c"}]


# ---- aggregation ---------------------------------------------------------------------------------------

AGG_SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), False),
        ("sum_i", pa.int32()),
        ("sum_d", pa.float64()),
        ("sum_dec", pa.decimal128(10, 2)),
        ("prod", pa.int64()),
        ("mn", pa.string()),
        ("mx", pa.float64()),
        ("lv", pa.int32()),
        ("lnn", pa.int32()),
        ("fv", pa.int32()),
        ("fnn", pa.string()),
        ("la", pa.string()),
        ("band", pa.bool_()),
        ("bor", pa.bool_()),
        ("dflt", pa.int32()),
    ]
)
AGG_OPTIONS = {
    "merge-engine": "aggregation",
    "fields.sum_i.aggregate-function": "sum",
    "fields.sum_d.aggregate-function": "sum",
    "fields.sum_dec.aggregate-function": "sum",
    "fields.prod.aggregate-function": "product",
    "fields.mn.aggregate-function": "min",
    "fields.mx.aggregate-function": "max",
    "fields.lv.aggregate-function": "last_value",
    "fields.lnn.aggregate-function": "last_non_null_value",
    "fields.fv.aggregate-function": "first_value",
    "fields.fnn.aggregate-function": "first_not_null_value",  # Java's legacy name
    "fields.la.aggregate-function": "listagg",
    "fields.la.list-agg-delimiter": "|",
    "fields.band.aggregate-function": "bool_and",
    "fields.bor.aggregate-function": "bool_or",
}


def test_aggregation_functions_value_by_value(tmp_path: Path) -> None:
    table = create(tmp_path, AGG_SCHEMA, AGG_OPTIONS)
    dec = Decimal
    write(
        table,
        [
            {
                "k": 1,
                "sum_i": 2**31 - 1,
                "sum_d": 0.1,
                "sum_dec": dec("1.10"),
                "prod": 3,
                "mn": "b",
                "mx": 1.5,
                "lv": 1,
                "lnn": 1,
                "fv": None,
                "fnn": None,
                "la": "a",
                "band": True,
                "bor": None,
                "dflt": 1,
            },
            {
                "k": 2,
                "sum_i": None,
                "sum_d": None,
                "sum_dec": None,
                "prod": None,
                "mn": None,
                "mx": None,
                "lv": None,
                "lnn": None,
                "fv": None,
                "fnn": None,
                "la": None,
                "band": None,
                "bor": None,
                "dflt": None,
            },
        ],
    )
    write(
        table,
        [
            {
                "k": 1,
                "sum_i": 1,
                "sum_d": 0.2,
                "sum_dec": dec("2.25"),
                "prod": -4,
                "mn": "a",
                "mx": None,
                "lv": None,
                "lnn": None,
                "fv": 7,
                "fnn": "first",
                "la": None,
                "band": None,
                "bor": False,
                "dflt": None,
            },
            {
                "k": 1,
                "sum_i": 1,
                "sum_d": None,
                "sum_dec": None,
                "prod": 5,
                "mn": "é",
                "mx": float("nan"),
                "lv": 3,
                "lnn": None,
                "fv": 8,
                "fnn": "second",
                "la": "b",
                "band": False,
                "bor": True,
                "dflt": 3,
                "_row_kind": "+U",
            },
        ],
    )
    write(table, [{"k": 2, "sum_i": 5, "la": "", "band": True, "mx": -0.0}, {"k": 3, "dflt": 9}])
    expected: list[Row] = [
        {
            "k": 1,
            "sum_i": -(2**31) + 1,
            "sum_d": 0.1 + 0.2,
            "sum_dec": dec("3.35"),
            "prod": -60,
            "mn": "a",
            "mx": float("nan"),
            "lv": 3,
            "lnn": 1,
            "fv": None,
            "fnn": "first",
            "la": "a|b",
            "band": False,
            "bor": True,
            "dflt": 3,
        },
        {
            "k": 2,
            "sum_i": 5,
            "sum_d": None,
            "sum_dec": None,
            "prod": None,
            "mn": None,
            "mx": -0.0,
            "lv": None,
            "lnn": None,
            "fv": None,
            "fnn": None,
            "la": "",
            "band": True,
            "bor": None,
            "dflt": None,
        },
        {"k": 3, **{f.name: None for f in AGG_SCHEMA if f.name != "k"}, "dflt": 9},
    ]
    got = read_compact_read(table)
    assert repr(got) == repr(expected)  # repr: NaN == NaN, and -0.0 is not 0.0
    # a projection merges only what it reads, to the same values
    projected: list[Row] = expected
    assert read(table, ["la", "k", "prod"]) == [
        {"la": r["la"], "k": r["k"], "prod": r["prod"]} for r in projected
    ]


RETRACT_SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), False),
        ("total", pa.int64()),
        ("amount", pa.float64()),
        ("factor", pa.decimal128(6, 2)),
        ("last", pa.string()),
        ("last_nn", pa.int32()),
        ("peak", pa.int32()),
    ]
)
RETRACT_OPTIONS = {
    "merge-engine": "aggregation",
    "fields.default-aggregate-function": "sum",
    "fields.factor.aggregate-function": "product",
    "fields.last.aggregate-function": "last_value",
    "fields.last_nn.aggregate-function": "last_non_null_value",
    "fields.peak.aggregate-function": "max",
    "fields.peak.ignore-retract": "true",
}


def test_aggregation_retractions(tmp_path: Path) -> None:
    table = create(tmp_path, RETRACT_SCHEMA, RETRACT_OPTIONS)
    write(
        table,
        [
            {
                "k": 1,
                "total": 10,
                "amount": 1.5,
                "factor": Decimal("3.00"),
                "last": "a",
                "last_nn": 1,
                "peak": 5,
            },
            {
                "k": 2,
                "total": 7,
                "amount": 2.0,
                "factor": Decimal("2.00"),
                "last": "b",
                "last_nn": 2,
                "peak": 9,
            },
        ],
    )
    write(
        table,
        [
            {
                "k": 1,
                "total": 4,
                "amount": 0.5,
                "factor": Decimal("1.50"),
                "last": "x",
                "last_nn": 1,
                "peak": 50,
                "_row_kind": "-U",
            },
            {
                "k": 1,
                "total": 6,
                "amount": None,
                "factor": None,
                "last": None,
                "last_nn": None,
                "peak": 6,
                "_row_kind": "+U",
            },
            {
                "k": 2,
                "total": 7,
                "amount": 2.0,
                "factor": Decimal("2.00"),
                "last": "b",
                "last_nn": None,
                "peak": 9,
                "_row_kind": "-D",
            },
            {
                "k": 3,
                "total": 3,
                "amount": 3.0,
                "factor": Decimal("3.00"),
                "last": "c",
                "last_nn": 3,
                "peak": 3,
                "_row_kind": "-D",
            },
        ],
    )
    expected = [
        # The -U/+U pair is first merged in the write buffer, from a null accumulator, as Java does:
        # total: -4 + 6 = 2, then 10 + 2; amount: -0.5, then 1.5 - 0.5; factor: retract(null, 1.50) is
        # 1.50 (product keeps the input), then 3.00 * 1.50; last: null; last_nn: the retraction of a
        # non-null value nulls it in the buffer, then 1 stays the last non-null; peak ignores -U.
        {
            "k": 1,
            "total": 12,
            "amount": 1.0,
            "factor": Decimal("4.50"),
            "last": None,
            "last_nn": 1,
            "peak": 6,
        },
        # A lone -D reaches the file and retracts the older row's values on read: it does not remove
        # an aggregated row (2.00 / 2.00 for the product; a null retraction keeps last_nn).
        {"k": 2, "total": 0, "amount": 0.0, "factor": Decimal("1.00"), "last": None, "last_nn": 2, "peak": 9},
        # k=3: a lone -D of a key never written is dropped by the reader
    ]
    assert read_compact_read(table) == expected
    write(table, [{"k": 3, "total": 1}])
    assert read(table)[2] == {
        "k": 3,
        "total": 1,
        "amount": None,
        "factor": None,
        "last": None,
        "last_nn": None,
        "peak": None,
    }


def test_aggregation_refuses_retracting_what_cannot_be(tmp_path: Path) -> None:
    table = create(tmp_path, RETRACT_SCHEMA, {**RETRACT_OPTIONS, "fields.peak.ignore-retract": "false"})
    write(table, [{"k": 1, "total": 1, "peak": 1}])
    with pytest.raises(UnsupportedError, match="'max' does not support retraction") as e:
        write(table, [{"k": 1, "total": 1, "peak": 1, "_row_kind": "-U"}])
    assert e.value.fields["field"] == "peak"
    assert read(table)[0]["total"] == 1


def test_aggregation_with_ignore_delete_drops_retractions_on_write(tmp_path: Path) -> None:
    table = create(
        tmp_path,
        RETRACT_SCHEMA,
        {**RETRACT_OPTIONS, "ignore-delete": "true", "fields.peak.ignore-retract": "false"},
    )
    write(table, [{"k": 1, "total": 1, "peak": 1}])
    write(
        table, [{"k": 1, "total": 5, "peak": 7, "_row_kind": "-U"}, {"k": 1, "total": 2, "_row_kind": "+U"}]
    )
    assert read(table)[0]["total"] == 3
    assert read(table)[0]["peak"] == 1


# ---- first-row -------------------------------------------------------------------------------------------


def test_first_row_keeps_the_first_row_of_each_key(tmp_path: Path) -> None:
    table = create(tmp_path, PU_SCHEMA, {"merge-engine": "first-row", "bucket": "1"})
    expected: dict[int, Row] = {}
    for commit in range(7):  # fills levels 4, 3, 2, 1, then merges into level 1
        rows: list[Row] = [
            {"k": k, "a": commit, "s": f"c{commit}"} for k in range(commit * 3, commit * 3 + 8)
        ]
        rows += [{"k": commit * 3, "a": -1, "s": "later in the same commit"}]
        write(table, rows)
        for r in rows:
            expected.setdefault(r["k"], r)
        assert read(table) == [expected[k] for k in sorted(expected)]
    files = table.new_read_builder().new_scan().plan().splits()[0].files
    assert all(f.level > 0 for f in files)
    assert {f.level for f in files} == {1, 2, 3, 4}
    assert read_compact_read(table) == [expected[k] for k in sorted(expected)]


def test_first_row_deletes(tmp_path: Path) -> None:
    table = create(tmp_path, PU_SCHEMA, {"merge-engine": "first-row"})
    write(table, [{"k": 1, "a": 1}])
    with pytest.raises(ValidationError, match="First row merge engine can not accept DELETE"):
        write(table, [{"k": 1, "_row_kind": "-D"}])
    ignoring = create(
        tmp_path, PU_SCHEMA, {"merge-engine": "first-row", "first-row.ignore-delete": "true"}, "ign"
    )
    write(ignoring, [{"k": 1, "a": 1}, {"k": 2, "_row_kind": "-D"}])
    write(ignoring, [{"k": 1, "_row_kind": "-D"}, {"k": 2, "a": 2, "_row_kind": "-U"}, {"k": 2, "a": 3}])
    assert read(ignoring) == [{"k": 1, "a": 1, "s": None}, {"k": 2, "a": 3, "s": None}]


# ---- random histories against the reference ----------------------------------------------------------

MODEL_SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), False), ("a", pa.int64()), ("d", pa.float64()), ("s", pa.string())]
)
MODEL_CASES: list[tuple[str, dict[str, str]]] = [
    ("partial-update", {"partial-update.remove-record-on-delete": "true"}),
    ("partial-update", {"ignore-delete": "true"}),
    (
        "aggregation",
        {
            "fields.a.aggregate-function": "sum",
            "fields.d.aggregate-function": "sum",
            "fields.s.aggregate-function": "last_value",
        },
    ),
    (
        "aggregation",
        {
            "fields.a.aggregate-function": "product",
            "fields.d.aggregate-function": "max",
            "fields.d.ignore-retract": "true",
            "fields.s.aggregate-function": "last_non_null_value",
        },
    ),
    ("first-row", {"ignore-delete": "true"}),
]
_TYPES = [f.type for f in MODEL_SCHEMA]


def _aggs(options: dict[str, str]) -> list[tuple[str, Any, bool, str]]:
    fields, _ = from_arrow_schema(MODEL_SCHEMA)
    out = []
    for f in fields:
        name = (
            "primary-key"
            if f.name == "k"
            else options.get(f"fields.{f.name}.aggregate-function", "last_non_null_value")
        )
        out.append((name, f.type, options.get(f"fields.{f.name}.ignore-retract") == "true", ","))
    return out


def _engine_result(engine: str, rows: list[Any], result: Any) -> Any:
    """Java's result, except where Java emits a row of nulls (partial-update: nothing but retractions
    left), which the engine turns into a -D of the key's last row."""
    if engine == "partial-update" and result is not None and result[0][0] is None:
        # Java's -D result carries a row of nulls too; the engine's carries the key's last row
        return (rows[-1][0], 3, rows[-1][2] if result[1] == 0 else result[2])
    return result


@pytest.mark.parametrize(
    ("engine", "options"), MODEL_CASES, ids=[f"{e}-{sorted(o)[0]}" for e, o in MODEL_CASES]
)
def test_random_history_reads_as_the_reference(tmp_path: Path, engine: str, options: dict[str, str]) -> None:
    table = create(tmp_path, MODEL_SCHEMA, {"merge-engine": engine, **options})
    rng = random.Random(engine + str(options))
    names = [f.name for f in MODEL_SCHEMA]
    runs: list[list[tuple[list[Any], int, int]]] = []  # the model: per commit, its merged rows
    visible: dict[int, list[Any]] = {}  # first-row: what lookup compaction let through
    kw: dict[str, Any] = {
        "aggs": _aggs(options),
        "ignore_delete": options.get("ignore-delete") == "true",
        "remove_record_on_delete": options.get("partial-update.remove-record-on-delete") == "true",
    }
    seq = 0
    for commit in range(5):
        rows: list[Row] = []
        for _ in range(40):
            rows.append(
                {
                    "k": rng.randrange(12),
                    "a": rng.choice((None, rng.randrange(-5, 9) or 1)),
                    "d": rng.choice((None, rng.uniform(-2, 2))),
                    "s": rng.choice((None, "x", "y", "")),
                    "_row_kind": rng.choice(("+I", "+I", "+U", "-U", "-D")),
                }
            )
        write(table, rows)
        if kw["ignore_delete"]:
            rows = [r for r in rows if r["_row_kind"] in ("+I", "+U")]
        groups: dict[int, list[tuple[list[Any], int, int]]] = {}
        for r in rows:
            kind = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}[r["_row_kind"]]
            groups.setdefault(r["k"], []).append(([r[n] for n in names], kind, seq))
            seq += 1
        merged = [_engine_result(engine, g, merge_group(engine, g, **kw)) for g in groups.values()]
        merged = [m for m in merged if m is not None]
        runs.append(merged)
        if engine == "first-row":
            for values, _kind, _ in sorted(merged, key=lambda m: m[2]):
                visible.setdefault(values[0], values)
            expected = [dict(zip(names, visible[k])) for k in sorted(visible)]
        else:
            expected = []
            for k in sorted({m[0][0] for run in runs for m in run}):
                history = sorted((m for run in runs for m in run if m[0][0] == k), key=lambda m: m[2])
                result = _engine_result(engine, history, merge_group(engine, history, **kw))
                if result is not None and result[1] in (0, 2):
                    expected.append(dict(zip(names, result[0])))
        assert read(table) == expected, commit
    assert read_compact_read(table) == expected
