"""Schema evolution casts as Java's ``CastExecutors`` (apache/paimon 2.x), rule by rule, value for value.

Expected values are worked out from Java's sources (cited per test); tests/interop/test_java_casts.py has
Java itself read the same changes. Also: ALTER COLUMN TYPE accepts what Java's ``updateColumnType``
accepts, and a table read after it casts the files written before it.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import to_arrow_type
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
    DataType,
    MapType,
)
from paimon_meta.table.casting import java_parse as jp
from paimon_meta.table.casting.casts import can_cast, cast_array
from paimon_meta.table.schema_change import UpdateColumnType, alter, update_column_type
from paimon_meta.table.table import FileStoreTable
from tests.table.write.test_write import make_table, publish_snapshot, write_all

ERROR = "error"  # Java's cast throws on the value: the read fails


def _array(values: list[Any], source: DataType) -> pa.Array:
    root = source.root.name
    if root == "TIME":
        return pa.array(values, pa.int32()).cast(pa.time32("ms"))
    ints = any(isinstance(v, int) for v in values)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ") and ints:
        return pa.array(values, pa.int64()).cast(to_arrow_type(source))
    if root == "DATE" and ints:
        return pa.array(values, pa.int32()).cast(pa.date32())
    return pa.array(values, to_arrow_type(source))


def _raw(arr: pa.Array) -> list[Any]:
    """Timestamps as integers of their unit, dates as days and times as millis (exact, any range)."""
    if pa.types.is_timestamp(arr.type):
        return list(arr.cast(pa.int64()).to_pylist())
    if pa.types.is_date32(arr.type) or pa.types.is_time32(arr.type):
        return list(arr.cast(pa.int32()).to_pylist())
    return list(arr.to_pylist())


def cast_each(values: list[Any], source: DataType, target: DataType) -> list[Any]:
    """Each value cast alone: its result, or ERROR where Java's cast throws."""
    out = []
    for v in values:
        try:
            out.append(_raw(cast_array(_array([v], source), source, target))[0])
        except UnsupportedError:
            raise
        except ValidationError:
            out.append(ERROR)
    return out


def check(values: list[Any], source: DataType, target: DataType, expected: list[Any]) -> None:
    assert cast_each(values, source, target) == expected
    whole = _array(values, source)
    if ERROR in expected:
        with pytest.raises(ValidationError) as err:
            cast_array(whole, source, target)
        assert not isinstance(err.value, UnsupportedError)
    else:
        out = cast_array(whole, source, target)
        assert out.type == to_arrow_type(target)
        assert _raw(out) == expected
        chunked = cast_array(pa.chunked_array([whole.slice(0, 1), whole.slice(1)]), source, target)
        assert _raw(chunked.combine_chunks()) == expected


# ---- from STRING (BinaryStringUtils, FloatingDecimal, BigDecimal, DateTimeUtils) --------------------


def test_string_to_boolean() -> None:
    # BinaryStringUtils.toBoolean: lower-cased, never trimmed
    values = ["true", "FALSE", "nO", "Yes", "t", "F", "y", "N", "1", "0", " yes", "maybe", "", None]
    expected = [True, False, False, True, True, False, True, False, True, False, ERROR, ERROR, ERROR, None]
    check(values, STRING(), BOOLEAN(), expected)


@pytest.mark.parametrize(
    ("target", "values", "expected"),
    [
        (
            BIGINT(),
            ["12", "-12", "+7", "1.9", "-1.9", ".5", "-.", "9223372036854775807", "-9223372036854775808"],
            [12, -12, 7, 1, -1, 0, 0, 2**63 - 1, -(2**63)],
        ),
        (
            BIGINT(),
            ["9223372036854775808", " 1", "1 ", "1e3", "", "-", "+", "1.2.3", "1.a", "٣"],
            [ERROR] * 10,
        ),
        (INT(), ["2147483647", "-2147483648", "2147483648", "0012"], [2**31 - 1, -(2**31), ERROR, 12]),
        (SMALLINT(), ["32767", "32768", "-32768.9"], [32767, ERROR, -32768]),
        (TINYINT(), ["127", "128", "-128", "-129"], [127, ERROR, -128, ERROR]),
    ],
)
def test_string_to_integers(target: DataType, values: list[str], expected: list[Any]) -> None:
    # BinaryStringUtils.toLong/toInt (Hive's parser): sign, ASCII digits, a dropped fraction, no spaces;
    # toShort/toByte parse an int and refuse what does not fit
    check(values, STRING(), target, expected)


