"""Partial-update sequence groups: the vectorized merge against the row-at-a-time transcription of Java's
``updateWithSequenceGroup`` / ``retractWithSequenceGroup`` (random keys with null, tied and multi-field
sequences and every row kind), end to end through our writer, merge-on-read (with projections) and full
compaction, and the options refused."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.types import (
    BIGINT,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    INT,
    STRING,
    TIME,
    TIMESTAMP,
    TINYINT,
    DataField,
    DataType,
    TypeRoot,
)
from paimon_meta.table.mergetree.merge_engine import MergeEngine
from tests.table.mergetree.merge_reference import JavaError, Row, SeqGroup, partial_update_with_groups
from tests.table.mergetree.test_merge_engines import create, read, read_compact_read, write
from tests.table.mergetree.test_merge_functions import run_engine, same, schema

FIELDS = [
    DataField(0, "k", INT(False)),
    DataField(1, "a", INT()),
    DataField(2, "b", STRING()),
    DataField(3, "s1", BIGINT()),
    DataField(4, "c", INT()),
    DataField(5, "s2", INT()),
    DataField(6, "s3", STRING()),
    DataField(7, "e", STRING()),
]
OPTIONS = {
    "merge-engine": "partial-update",
    "fields.s1.sequence-group": "a,b",
    "fields.s2,s3.sequence-group": "c",
}
GROUPS: list[SeqGroup] = [([3], [1, 2]), ([5, 6], [4])]
ROOTS = [f.type.root for f in FIELDS]


def _value(r: random.Random, i: int) -> Any:
    if r.random() < 0.3:
        return None
    if ROOTS[i] is TypeRoot.VARCHAR:
        return r.choice(("", "a", "b", "é"))
    return r.randrange(-2, 4)  # few values: ties and reorderings are common


def random_keys(r: random.Random, retract_weight: float, keys: int = 150) -> list[list[Row]]:
    out, seq = [], 0
    for _ in range(keys):
        rows = []
        for _ in range(r.choice((1, 2, 2, 3, 4, 7))):
            kind = r.choice((1, 3)) if r.random() < retract_weight else r.choice((0, 0, 2))
            rows.append(([7] + [_value(r, i) for i in range(1, len(FIELDS))], kind, seq))
            seq += r.choice((1, 1, 5))
        out.append(rows)
    return out


def expected(rows: list[Row], ignore_delete: bool, aggs: dict[int, Any] | None = None) -> Row:
    """Java's result with the engine's two documented departures: a row of nulls drops the key (a -D of
    the last row's values is not compared), a row whose primary key Java left null has the key's."""
    values, kind, seq = partial_update_with_groups(
        rows, GROUPS, ROOTS, ignore_delete=ignore_delete, aggs=aggs
    )
    if len(rows) > 1 and all(v is None for v in values):
        return (values, 3, seq)
    if values[0] is None:
        values = [rows[-1][0][0], *values[1:]]
    return (values, kind, seq)


AGGREGATES: list[dict[str, str]] = [
    {},
    # a and c in groups, e in none (additions only)
    {"fields.a.aggregate-function": "sum", "fields.c.aggregate-function": "product", "e": "max"},
    {"fields.a.aggregate-function": "min", "fields.a.ignore-retract": "true", "e": "min"},
    {"fields.c.aggregate-function": "max", "fields.b.aggregate-function": "bool_or"},  # b: refused type
    {"fields.c.aggregate-function": "bool_and"},  # refused type
    {"fields.c.aggregate-function": "max"},  # no retract(): refused when a retraction reaches it
]


@pytest.mark.parametrize("aggregates", AGGREGATES)
@pytest.mark.parametrize("ignore_delete", [False, True])
def test_merge_matches_java(ignore_delete: bool, aggregates: dict[str, str]) -> None:
    aggregates = {
        (k if k.startswith("fields.") else f"fields.{k}.aggregate-function"): v for k, v in aggregates.items()
    }
    options = {**OPTIONS, "ignore-delete": str(ignore_delete).lower(), **aggregates}
    if "bool" in str(aggregates):
        with pytest.raises(ValidationError, match="Boolean"):
            MergeEngine.for_schema(schema(FIELDS, options)).check_fields(FIELDS)
        return
    engine = MergeEngine.for_schema(schema(FIELDS, options))
    aggs = {
        i: (v, f.type, options.get(f"fields.{f.name}.ignore-retract") == "true", ",")
        for i, f in enumerate(FIELDS)
        if (v := options.get(f"fields.{f.name}.aggregate-function"))
    }
    rng = random.Random(f"seq-groups-{ignore_delete}-{aggregates}")
    merged = 0
    for round_ in range(6):
        keys = random_keys(rng, (0.0, 0.2, 0.6)[round_ % 3])
        try:
            wants = [expected(rows, ignore_delete, aggs) for rows in keys]
        except JavaError:
            with pytest.raises(ValidationError, match=r"does not support retraction|by zero"):
                run_engine(engine, FIELDS, keys)
            continue
        merged += 1
        got = run_engine(engine, FIELDS, keys)
        values = [c.to_pylist() for c in got.columns]
        for g, (rows, want) in enumerate(zip(keys, wants)):
            assert int(got.kinds[g]) == want[1], (rows, want)
            if want[1] == 3 and len(rows) > 1:
                continue
            assert int(got.sequences[g]) == want[2], (rows, want)
            row = [values[i][g] for i in range(len(FIELDS))]
            assert all(same(a, b) for a, b in zip(row, want[0])), (rows, want[0], row)
    assert merged > 0


def test_pinned_values() -> None:
    engine = MergeEngine.for_schema(schema(FIELDS, OPTIONS))

    def merge(*rows: tuple[list[Any], int]) -> list[Any]:
        got = run_engine(engine, FIELDS, [[(v, kind, i) for i, (v, kind) in enumerate(rows)]])
        return [c.to_pylist()[0] for c in got.columns]

    # a b s1 | c s2 s3 | e
    assert merge(
        ([7, 1, "x", 5, 1, 1, "b", "e1"], 0),
        ([7, 2, None, 3, 2, 1, "a", None], 0),  # older in both groups: ignored; e stays
        ([7, None, None, None, None, None, None, "e2"], 0),  # null sequences: groups untouched
    ) == [7, 1, "x", 5, 1, 1, "b", "e2"]
    assert merge(
        ([7, 1, "x", 5, 1, 1, "b", "e1"], 0),
        ([7, None, "y", 5, None, 1, "b", None], 0),  # equal sequences: the group takes the row, nulls too
    ) == [7, None, "y", 5, None, 1, "b", "e1"]
    assert merge(
        ([7, 1, "x", 5, 1, 1, "b", "e1"], 0),
        ([7, 9, "z", 6, 9, None, "c", None], 3),  # -D: retracts group 1 and group 2 (nulls first: 1 > null)
    ) == [7, None, None, 6, 1, 1, "b", "e1"]
    assert merge(
        ([7, 1, "x", 5, 1, 1, "b", "e1"], 0),
        ([7, 9, "z", 6, 9, 2, None, None], 1),  # -U: s2,s3 = (2, null) > (1, "b")
    ) == [7, None, None, 6, None, 2, None, "e1"]


def test_write_read_compact_with_projection(tmp_path: Path) -> None:
    pa_schema = pa.schema(
        [
            pa.field("k", pa.int32(), False),
            *[("a", pa.int32()), ("b", pa.string()), ("s1", pa.int64())],
            *[("c", pa.int32()), ("s2", pa.int32()), ("s3", pa.string()), ("e", pa.string())],
        ]
    )
    table = create(tmp_path, pa_schema, OPTIONS)
    write(
        table, [{"k": 1, "a": 1, "b": "x", "s1": 5, "c": 1, "s2": 1, "s3": "b", "e": "e1"}, {"k": 2, "a": 2}]
    )
    write(
        table,
        [
            {"k": 1, "a": 2, "b": "late", "s1": 4, "e": "e2"},  # older group 1: only e changes
            {"k": 1, "c": 3, "s2": 1, "s3": "c"},
            {"k": 1, "a": 9, "s1": 6, "_row_kind": "-U"},  # retracts group 1 in the writer's buffer
            {"k": 2, "a": 20, "s1": 1, "_row_kind": "+U"},
        ],
    )
    one = {"k": 1, "a": None, "b": None, "s1": 6, "c": 3, "s2": 1, "s3": "c", "e": "e2"}
    two = {"k": 2, "a": 20, "b": None, "s1": 1, "c": None, "s2": None, "s3": None, "e": None}
    assert read(table) == [one, two]
    # the projection leaves out the sequence fields: they are still read and compared
    assert read(table, ["k", "c", "a"]) == [{"k": 1, "c": 3, "a": None}, {"k": 2, "c": None, "a": 20}]
    write(table, [{"k": 1, "a": 7, "b": "again", "s1": 6}])
    one.update(a=7, b="again")
    assert read_compact_read(table) == [one, two]
    write(table, [{"k": 2, "s1": 0, "a": 0, "_row_kind": "-D"}])  # older than s1=1: nothing retracted
    assert read(table) == [one, two]


def test_random_history_reads_as_the_reference(tmp_path: Path) -> None:
    """Commits of random rows (several per key, every kind): each commit's rows are merged in our writer's
    buffer, then with the older commits on read and by full compaction; the model merges the same way
    with the reference (a dropped key leaves a -D whose sequence fields are null: a no-op later)."""
    arrow = pa.schema(
        [
            pa.field("k", pa.int32(), False),
            *[("a", pa.int32()), ("b", pa.string()), ("s1", pa.int64())],
            *[("c", pa.int32()), ("s2", pa.int32()), ("s3", pa.string()), ("e", pa.string())],
        ]
    )
    options = {**OPTIONS, "fields.a.aggregate-function": "sum"}
    aggs = {1: ("sum", FIELDS[1].type, False, ",")}
    table = create(tmp_path, arrow, options)
    names = [f.name for f in FIELDS]
    kinds = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
    rng = random.Random("seq-group-history")
    history: dict[int, list[Row]] = {}
    seq = 0
    for _ in range(4):
        rows = []
        for _ in range(40):
            row = {n: _value(rng, i) for i, n in enumerate(names) if i}
            rows.append(
                {"k": rng.randrange(10), **row, "_row_kind": rng.choice(("+I", "+I", "+U", "-U", "-D"))}
            )
        write(table, rows)
        per_key: dict[int, list[Row]] = {}
        for r in rows:
            per_key.setdefault(r["k"], []).append(([r[n] for n in names], kinds[r["_row_kind"]], seq))
            seq += 1
        for k, key_rows in per_key.items():
            values, kind, last = expected(key_rows, False, aggs)
            history.setdefault(k, []).append(([k, *values[1:]], kind, last))  # a -D of ours keeps its key
        want = []
        for k in sorted(history):
            values, kind, _ = expected(history[k], False, aggs)
            if kind in (0, 2):
                want.append(dict(zip(names, values)))
        assert read(table) == want
    assert read_compact_read(table) == want
    assert want


def test_retractions_accepted_only_with_groups(tmp_path: Path) -> None:
    pa_schema = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.int32()), ("s", pa.int64())])
    table = create(tmp_path, pa_schema, {"merge-engine": "partial-update", "fields.s.sequence-group": "a"})
    write(table, [{"k": 1, "a": 1, "s": 1}])
    write(table, [{"k": 1, "a": 1, "s": 2, "_row_kind": "-D"}])
    assert read(table) == [{"k": 1, "a": None, "s": 2}]  # the group is retracted, the row stays


def test_aggregate_functions_in_and_out_of_groups(tmp_path: Path) -> None:
    pa_schema = pa.schema(
        [pa.field("k", pa.int32(), False), ("a", pa.int32()), ("s1", pa.int64()), ("m", pa.int32())]
    )
    options = {
        "merge-engine": "partial-update",
        "fields.s1.sequence-group": "a",
        "fields.a.aggregate-function": "sum",
        "fields.m.aggregate-function": "max",
    }
    table = create(tmp_path, pa_schema, options)
    write(
        table, [{"k": 1, "a": 1, "s1": 1, "m": 5}, {"k": 1, "a": 2, "s1": 0, "m": 3}]
    )  # older: still summed
    write(
        table,
        [
            {"k": 1, "a": 1, "s1": 2, "_row_kind": "-U"},  # retracted from the sum; m never sees it
            {"k": 1, "a": 10, "m": 9},  # no sequence: a is left alone
        ],
    )
    assert read(table) == [{"k": 1, "a": 2, "s1": 2, "m": 9}]
    assert read_compact_read(table) == [{"k": 1, "a": 2, "s1": 2, "m": 9}]


def _with(**options: str) -> dict[str, str]:
    return {"merge-engine": "partial-update", **options}


REFUSED = [
    (_with(**{"fields.s1.sequence-group": "zz"}), ValidationError, "Field zz can not be found"),
    (_with(**{"fields.zz.sequence-group": "a"}), ValidationError, "sequence field group: zz"),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.s2.sequence-group": "a"}),
        ValidationError,
        "repeatedly",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "partial-update.remove-record-on-delete": "true"}),
        ValidationError,
        "conflicting",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "partial-update.remove-record-on-sequence-group": "s1"}),
        UnsupportedError,
        "remove-record-on-sequence-group",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.a.aggregate-function": "last_value"}),
        UnsupportedError,
        "'last_value' of field 'a'",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.e.aggregate-function": "listagg"}),
        UnsupportedError,
        "'listagg' of field 'e'",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.s1.aggregate-function": "max"}),
        ValidationError,
        "Should not defined aggregation function on sequence group",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.default-aggregate-function": "last_value"}),
        UnsupportedError,
        "fields.default-aggregate-function",
    ),
    (_with(**{"fields.d.sequence-group": "a"}), UnsupportedError, "DOUBLE"),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.s2.sequence-group": "s1"}),
        UnsupportedError,
        "also in",
    ),
    (
        _with(**{"fields.s1.sequence-group": "a", "fields.s1,s2.sequence-group": "c"}),
        UnsupportedError,
        "also in",
    ),
    ({"merge-engine": "aggregation", "fields.s1.sequence-group": "a"}, UnsupportedError, "sequence-group"),
]


@pytest.mark.parametrize(("options", "error", "match"), REFUSED)
def test_refused(options: dict[str, str], error: type[Exception], match: str) -> None:
    fields = [*FIELDS, DataField(8, "d", DOUBLE())]
    with pytest.raises(error, match=match) as e:
        MergeEngine.for_schema(schema(fields, options)).check_fields(fields)
    assert e.type is error
    assert "option" in e.value.fields  # type: ignore[attr-defined]


SEQUENCE_TYPES = [
    (DECIMAL(20, 4), [Decimal("2.0000"), Decimal("10.0000"), Decimal("-3.0000")]),
    (DATE(), [dt.date(2020, 1, 2), dt.date(2021, 1, 1), dt.date(1960, 5, 5)]),
    (TIME(3), [dt.time(1), dt.time(5), dt.time(3)]),
    (TIMESTAMP(9), [dt.datetime(2020, 1, 1), dt.datetime(2022, 1, 1), dt.datetime(1921, 1, 1)]),
    (CHAR(2), ["a", "é", "z"]),  # UTF-8 bytes: "é" (0xC3) > "z"
    (TINYINT(), [-5, 100, 3]),
]


@pytest.mark.parametrize(
    ("data_type", "values"), SEQUENCE_TYPES, ids=[t.root.value for t, _ in SEQUENCE_TYPES]
)
def test_sequence_field_types(data_type: DataType, values: list[Any]) -> None:
    fields = [DataField(0, "k", INT(False)), DataField(1, "a", INT()), DataField(2, "s", data_type)]
    engine = MergeEngine.for_schema(schema(fields, _with(**{"fields.s.sequence-group": "a"})))
    got = run_engine(engine, fields, [[([7, i, v], 0, i) for i, v in enumerate(values)]])
    assert [c.to_pylist()[0] for c in got.columns][1] == 1  # the row of the greatest sequence
