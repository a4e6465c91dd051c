"""No silent misreads: table options that change what a read returns are implemented or refused by name.

``paimon_meta.table.option_policy`` classifies every Java option; these tests hold a real table to it:
each refused option refuses a scan, a read and a write (``UnsupportedError`` with ``option=<key>``),
options refused only for writes still read, harmless values of refused options and every option
classified as having no read effect read the same rows, unknown keys under ``scan.``, ``fields.``,
``sequence.`` and ``merge-engine`` are refused while other unknown keys are accepted, and the golden
tables still read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.errors import UnsupportedError
from paimon_meta.model.types import INT, STRING
from paimon_meta.table.option_policy import (
    FIELD_OPTION_RULES,
    OPTION_RULES,
    Kind,
    check_read_options,
    check_write_options,
    classify,
)
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.table_write import TableWrite
from tests.fixtures.golden import GOLDEN_TABLES, golden_table_path
from tests.table.write.test_write import make_table, publish_snapshot, write_all

ROWS = pa.table({"k": pa.array([1, 2, 3], pa.int32()), "s": ["a", "b", None]})

REFUSED = sorted(key for key, rule in OPTION_RULES.items() if rule.kind is Kind.REFUSED)
WRITE_REFUSED = sorted(key for key, rule in OPTION_RULES.items() if rule.kind is Kind.WRITE_REFUSED)
NO_READ_EFFECT = sorted(key for key, rule in OPTION_RULES.items() if rule.kind is Kind.NO_READ_EFFECT)
HARMLESS_VALUES = sorted(
    (key, value) for key, rule in OPTION_RULES.items() if rule.kind is Kind.REFUSED for value in rule.harmless
)
UNKNOWN_READ_AFFECTING = [
    "scan.some-future-mode",
    "scan.",
    "fields.s.some-future-suffix",
    "fields.some-future-option",
    "sequence.some-future-order",
    "merge-engine.some-future-engine",
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> FileStoreTable:
    """An append table with one committed snapshot of ROWS."""
    table = make_table(
        tmp_path_factory.mktemp("audit"),
        [("k", INT()), ("s", STRING())],
        options={"bucket": "1", "bucket-key": "k"},
    )
    publish_snapshot(table, write_all(table, ROWS))
    return table


def _with(table: FileStoreTable, options: Mapping[str, str]) -> FileStoreTable:
    """The same table with ``options`` layered over its schema's (Java's dynamic options)."""
    return FileStoreTable(table.file_io, table.path, table.schema_manager.latest() or table.schema, options)


def _read(table: FileStoreTable) -> list[dict[str, object]]:
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: str(r["k"]))


def _refusal_value(key: str) -> str:
    """A value of ``key`` that changes reads (not one of its harmless values)."""
    harmless = OPTION_RULES[key].harmless
    return "true" if harmless == frozenset({"false"}) else "7"


def _assert_refused(action: object, key: str) -> None:
    assert callable(action)
    with pytest.raises(UnsupportedError) as err:
        action()
    assert err.value.fields["option"] == key
    assert key in str(err.value)


def test_base_table_reads(base: FileStoreTable) -> None:
    assert _read(base) == sorted(ROWS.to_pylist(), key=lambda r: str(r["k"]))


@pytest.mark.parametrize("key", REFUSED)
def test_refused_option_refuses_scan_read_and_write(base: FileStoreTable, key: str) -> None:
    table = _with(base, {key: _refusal_value(key)})
    _assert_refused(lambda: table.new_read_builder().new_scan(), key)
    _assert_refused(lambda: table.new_read_builder().new_read(), key)
    _assert_refused(lambda: TableWrite(table, commit_user="u"), key)


@pytest.mark.parametrize("key", WRITE_REFUSED)
def test_write_refused_option_reads_but_refuses_write(base: FileStoreTable, key: str) -> None:
    table = _with(base, {key: "true" if OPTION_RULES[key].harmless == frozenset({"false"}) else "7"})
    assert _read(table) == _read(base)
    _assert_refused(lambda: TableWrite(table, commit_user="u"), key)


@pytest.mark.parametrize(("key", "value"), HARMLESS_VALUES)
def test_harmless_values_of_refused_options_read(base: FileStoreTable, key: str, value: str) -> None:
    assert _read(_with(base, {key: value.upper() if value == "false" else value})) == _read(base)


def test_every_option_without_read_effect_reads_the_same_rows(base: FileStoreTable) -> None:
    options = {key: "1" for key in NO_READ_EFFECT}
    options |= {"fields.s.stats-mode": "none", "my.own.key": "x", "parquet.use-native": "false"}
    assert _read(_with(base, options)) == _read(base)


@pytest.mark.parametrize("key", UNKNOWN_READ_AFFECTING)
def test_unknown_option_under_a_read_affecting_prefix_refuses_read_and_write(
    base: FileStoreTable, key: str
) -> None:
    table = _with(base, {key: "x"})
    _assert_refused(lambda: table.new_read_builder().new_scan(), key)
    _assert_refused(lambda: table.new_read_builder().new_read(), key)
    _assert_refused(lambda: TableWrite(table, commit_user="u"), key)


def test_unknown_option_of_another_prefix_is_accepted(base: FileStoreTable) -> None:
    table = _with(base, {"my-company.owner": "team-a", "snapshot.some-future-knob": "3"})
    assert _read(table) == _read(base)
    TableWrite(table, commit_user="u").close()


def test_refusal_from_the_schema_file(base: FileStoreTable, tmp_path: Path) -> None:
    """Options stored in the schema (not only dynamic ones) are refused, by the key's name."""
    table = make_table(tmp_path, [("k", INT())], options={"scan.watermark": "7", "bucket": "1"})
    opened = FileStoreTable.open(table.path)
    _assert_refused(lambda: opened.new_read_builder().new_scan(), "scan.watermark")
    with pytest.raises(UnsupportedError):
        FileStoreTable.check_schema(
            opened.schema
        )  # a new table with it is refused before anything is written