def test_string_to_double_and_float() -> None:
    # Double.parseDouble: trimmed of chars <= ' ', NaN/Infinity, hex, f/d suffixes; nothing else
    values = [" 1.5 ", "1e400", "-0", "NaN", "-Infinity", "0x1p3", "0X1.8P1", "1f", "2.5D", "1.", ".5e1"]
    doubles = cast_each(values, STRING(), DOUBLE())
    assert [repr(v) for v in doubles] == [
        "1.5", "inf", "-0.0", "nan", "-inf", "8.0", "3.0", "1.0", "2.5", "1.0", "5.0"
    ]  # fmt: skip
    for bad in ["abc", "1e", "", "   ", "nan", "inf", "1_000", "1.5ff", "0x1", "\u00a01.5", "\uff11"]:
        assert cast_each([bad], STRING(), DOUBLE()) == [ERROR], bad
    # Float.parseFloat rounds the decimal value once, to float32 (no double rounding)
    texts = ["0.1", "3.4028235677973366e38", "3.4028236e38", "1e-46", "1.00000017881393432617187499"]
    floats = cast_each(texts, STRING(), FLOAT())
    assert floats == [0.10000000149011612, 3.4028234663852886e38, float("inf"), 0.0, 1.0000001192092896]


def test_string_to_decimal() -> None:
    # new BigDecimal(text) then Decimal.fromBigDecimal: HALF_UP, null on precision overflow
    values = [
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
    ]
    expected = [
        Decimal("12.35"), Decimal("-100.00"), Decimal("100.00"), Decimal("0.50"), Decimal("5.00"), None,
        Decimal("0.01"), Decimal("-0.01"), Decimal("0.00"), None, ERROR, ERROR, ERROR,
    ]  # fmt: skip
    check(values, STRING(), DECIMAL(5, 2), expected)


def test_string_to_date() -> None:
    # BinaryStringUtils.toDate: digits (and a leading '-') are epoch days; else DateTimeUtils.parseDate
    values = [
        "2024-02-29",
        "2024",
        "2024-3",
        "2024-03-05 10:00",
        "  2024 - 1 - 2",
        "0000-01-01",
        "19782",
        "-5",
    ]
    expected = [19782, 2024, 19783, 19787, 19724, -719528, 19782, -5]  # "2024": digits are days
    check(values, STRING(), DATE(), expected)
    for bad in ["2023-02-29", "2024-04-31", "10000-01-01", "2024-01-02T00:00", "x", "", "2024-1-1-1"]:
        assert cast_each([bad], STRING(), DATE()) == [ERROR], bad


def test_string_to_time() -> None:
    # DateTimeUtils.parseTime: no range checks, an offset is added, the 4th fraction digit rounds
    values = [
        "10:20:30.1234",
        "10:20:30.1235",
        "10",
        "10:20",
        "25:61:61",
        "10:20:30+01:30",
        "10:20:30-01",
        "123",
    ]
    expected = [37230123, 37230124, 10, 37200000, 93721000, 42630000, 33630000, 123]  # "10": millis
    check(values, STRING(), TIME(3), expected)
    assert cast_each(["1a", "", "10:x", "99999999999"], STRING(), TIME(0)) == [ERROR] * 4


