"""Schema evolution casts against real Java Paimon (0.9.0 and 1.0-SNAPSHOT), value for value.

For each type change (every pair Java's ``updateColumnType`` allows, and ARRAY/MAP element changes a
nested ALTER makes) we write a table with the old type, ALTER it with :func:`update_column_type`, and
have Java read it: one JVM per version for every table (a JVM costs seconds). Each value is compared with
ours cast alone (:func:`cast_array`), so values Java's cast throws on are compared too (the harness
prints ``java_error`` for them, we raise); our read of the whole table must equal the per-value casts,
or fail when a value does.

Our casts follow Java 2.x (apache/paimon master). Where Java 0.9/1.0 read otherwise, the difference is
listed in ``KNOWN`` with the upstream change that fixed it; the test fails when a listed difference
disappears or an unlisted one appears.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import to_arrow_type
from paimon_meta.model.schema import TableSchema
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
    VARBINARY,
    VARCHAR,
    ArrayType,
    DataField,
    DataType,
    MapType,
)
from paimon_meta.table.casting.casts import can_cast, cast_array
from paimon_meta.table.schema_change import UpdateColumnType, alter
from paimon_meta.table.snapshots import SchemaManager
from tests.interop.canonical import canonical_column, canonical_float
from tests.interop.java_env import VERSIONS, JavaHarness, TableRead

pytestmark = pytest.mark.interop

ERROR = "<cast error>"


@dataclass(frozen=True)
class Case:
    """One column: ``values`` written as ``source``, read as ``target``."""

    name: str
    source: DataType
    target: DataType
    values: tuple[Any, ...]
    nested: bool = False  # an element type change: schema-1 written as Java's nested ALTER writes it


@dataclass(frozen=True)
class Table:
    """One table: ``i`` (the row number), then a column per case (named as the case) of one source type;
    shorter columns are padded with nulls."""

    name: str
    cases: tuple[Case, ...]

    @property
    def rows(self) -> int:
        return max(len(case.values) for case in self.cases)


def _cases() -> Iterator[Case]:
    def case(name: str, source: DataType, target: DataType, *values: Any, nested: bool = False) -> Case:
        return Case(name, source, target, values, nested)

    nan, inf = math.nan, math.inf
    ts_texts = (
        "2024-01-02 03:04:05.123456789",
        "2024-1-2 3:4:5",
        "2024-01-02T03:04",
        "2024-01-02T03:04:05.5",
        "2024-01-02",
        "2024-04-31 00:00:00",
        "2024-12-31 24:00:00",
        "2024-011-01",
        "2024-01-02 03:04:05.",
        "123",
        "-123",
        "2024-01-02 03:04",
        "2024-01-02t03:04",
        "2024-13-01",
        "0000-01-01",
        "2024-01-02 25:00:00",
        "2024-01-02 03:04:05.1234567891",
        " 2024-01-02",
        "1969-12-31 23:59:59.999",
    )
    # ---- from STRING
    yield case(
        "s_bool",
        STRING(),
        BOOLEAN(),
        "true",
        "FALSE",
        "nO",
        "Yes",
        "t",
        "F",
        "y",
        "N",
        "1",
        "0",
        " yes",
        "maybe",
        "",
        None,
    )
    yield case("s_tinyint", STRING(), TINYINT(), "127", "128", "-128", "-129", "12.9", "+5")
    yield case("s_smallint", STRING(), SMALLINT(), "32767", "32768", "-5.5")
    yield case(
        "s_int",
        STRING(),
        INT(),
        "12",
        "-12",
        "+7",
        "1.9",
        "-1.9",
        ".5",
        "-.",
        "2147483647",
        "-2147483648",
        "2147483648",
        " 1",
        "1 ",
        "1e3",
        "",
        "-",
        "+",
        "1.2.3",
        "0012",
        "\u0663",
    )
    yield case(
        "s_bigint",
        STRING(),
        BIGINT(),
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "1.5",
    )
    yield case(
        "s_double",
        STRING(),
        DOUBLE(),
        " 1.5 ",
        "1e400",
        "-0",
        "NaN",
        "-Infinity",
        "+Infinity",
        "0x1p3",
        "0X1.8P1",
        "1f",
        "2.5D",
        "1.",
        ".5e1",
        "abc",
        "1e",
        "",
        "nan",
        "inf",
        "1_000",
        "1.5ff",
        "0x1",
        "\u00a01.5",
        "4.9e-324",
        "2.2250738585072011e-308",
        "0.1",
    )
    yield case(
        "s_float",
        STRING(),
        FLOAT(),
        "0.1",
        "3.4028235677973366e38",
        "3.4028236e38",
        "1e-46",
        "1.00000017881393432617187499",
        "1.4e-45",
        "-0",
        "x",
    )
    yield case(
        "s_decimal",
        STRING(),
        DECIMAL(5, 2),
        "12.345",
        "-1e2",
        "1E+2",
        ".5",
        "5.",
        "999.995",
        "0.005",
        "-0.005",
        "1e-10",
        "99999",
        "abc",
        " 1",
        "NaN",
        "+1.5",
        "1e",
        "\u0663",
    )
    yield case(
        "s_date",
        STRING(),
        DATE(),
        "2024-02-29",
        "2024",
        "2024-3",
        "2024-03-05 10:00",
        "  2024 - 1 - 2",
        "0000-01-01",
        "19782",
        "-5",
        "2023-02-29",
        "2024-04-31",
        "10000-01-01",
        "2024-01-02T00:00",
        "x",
        "",
        "2024-1-1-1",
    )
    yield case(
        "s_time",
        STRING(),
        TIME(3),
        "10:20:30.1234",
        "10:20:30.1235",
        "10",
        "10:20",
        "25:61:61",
        "10:20:30+01:30",
        "10:20:30-01",
        "123",
        "1a",
        "",
        "10:x",
        "99999999999",
        "-5",
    )
    for p in (0, 2, 3, 6, 9):
        yield case(f"s_ts{p}", STRING(), TIMESTAMP(p), *ts_texts)
    yield case("s_ltz3", STRING(), TIMESTAMP_LTZ(3), *ts_texts)
    yield case("s_varchar3", STRING(), VARCHAR(3), "abcdef", "ab", "h\u00e9llo", None)
    yield case("s_char4", STRING(), CHAR(4), "ab", "abcde")
    yield case("char_s", CHAR(4), STRING(), "ab  ", "abcd")
    yield case("s_varbinary2", STRING(), VARBINARY(2), "h\u00e9llo", "a")
    yield case("s_binary2", STRING(), BINARY(2), "a", "abc")
    yield case("s_bytes", STRING(), BYTES(), "see")
    # ---- numbers
    yield case("bigint_int", BIGINT(), INT(), 2**40 + 5, -1, 2**63 - 1, -(2**63), None)
    yield case("int_tinyint", INT(), TINYINT(), 300, -129, 127)
    yield case("int_smallint", INT(), SMALLINT(), 40000, -40000)
    yield case("tinyint_bigint", TINYINT(), BIGINT(), 7, -7)
    yield case("bigint_float", BIGINT(), FLOAT(), 2**53 + 1, 2**63 - 1, 16777217)
    yield case("bigint_double", BIGINT(), DOUBLE(), 2**53 + 1, -(2**63))
    doubles = (300.7, -300.7, nan, inf, -inf, 1e20, -1e20, 0.5, -0.5)
    for name, target in [
        ("tinyint", TINYINT()),
        ("smallint", SMALLINT()),
        ("int", INT()),
        ("bigint", BIGINT()),
    ]:
        yield case(f"double_{name}", DOUBLE(), target, *doubles)
    yield case("float_bigint", FLOAT(), BIGINT(), 3e9, -2.5, nan)
    yield case("float_int", FLOAT(), INT(), 3e9, -3e9)
    yield case("double_float", DOUBLE(), FLOAT(), 1e40, 0.1, -0.0, 3.4028235677973366e38)
    yield case("float_double", FLOAT(), DOUBLE(), 0.1, 1e38)
    yield case("int_float", INT(), FLOAT(), 16777217, -2147483648)
    for name, target in [
        ("tinyint", TINYINT()),
        ("int", INT()),
        ("bigint", BIGINT()),
        ("float", FLOAT()),
        ("double", DOUBLE()),
        ("dec31", DECIMAL(3, 1)),
        ("dec11", DECIMAL(1, 1)),
        ("s", STRING()),
        ("char3", CHAR(3)),
    ]:
        yield case(f"bool_{name}", BOOLEAN(), target, True, False, None)
    yield case("int_bool", INT(), BOOLEAN(), 0, 1, -5, None)
    yield case("bigint_bool", BIGINT(), BOOLEAN(), 2**40)
    yield case("tinyint_bool", TINYINT(), BOOLEAN(), -1)
    decimals = (Decimal("123.45"), Decimal("-0.05"), Decimal("0.04"), Decimal("999.99"), Decimal("-999.99"))
    yield case("dec_dec41", DECIMAL(5, 2), DECIMAL(4, 1), *decimals)
    yield case("dec_dec31", DECIMAL(5, 2), DECIMAL(3, 1), *decimals)
    yield case("dec_dec104", DECIMAL(5, 2), DECIMAL(10, 4), *decimals)
    yield case(
        "dec20_dec5",
        DECIMAL(20, 2),
        DECIMAL(5, 0),
        Decimal("12345678901234567.89"),
        Decimal("99.5"),
        Decimal("-99.5"),
    )
    yield case(
        "dec38_dec102",
        DECIMAL(38, 10),
        DECIMAL(10, 2),
        Decimal("1234567.1234567890"),
        Decimal("-0.0050000000"),
    )
    small = (Decimal("123.45"), Decimal("-123.99"), Decimal("0.10"), Decimal("999.99"))
    for name, target in [
        ("int", INT()),
        ("tinyint", TINYINT()),
        ("bigint", BIGINT()),
        ("double", DOUBLE()),
        ("float", FLOAT()),
        ("s", STRING()),
        ("char6", CHAR(6)),
    ]:
        yield case(f"dec_{name}", DECIMAL(5, 2), target, *small)
    yield case(
        "dec20_bigint",
        DECIMAL(20, 2),
        BIGINT(),
        Decimal("92233720368547758.07"),
        Decimal("123456789012345678.91"),
    )
    yield case("dec20_0_bigint", DECIMAL(20, 0), BIGINT(), Decimal("99999999999999999999"))
    yield case("dec38_double", DECIMAL(38, 1), DOUBLE(), Decimal("0.3"), Decimal("12345678901234567890123.4"))
    yield case("double_dec", DOUBLE(), DECIMAL(10, 3), 0.1, 2.5, -2.5, 1.0005, 1e20, nan, 1e-5, 123.4565)
    yield case("float_dec", FLOAT(), DECIMAL(20, 18), 0.1)
    yield case("float_dec103", FLOAT(), DECIMAL(10, 3), 1.0005, inf)
    yield case("bigint_dec", BIGINT(), DECIMAL(5, 1), 12345, -1, 2**63 - 1)
    yield case("tinyint_dec", TINYINT(), DECIMAL(3, 2), 7, -100)
    yield case("float_s", FLOAT(), STRING(), 1.5, 1e7, 1e-4, 0.1, nan, -inf, 3.4028235e38, 1.4e-45)
    yield case(
        "double_s",
        DOUBLE(),
        STRING(),
        10.0,
        1e21,
        123456789.123,
        -0.0,
        0.001,
        1e-5,
        2e-3,
        1.0e23,
        4.9e-324,
        0.1 + 0.2,
    )
    yield case("int_varchar3", INT(), VARCHAR(3), 123456, -5)
    yield case("bigint_s", BIGINT(), STRING(), 2**63 - 1, -(2**63))
    # ---- timestamps, dates, times (ints in the source's Arrow unit: ms, us or ns)
    ns = (-1_500_000_000, -1, 1_704_164_645_123_456_789, 1_000_000_123, 500, 1_000_500_000)
    for p in (6, 3, 0):
        yield case(f"ts9_ts{p}", TIMESTAMP(9), TIMESTAMP(p), *ns)
    us = (-1_500_000, -1, 1_704_164_645_123_456, 1_000_123)
    yield case("ts6_ts0", TIMESTAMP(6), TIMESTAMP(0), *us)
    yield case("ts6_ts3", TIMESTAMP(6), TIMESTAMP(3), *us)
    yield case("ts3_ts1", TIMESTAMP(3), TIMESTAMP(1), -1_500, -999, 1_234)
    yield case("ts3_ts6", TIMESTAMP(3), TIMESTAMP(6), 1_234, -1)
    yield case("ts3_ltz3", TIMESTAMP(3), TIMESTAMP_LTZ(3), -1_500)
    yield case("ltz3_ts0", TIMESTAMP_LTZ(3), TIMESTAMP(0), -1_500, 1_500)
    millis = (-1_500, 1_704_164_645_123, 0, None)
    for name, target in [
        ("date", DATE()),
        ("time0", TIME(0)),
        ("bigint", BIGINT()),
        ("int", INT()),
        ("s", STRING()),
    ]:
        yield case(f"ts3_{name}", TIMESTAMP(3), target, *millis)
    yield case("ts0_int", TIMESTAMP(0), INT(), -2_000, 1_704_164_645_000, 2**31 * 1000)
    yield case("ltz3_int", TIMESTAMP_LTZ(3), INT(), -1_500)
    yield case("ltz3_date", TIMESTAMP_LTZ(3), DATE(), -1_500)
    yield case("ts9_s", TIMESTAMP(9), STRING(), 0, 1_000_000_123, -1)
    yield case("ltz6_s", TIMESTAMP_LTZ(6), STRING(), 0, -1)
    # (our writer keeps statistics as Python dates: years 1..9999; the unit tests cover year 0 and 10000)
    yield case("date_s", DATE(), STRING(), 19782, -719162, 2_932_896, -1)
    yield case("time3_s", TIME(3), STRING(), 500, 3_723_004, 0)
    yield case("time0_s", TIME(0), STRING(), 3_723_000)
    yield case("date_ts3", DATE(), TIMESTAMP(3), 19782, -1)
    yield case("date_ltz6", DATE(), TIMESTAMP_LTZ(6), 19782)
    yield case("time3_ts9", TIME(3), TIMESTAMP(9), 1_000, 86_399_999)
    yield case("int_ts3", INT(), TIMESTAMP(3), -1, 1_700_000_000)
    yield case("bigint_ltz6", BIGINT(), TIMESTAMP_LTZ(6), 7)
    # ---- binaries
    yield case("bytes_binary2", BYTES(), BINARY(2), b"abc", b"a", None)
    yield case("binary3_varbinary2", BINARY(3), VARBINARY(2), b"abc")
    yield case("bytes_varchar1", BYTES(), VARCHAR(1), b"hi", b"\xff")
    # ---- element types (Java's ALTER of a nested path; SchemaEvolutionUtil casts element by element)
    yield case(
        "arr_int_bigint",
        ArrayType(True, INT()),
        ArrayType(True, BIGINT()),
        [1, 2],
        None,
        [None, -3],
        nested=True,
    )
    yield case("arr_int_s", ArrayType(True, INT()), ArrayType(True, STRING()), [1, -3], nested=True)
    yield case(
        "map_int_s",
        MapType(True, STRING(False), INT()),
        MapType(True, STRING(False), STRING()),
        [("a", 1)],
        None,
        nested=True,
    )


# Every other pair of type roots Java's updateColumnType allows, one table per source root with a column
# per target root (fewer tables: the JVM's time is per table).
_SAMPLES: dict[DataType, tuple[Any, ...]] = {
    BOOLEAN(): (True, False, None),
    TINYINT(): (-128, 127, 0, None),
    SMALLINT(): (-32768, 32767, 300, None),
    INT(): (-2147483648, 2147483647, 40000, None),
    BIGINT(): (-(2**63), 2**63 - 1, 5_000_000_000, None),
    FLOAT(): (1.5, -3e9, math.nan, None),
    DOUBLE(): (-2.5, 1e10, 0.1, None),
    DECIMAL(10, 2): (Decimal("12345678.91"), Decimal("-0.05"), None),
    CHAR(5): ("12345", "1.5e3", "tRuE ", "00:01", None),
    STRING(): ("12", "-1.5", "2024-01-02 03:04:05", "true", "abc", None),
    BINARY(3): (b"abc", b"\x00\x01\x02", None),
    BYTES(): (b"hello", b"", None),
    DATE(): (19782, -1, None),
    TIME(3): (3_723_004, 0, None),
    TIMESTAMP(6): (1_704_164_645_123_456, -1, None),
    TIMESTAMP_LTZ(6): (1_704_164_645_123_456, -1, None),
}


def _matrix(covered: set[tuple[str, str]]) -> Iterator[Case]:
    for source, values in _SAMPLES.items():
        for target in _SAMPLES:
            roots = (source.root.name, target.root.name)
            if target.root is not source.root and can_cast(source, target) and roots not in covered:
                yield Case(f"all_{roots[0]}_{roots[1]}".lower(), source, target, values)


def _tables(cases: list[Case]) -> list[Table]:
    """The cases of one source type in one table (the JVM's time is per table); nested changes alone
    (Java 0.9/1.0 refuse the whole table)."""
    by_source: dict[str, list[Case]] = {}
    tables = []
    for case in cases:
        if case.nested:
            tables.append(Table(case.name, (case,)))
        else:
            by_source.setdefault(str(case.source), []).append(case)
    for source, grouped in by_source.items():
        tables.append(Table("from_" + re.sub(r"\W+", "_", source).strip("_").lower(), tuple(grouped)))
    return tables


_LISTED = list(_cases())
CASES = _LISTED + list(_matrix({(c.source.root.name, c.target.root.name) for c in _LISTED}))
TABLES = _tables(CASES)

# Java 0.9/1.0 read these values otherwise (our casts follow Java 2.x): (case, row) -> Java's value, by the
# apache/paimon change that made Java read them as we do.
_STRING_FIXES = {
    # #4246: a TIMESTAMP's numeric text is an epoch in the unit of its precision (it was a parse error)
    **{(f"s_ts{p}", 9): ERROR for p in (0, 3, 6, 9)},
    ("all_char_timestamp", 0): ERROR,
    # #5710: StringUtils.isNumeric accepts a leading '-' (epoch days, millis, or an epoch)
    **{(name, row): ERROR for name, row in [("s_date", 7), ("s_time", 12)]},
    **{(f"s_ts{p}", 10): ERROR for p in (0, 3, 6, 9)},
    # #9115: DEFAULT_TIMESTAMP_FORMATTER accepts the 'T' separator
    **{
        (name, row): ERROR
        for name in ("s_ts0", "s_ts2", "s_ts3", "s_ts6", "s_ts9", "s_ltz3")
        for row in (2, 3)
    },
}
_OLD_JAVA: dict[tuple[str, int], Any] = {
    **_STRING_FIXES,
    ("bigint_bool", 0): False,  # #4519: NumericToBooleanCastRule compared intValue() (2^40 -> 0)
    ("ts3_date", 0): 0,  # #9203: TIMESTAMP -> DATE floors (it truncated towards zero before 1970)
    ("ts3_time0", 0): -1_500,  # #9203: TIMESTAMP -> TIME is floorMod (it was %: a negative time)
    # #8767: DateTimeUtils.truncate compared Integer.toString(nanos).length() with the precision, so
    # nanoseconds with fewer digits than the precision were kept
    ("ts9_ts3", 3): "1970-01-01T00:00:01.000000123",
    ("ts9_ts3", 4): "1970-01-01T00:00:00.000000500",
    ("ts9_ts6", 3): "1970-01-01T00:00:01.000000123",
    ("ts9_ts6", 4): "1970-01-01T00:00:00.000000500",
    # not Paimon: the harness's JDK 17 Double.toString (we print as JDK 19+, JDK-4511638)
    ("double_s", 7): "9.999999999999999E22",
}
KNOWN: dict[str, dict[tuple[str, int], Any]] = {"0.9": _OLD_JAVA, "1.0": _OLD_JAVA}
# Java 0.9 and the harness's 1.0-SNAPSHOT cast only atomic columns (#4528 added ARRAY/MAP element casts).
_ATOMIC_ONLY = "java.lang.IllegalStateException: Only support column type evolution in atomic data type."
KNOWN_FAILURES: dict[str, dict[str, str]] = {
    version: {table.name: _ATOMIC_ONLY for table in TABLES if table.cases[0].nested}
    for version in ("0.9", "1.0")
}


# ---- building the tables ---------------------------------------------------------------------------


def _arrow(values: list[Any], t: DataType) -> pa.Array:
    root = t.root.name
    if root == "TIME":
        return pa.array(values, pa.int32()).cast(pa.time32("ms"))
    if root == "DATE":
        return pa.array(values, pa.int32()).cast(pa.date32())
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return pa.array(values, pa.int64()).cast(to_arrow_type(t))
    return pa.array(values, to_arrow_type(t))


def _build(root: Path, table: Table) -> str:
    path = str(root / "casts.db" / table.name)
    first = table.cases[0]
    fields = (
        DataField(0, "i", INT(False)),
        *(DataField(k + 1, c.name, c.source) for k, c in enumerate(table.cases)),
    )
    schemas = SchemaManager(get_file_io(path), path)
    assert schemas.commit_new_schema(TableSchema(0, fields, len(fields) - 1, (), (), {}))
    opened = paimon_meta.open_table(path)
    builder = opened.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    padding = [None] * table.rows
    data = {"i": pa.array(range(table.rows), pa.int32())}
    data |= {c.name: _arrow([*c.values, *padding][: table.rows], c.source) for c in table.cases}
    write.write_arrow(pa.table(data))
    commit.commit(write.prepare_commit())
    write.close()
    if first.nested:
        latest = schemas.latest()
        assert latest is not None
        evolved = dataclasses.replace(
            latest, id=1, fields=(fields[0], dataclasses.replace(fields[1], type=first.target))
        )
        assert schemas.commit_new_schema(evolved)
    else:
        alter(opened, [UpdateColumnType(c.name, c.target) for c in table.cases])
    return path


# ---- what each side reads ----------------------------------------------------------------------------


def _ours(case: Case, value: Any) -> Any:
    try:
        out = cast_array(_arrow([value], case.source), case.source, case.target)
    except UnsupportedError:
        raise  # every case is a change Java allows: a missing cast is a bug, not a value Java refuses
    except ValidationError:
        return ERROR
    return canonical_column(pa.chunked_array([out]))[0]


def _java(value: Any, target: DataType) -> Any:
    if isinstance(value, dict) and "java_error" in value:
        # Decimal.fromBigDecimal returns null on overflow: CastedRow.getDecimal hands the harness a null
        # for a non-null cell, which it dereferences. That is Java's null value, not a failed cast.
        if target.root.name == "DECIMAL" and "NullPointerException" in value["java_error"]:
            return None
        return ERROR
    if isinstance(value, float):
        return canonical_float(value)
    if isinstance(value, list):
        return [_java(v, target) for v in value]
    return value


@dataclass(frozen=True)
class Built:
    paths: dict[str, str]
    reads: dict[str, dict[str, TableRead]]


@pytest.fixture(scope="module")
def built(java_harnesses: dict[str, JavaHarness], tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("java_casts")
    paths = {table.name: _build(root, table) for table in TABLES}
    with ThreadPoolExecutor(max_workers=len(java_harnesses)) as pool:
        futures = {v: pool.submit(h.read_tables, list(paths.values())) for v, h in java_harnesses.items()}
        reads = {v: dict(zip(paths, f.result())) for v, f in futures.items()}
    return Built(paths, reads)


def test_our_read_of_each_table_is_the_per_value_cast(built: Built) -> None:
    """The read path (evolve_columns over the old file) gives what each value's cast gives, or fails."""
    for table in TABLES:
        for case in table.cases:
            expected = [_ours(case, v) for v in case.values]
            builder = paimon_meta.open_table(built.paths[table.name]).new_read_builder()
            builder = builder.with_projection(["i", case.name])
            if ERROR in expected:
                with pytest.raises(ValidationError):
                    builder.new_read().to_arrow(builder.new_scan().plan().splits())
                continue
            data = builder.new_read().to_arrow(builder.new_scan().plan().splits()).sort_by("i")
            assert canonical_column(data.column(case.name))[: len(expected)] == expected, case.name


@pytest.mark.parametrize("version", VERSIONS)
def test_java_casts_as_we_do(built: Built, version: str) -> None:
    differences: dict[tuple[str, int], Any] = {}
    failed: dict[str, str] = {}
    for table in TABLES:
        read = built.reads[version][table.name]
        if read.error is not None:
            failed[table.name] = read.error.splitlines()[0]
            continue
        rows = {row["i"]: row for row in read.rows}
        assert sorted(rows) == list(range(table.rows)), table.name
        for case in table.cases:
            for i, value in enumerate(case.values):
                java, ours = _java(rows[i][case.name], case.target), _ours(case, value)
                if java != ours:
                    differences[(case.name, i)] = java
    known = KNOWN[version]
    unexplained = {k: v for k, v in differences.items() if known.get(k, object()) != v}
    vanished = sorted(set(known) - set(differences))
    lines = [
        f"  ({name!r}, {i}): {java!r},  # {CASES_BY_NAME[name].values[i]!r}: ours "
        f"{_ours(CASES_BY_NAME[name], CASES_BY_NAME[name].values[i])!r}"
        for (name, i), java in sorted(unexplained.items())
    ]
    assert not unexplained and not vanished, (
        f"Java {version} casts otherwise:\n" + "\n".join(lines) + f"\nlisted but equal: {vanished}"
    )
    unexpected_failures = {
        k: v for k, v in failed.items() if not v.startswith(KNOWN_FAILURES[version].get(k, "-"))
    }
    assert not unexpected_failures and set(failed) >= set(KNOWN_FAILURES[version]), (
        f"Java {version} cannot read: {unexpected_failures}; listed: {sorted(KNOWN_FAILURES[version])}"
    )


CASES_BY_NAME = {case.name: case for case in CASES}