def test_field_options_by_suffix() -> None:
    assert classify("fields.v.default-value").kind is Kind.REFUSED
    assert classify("fields.a.b.stats-mode").kind is Kind.NO_READ_EFFECT  # a dotted field name
    assert classify("fields.m.map.shared-shredding.max-columns").kind is Kind.NO_READ_EFFECT
    assert classify("fields.m.map.storage-layout").kind is Kind.REFUSED
    assert classify("fields.stats-mode").kind is Kind.REFUSED  # no field name: unknown
    for suffix, rule in FIELD_OPTION_RULES.items():
        assert classify(f"fields.f.{suffix}") is rule
    with pytest.raises(UnsupportedError) as err:
        check_read_options({"fields.v.default-value": "0"})
    assert err.value.fields["option"] == "fields.v.default-value"
    check_read_options({"fields.m.map.storage-layout": " DEFAULT "})


def test_merge_engine_options_are_left_to_the_merge_engines() -> None:
    options = {
        "merge-engine": "aggregation",
        "fields.v.aggregate-function": "sum",
        "fields.default-aggregate-function": "max",
        "fields.v.list-agg-delimiter": ";",
        "fields.a,b.sequence-group": "c",
        "ignore-delete": "true",
        "partial-update.remove-record-on-delete": "true",
        "aggregation.remove-record-on-delete": "true",
    }
    for key in options:
        assert classify(key).kind is Kind.MERGE_ENGINE, key
    check_write_options(options)


def test_refused_message_names_key_and_value() -> None:
    with pytest.raises(UnsupportedError) as err:
        check_read_options({"a": "1", "chain-table.enabled": "true", "scan.snapshot-id": "3"})
    assert err.value.fields == {"option": "chain-table.enabled", "value": "true"}  # first in key order
    assert "chain-table.enabled='true'" in str(err.value)
    check_read_options({"branch": "main", "scan.mode": "latest-full", "type": "TABLE"})
    check_read_options({"branch": "dev", "scan.fallback-branch": "dev"})  # tables/test_branches.py
    check_read_options({"bucket-function.type": "mod"})  # refused for writes only
    with pytest.raises(UnsupportedError):
        check_write_options({"bucket-function.type": "mod"})


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES)
def test_golden_tables_pass_the_audit_and_read(fmt: str, name: str) -> None:
    table = FileStoreTable.open(str(golden_table_path(fmt, name)))
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    assert builder.new_read().to_arrow(splits).num_rows > 0