@pytest.mark.parametrize(
    ("text", "p3", "p9"),
    [
        ("2024-01-02 03:04:05.123456789", 1704164645123, 1704164645123456789),
        ("2024-1-2 3:4:5", 1704164645000, 1704164645000000000),
        ("2024-01-02T03:04", 1704164640000, 1704164640000000000),  # Java >= 1.1 ('T')
        ("2024-01-02T03:04:05.5", 1704164645500, 1704164645500000000),
        ("2024-01-02", 1704153600000, 1704153600000000000),
        ("2024-04-31 00:00:00", 1714435200000, 1714435200000000000),  # SMART: the last day of April
        ("2024-12-31 24:00:00", 1735689600000, 1735689600000000000),  # 24:00: the next midnight
        ("2024-011-01", 1704067200000, 1704067200000000000),  # [MM] then [M] of the same value
        ("2024-01-02 03:04:05.", 1704164645000, 1704164645000000000),
        ("123", 123, 123),  # digits: an epoch in the unit of the precision
        ("-123", -123, -123),
        ("2024-01-02 03:04", ERROR, ERROR),  # the space section needs seconds
        ("2024-01-02t03:04", ERROR, ERROR),
        ("2024-13-01", ERROR, ERROR),
        ("0000-01-01", ERROR, ERROR),  # year-of-era 0
        ("2024-01-02 25:00:00", ERROR, ERROR),
        ("2024-01-02 03:04:05.1234567891", ERROR, ERROR),
        (" 2024-01-02", ERROR, ERROR),
    ],
)
def test_string_to_timestamp(text: str, p3: Any, p9: Any) -> None:
    # BinaryStringUtils.toTimestamp + DateTimeUtils.parseTimestampData (DEFAULT_TIMESTAMP_FORMATTER)
    assert cast_each([text], STRING(), TIMESTAMP(3)) == [p3]
    assert cast_each([text], STRING(), TIMESTAMP(9)) == [p9]


def test_string_to_timestamp_precisions_and_local_zone() -> None:
    text = "2024-01-02 03:04:05.123456789"
    assert cast_each([text], STRING(), TIMESTAMP(6)) == [1704164645123456]
    assert cast_each([text], STRING(), TIMESTAMP(1)) == [1704164645100]  # floored to the precision
    assert cast_each([text], STRING(), TIMESTAMP(0)) == [1704164645000]
    assert cast_each(["7"], STRING(), TIMESTAMP(0)) == [7000]  # seconds
    assert cast_each(["7"], STRING(), TIMESTAMP(6)) == [7]  # micros
    assert cast_each(["7"], STRING(), TIMESTAMP(2)) == [ERROR]  # fromMillisToTimestamp: 0/3/6/9 only
    assert cast_each([text, "7"], STRING(), TIMESTAMP_LTZ(3)) == [1704164645123, ERROR]  # LTZ: no epoch form


def test_string_to_strings_and_binaries() -> None:
    check(["abcdef", "ab", "héllo", None], STRING(), VARCHAR(3), ["abc", "ab", "hél", None])
    check(["ab", "abcde"], STRING(), CHAR(4), ["ab  ", "abcd"])
    check(["ab  "], CHAR(4), STRING(), ["ab  "])
    check(["héllo", "a"], STRING(), VARBINARY(2), [b"h\xc3", b"a"])
    check(["a", "abc"], STRING(), BINARY(2), [b"a\x00", b"ab"])
    check(["see"], STRING(), BYTES(), [b"see"])


# ---- numbers ------------------------------------------------------------------------------------------


def test_integer_narrowing_wraps_and_widening() -> None:
    check([2**40 + 5, -1, 2**63 - 1, None], BIGINT(), INT(), [5, -1, -1, None])
    check([300, -129, 127], INT(), TINYINT(), [44, 127, 127])
    check([40000], INT(), SMALLINT(), [-25536])
    check([7, -7], TINYINT(), BIGINT(), [7, -7])
    check(
        [2**53 + 1, 2**63 - 1, 16777217],
        BIGINT(),
        FLOAT(),
        [9007199254740992.0, 9.223372036854776e18, 16777216.0],
    )
    check([2**53 + 1], BIGINT(), DOUBLE(), [9007199254740992.0])


def test_float_to_integers_is_javas_narrowing() -> None:
    # (byte)/(short) go through (int): saturate to int, then wrap; (int)/(long) saturate; NaN is 0
    values = [300.7, -300.7, float("nan"), float("inf"), float("-inf"), 1e20, -1e20, 0.5, -0.5]
    check(values, DOUBLE(), TINYINT(), [44, -44, 0, -1, 0, -1, 0, 0, 0])
    check(values, DOUBLE(), SMALLINT(), [300, -300, 0, -1, 0, -1, 0, 0, 0])
    check(values, DOUBLE(), INT(), [300, -300, 0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 0, 0])
    check(values, DOUBLE(), BIGINT(), [300, -300, 0, 2**63 - 1, -(2**63), 2**63 - 1, -(2**63), 0, 0])
    check([3e9, -2.5], FLOAT(), BIGINT(), [3000000000, -2])
    check([1e40, 0.1, -0.0], DOUBLE(), FLOAT(), [float("inf"), 0.10000000149011612, -0.0])


def test_boolean_and_numbers() -> None:
    check([True, False, None], BOOLEAN(), TINYINT(), [1, 0, None])
    check([True, False], BOOLEAN(), DOUBLE(), [1.0, 0.0])
    check([True, False], BOOLEAN(), DECIMAL(3, 1), [Decimal("1.0"), Decimal("0.0")])
    check([True, False], BOOLEAN(), DECIMAL(1, 1), [None, Decimal("0.0")])  # 1.0 needs precision 2
    check([0, 1, -5, None], INT(), BOOLEAN(), [False, True, True, None])
    check([2**40], BIGINT(), BOOLEAN(), [True])


def test_decimal_changes_round_half_up_and_overflow_to_null() -> None:
    values = [Decimal("123.45"), Decimal("-0.05"), Decimal("0.04"), Decimal("999.99")]
    check(values, DECIMAL(5, 2), DECIMAL(4, 1), [Decimal("123.5"), Decimal("-0.1"), Decimal("0.0"), None])
    check(values, DECIMAL(5, 2), DECIMAL(3, 1), [None, Decimal("-0.1"), Decimal("0.0"), None])
    check(values, DECIMAL(5, 2), DECIMAL(10, 4), [Decimal("123.4500"), Decimal("-0.0500"), Decimal("0.0400"),
                                                  Decimal("999.9900")])  # fmt: skip
    check([Decimal("12345678901234567.89")], DECIMAL(20, 2), DECIMAL(5, 0), [None])


def test_decimal_to_numbers() -> None:
    values = [Decimal("123.45"), Decimal("-123.99"), Decimal("0.10"), Decimal("999.99")]
    check(values, DECIMAL(5, 2), INT(), [123, -123, 0, 999])  # towards zero
    check(values, DECIMAL(5, 2), TINYINT(), [123, -123, 0, -25])  # then Java's narrowing wraps
    check(values, DECIMAL(5, 2), DOUBLE(), [123.45, -123.99, 0.1, 999.99])  # unscaled / 10^scale
    check([Decimal("0.10")], DECIMAL(5, 2), FLOAT(), [0.10000000149011612])
    big = [Decimal("92233720368547758.07"), Decimal("123456789012345678.91")]
    check(big, DECIMAL(20, 2), BIGINT(), [92233720368547758, 123456789012345678])
    check([Decimal("99999999999999999999")], DECIMAL(20, 0), BIGINT(), [99999999999999999999 - 2**64 * 5])
    check([Decimal("0.3")], DECIMAL(38, 1), DOUBLE(), [0.3])  # non-compact: BigDecimal.doubleValue


def test_numbers_to_decimal() -> None:
    # BigDecimal.valueOf(double) = new BigDecimal(Double.toString(d)); a FLOAT is widened to double first
    check([0.1, 2.5, -2.5, 1.0005, 1e20], DOUBLE(), DECIMAL(10, 3),
          [Decimal("0.100"), Decimal("2.500"), Decimal("-2.500"), Decimal("1.001"), None])  # fmt: skip
    check([0.1], FLOAT(), DECIMAL(20, 18), [Decimal("0.100000001490116120")])
    check([float("nan")], DOUBLE(), DECIMAL(10, 3), [ERROR])
    check([12345, -1, 2**63 - 1], BIGINT(), DECIMAL(5, 1), [None, Decimal("-1.0"), None])
    check([7], TINYINT(), DECIMAL(3, 2), [Decimal("7.00")])


def test_numbers_and_booleans_to_string() -> None:
    check([1.5, 1e7, 1e-4, 0.1, float("nan"), float("-inf")], FLOAT(), STRING(),
          ["1.5", "1.0E7", "1.0E-4", "0.1", "NaN", "-Infinity"])  # fmt: skip
    check([10.0, 1e21, 123456789.123, -0.0, 0.001], DOUBLE(), STRING(),
          ["10.0", "1.0E21", "1.23456789123E8", "-0.0", "0.001"])  # fmt: skip
    check([Decimal("1.50"), Decimal("-0.05")], DECIMAL(5, 2), STRING(), ["1.50", "-0.05"])
    check([Decimal("1.50")], DECIMAL(5, 2), CHAR(6), ["1.50  "])
    check([123456, -5], INT(), VARCHAR(3), ["123", "-5"])
    check([True, False], BOOLEAN(), CHAR(3), ["tru", "fal"])


# ---- dates, times, timestamps ------------------------------------------------------------------------

MS = 1
US = 1000


def test_timestamp_precision_changes_truncate_as_java() -> None:
    # DateTimeUtils.truncate: to <= 3 digits the epoch millis lose digits towards zero (pre-1970 values
    # move up), above 3 the nano-of-milli digits go
    ns = [-1_500_000_000, -1, 1_704_164_645_123_456_789, 1_000_000_123, 500]
    check(ns, TIMESTAMP(9), TIMESTAMP(6), [-1_500_000, -1, 1_704_164_645_123_456, 1_000_000, 0])
    check(ns, TIMESTAMP(9), TIMESTAMP(3), [-1_500, -1, 1_704_164_645_123, 1_000, 0])
    check(ns, TIMESTAMP(9), TIMESTAMP(0), [-1_000, 0, 1_704_164_645_000, 1_000, 0])
    check([-1_500, -999], TIMESTAMP(3), TIMESTAMP(1), [-1_500, -900])
    check([1_234], TIMESTAMP(3), TIMESTAMP(6), [1_234_000])  # a higher precision: unchanged
    check([-1_500], TIMESTAMP(3), TIMESTAMP_LTZ(3), [-1_500])  # UTC session zone
    check([-1_500], TIMESTAMP_LTZ(3), TIMESTAMP(0), [-1_000])


def test_timestamp_to_date_time_and_numbers() -> None:
    millis = [-1_500, 1_704_164_645_123, 0, None]
    check(millis, TIMESTAMP(3), DATE(), [-1, 19724, 0, None])  # floor (Java >= 1.1)
    check(millis, TIMESTAMP(3), TIME(0), [86_398_500, 11_045_123, 0, None])  # floorMod, precision kept
    check(millis, TIMESTAMP(3), BIGINT(), [-1, 1_704_164_645, 0, None])  # seconds, towards zero
    check([-1_500, 1_704_164_645_000, 2**31 * 1000], TIMESTAMP(0), INT(), [-1, 1_704_164_645, -(2**31)])
    check([-1_500], TIMESTAMP_LTZ(3), INT(), [-1])
    check([-1_500], TIMESTAMP_LTZ(3), DATE(), [-1])


def test_timestamps_to_string() -> None:
    check(
        [-500, 1_704_164_645_120],
        TIMESTAMP(3),
        STRING(),
        ["1969-12-31 23:59:59.500", "2024-01-02 03:04:05.120"],
    )
    check(
        [0, 1_000_000_123],
        TIMESTAMP(9),
        STRING(),
        ["1970-01-01 00:00:00.000000000", "1970-01-01 00:00:01.000000123"],
    )
    check([-62_135_596_800_000 - 86_400_000], TIMESTAMP(3), STRING(), ["0000-12-31 00:00:00.000"])
    check([0], TIMESTAMP_LTZ(6), STRING(), ["1970-01-01 00:00:00.000000"])
    check([19782, -719528, 2_932_897], DATE(), STRING(), ["2024-02-29", "0000-01-01", "0000-01-01"])  # int4
    check([500, 3_723_004, -1_000], TIME(3), STRING(), ["00:00:00.5", "01:02:03.004", "23:59:59.0"])
    check([3_723_004], TIME(0), STRING(), ["01:02:03"])


def test_dates_times_and_numbers_to_timestamp() -> None:
    check([19782, -1], DATE(), TIMESTAMP(3), [19782 * 86_400_000, -86_400_000])
    check([19782], DATE(), TIMESTAMP_LTZ(6), [19782 * 86_400_000_000])
    check([1_000, 86_399_999], TIME(3), TIMESTAMP(9), [1_000_000_000, 86_399_999_000_000])
    check([-1, 1_700_000_000], INT(), TIMESTAMP(3), [-1_000, 1_700_000_000_000])
    check([2**62], BIGINT(), TIMESTAMP(3), [jp.wrap(2**62 * 1000, 64)])  # Java's long multiplication wraps
    check([7], BIGINT(), TIMESTAMP_LTZ(6), [7_000_000])


def test_binaries() -> None:
    check([b"abc", b"a", None], BYTES(), BINARY(2), [b"ab", b"a\x00", None])
    check([b"abc"], BINARY(3), VARBINARY(2), [b"ab"])
    check([b"hi", b"\xff"], BYTES(), VARCHAR(1), ["hi", "\ufffd"])  # BinaryString.fromBytes: no length


def test_nested_elements_are_cast() -> None:
    arr = pa.array([[1, 2], None, [None, -3]], pa.list_(pa.int32()))
    out = cast_array(arr, ArrayType(True, INT()), ArrayType(True, STRING()))
    assert out.to_pylist() == [["1", "2"], None, [None, "-3"]]
    source, target = MapType(True, STRING(False), INT()), MapType(True, STRING(False), BIGINT())
    m = pa.array([[("a", 1)], None], to_arrow_type(source))
    assert cast_array(m.slice(0), source, target).to_pylist() == [[("a", 1)], None]
    with pytest.raises(UnsupportedError):
        cast_array(m, source, MapType(True, VARCHAR(3, False), INT()))  # Java refuses other key types


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (TINYINT(), TIMESTAMP(3)),  # NumericPrimitiveToTimestamp: INT and BIGINT only
        (DECIMAL(10, 2), TIMESTAMP(3)),
        (TIMESTAMP(3), TINYINT()),
        (TIMESTAMP(3), DECIMAL(10, 2)),
        (TIMESTAMP(3), VARCHAR(30)),  # to-string rules of dates and times: STRING only
        (DATE(), CHAR(10)),
        (FLOAT(), BOOLEAN()),
        (DECIMAL(5, 2), BOOLEAN()),
        (DATE(), INT()),
        (TIME(0), TIME(3)),
        (BOOLEAN(), BINARY(1)),
        (ArrayType(True, INT()), STRING()),
    ],
)
def test_pairs_java_cannot_cast_are_refused(source: DataType, target: DataType) -> None:
    assert not can_cast(source, target)
    with pytest.raises(UnsupportedError):
        cast_array(pa.nulls(1, to_arrow_type(source)), source, target)


def test_can_cast_follows_update_column_type() -> None:
    assert can_cast(TIMESTAMP(0), INT()) and can_cast(STRING(), BOOLEAN()) and can_cast(DATE(), STRING())
    assert can_cast(BIGINT(), TIMESTAMP_LTZ(3)) and can_cast(BOOLEAN(), DECIMAL(3, 1))
    assert not can_cast(DATE(), STRING(False))  # Java's rule is keyed by the nullable STRING type
    assert can_cast(INT(), BIGINT(), allow_explicit=False) and not can_cast(
        BIGINT(), INT(), allow_explicit=False
    )
    assert not can_cast(ArrayType(True, INT()), ArrayType(True, BIGINT()))  # no rule for whole arrays


# ---- ALTER COLUMN TYPE and the read path ---------------------------------------------------------------


def test_read_after_alter_casts_old_files(tmp_path: Path) -> None:
    fields = [
        ("k", INT(False)),
        ("flag", STRING()),
        ("ts0", TIMESTAMP(0)),
        ("ts3", TIMESTAMP(3)),
        ("d", DOUBLE()),
    ]
    table = make_table(tmp_path, fields)
    ms = pa.timestamp("ms")
    rows = pa.table(
        {
            "k": pa.array([1, 2, 3], pa.int32()),
            "flag": ["nO", "YES", None],
            "ts0": pa.array([-2_000, 1_704_164_645_000, None], pa.int64()).cast(ms),
            "ts3": pa.array([-1_500, 1_704_164_645_999, None], pa.int64()).cast(ms),
            "d": [300.7, -1e20, None],
        }
    )
    publish_snapshot(table, write_all(table, rows))
    update_column_type(table, "flag", BOOLEAN())
    alter(
        table,
        [UpdateColumnType("ts0", INT()), UpdateColumnType("ts3", BIGINT()), UpdateColumnType("d", TINYINT())],
    )
    reopened = FileStoreTable.open(table.path)
    assert [str(f.type) for f in reopened.fields] == ["INT NOT NULL", "BOOLEAN", "INT", "BIGINT", "TINYINT"]
    builder = reopened.new_read_builder()
    got = builder.new_read().to_arrow(builder.new_scan().plan().splits()).sort_by("k")
    assert got.to_pylist() == [
        {"k": 1, "flag": False, "ts0": -2, "ts3": -1, "d": 44},
        {"k": 2, "flag": True, "ts0": 1_704_164_645, "ts3": 1_704_164_645, "d": 0},
        {"k": 3, "flag": None, "ts0": None, "ts3": None, "d": None},
    ]
    # a new write uses the new types; the old file is still cast
    new_rows = {"k": [4], "flag": [True], "ts0": [5], "ts3": [6], "d": [1]}
    arrow_new = pa.table(
        {name: pa.array(v, reopened.arrow_schema().field(name).type) for name, v in new_rows.items()}
    )
    publish_snapshot(reopened, write_all(reopened, arrow_new))
    builder = FileStoreTable.open(table.path).new_read_builder()
    assert builder.new_read().to_arrow(builder.new_scan().plan().splits()).num_rows == 4


def test_read_fails_on_a_value_java_cannot_cast(tmp_path: Path) -> None:
    table = make_table(tmp_path, [("k", INT()), ("s", STRING())])
    publish_snapshot(
        table, write_all(table, pa.table({"k": pa.array([1, 2], pa.int32()), "s": ["12", "x1"]}))
    )
    update_column_type(table, "s", INT())
    builder = FileStoreTable.open(table.path).new_read_builder()
    with pytest.raises(ValidationError) as err:
        builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert err.value.fields["field"] == "s" and "x1" in str(err.value)


def test_alter_column_type_refusals(tmp_path: Path) -> None:
    table = make_table(
        tmp_path,
        [("p", STRING(False)), ("k", INT(False)), ("v", TIMESTAMP(3)), ("n", INT(False))],
        partition_keys=["p"],
        primary_keys=["p", "k"],
        options={"bucket": "1"},
    )
    for name, new_type in [
        ("p", VARCHAR(10, False)),
        ("k", BIGINT(False)),
        ("v", TINYINT()),
        ("v", VARCHAR(9)),
    ]:
        with pytest.raises(ValidationError) as err:
            update_column_type(table, name, new_type)
        assert err.value.fields["field"] == name
    with pytest.raises(ValidationError):
        update_column_type(table, "v", BIGINT(False))  # nullable -> NOT NULL
    assert update_column_type(table, "v", BIGINT(False), keep_nullability=True).field("v").type == BIGINT()
    assert update_column_type(table, "n", STRING(False)).field("n").type == STRING(False)
    assert update_column_type(table, "n", BIGINT()).field("n").type == BIGINT()  # NOT NULL -> NULL is fine


def test_disable_explicit_type_casting(tmp_path: Path) -> None:
    table = make_table(
        tmp_path, [("a", BIGINT()), ("b", INT())], options={"disable-explicit-type-casting": "true"}
    )
    with pytest.raises(ValidationError):
        update_column_type(table, "a", INT())
    assert update_column_type(table, "b", BIGINT()).field("b").type == BIGINT()


def test_local_date_time_sanity() -> None:
    """The epoch arithmetic of the parsers agrees with Python's calendar where both exist."""
    for text, when in [("2024-02-29 23:59:59", dt.datetime(2024, 2, 29, 23, 59, 59)),
                       ("1900-03-01 00:00:00", dt.datetime(1900, 3, 1))]:  # fmt: skip
        millis, _ = jp.to_timestamp(text, 3, local_zone=False)
        assert millis == (when - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
