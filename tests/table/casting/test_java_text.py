"""Java's text forms of numbers and date-times (partition names, casts to STRING)."""

from __future__ import annotations

import datetime as dt

import pytest

from paimon_meta.table.casting.java_text import (
    java_date_text,
    java_double_to_string,
    java_float_to_string,
    java_timestamp_text,
    local_date_time_text,
    sql_time_text,
    sql_timestamp_text,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (10.0, "10.0"),
        (-2.5, "-2.5"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1234567.0, "1234567.0"),
        (9999999.999, "9999999.999"),
        (1e7, "1.0E7"),
        (1.5e10, "1.5E10"),
        (123456789012.345, "1.23456789012345E11"),
        (1.2345e-7, "1.2345E-7"),
        (0.1 + 0.2, "0.30000000000000004"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
    ],
)
def test_double_to_string(value: float, text: str) -> None:
    assert java_double_to_string(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.1, "1.1"), (3.4028235e38, "3.4028235E38"), (1e-5, "1.0E-5"), (100.0, "100.0"), (0.1, "0.1")],
)
def test_float_to_string_uses_float32_shortest_digits(value: float, text: str) -> None:
    assert java_float_to_string(value) == text


@pytest.mark.parametrize(
    ("moment", "nanos", "text"),
    [
        (dt.datetime(2024, 1, 2, 3, 4), 0, "2024-01-02T03:04"),
        (dt.datetime(2024, 1, 2, 3, 4, 5), 0, "2024-01-02T03:04:05"),
        (dt.datetime(2024, 1, 2, 3, 4), 100_000_000, "2024-01-02T03:04:00.100"),
        (dt.datetime(2024, 1, 2, 3, 4), 123_456_000, "2024-01-02T03:04:00.123456"),
        (dt.datetime(2024, 1, 2, 3, 4), 1, "2024-01-02T03:04:00.000000001"),
    ],
)
def test_local_date_time_text(moment: dt.datetime, nanos: int, text: str) -> None:
    assert local_date_time_text(moment, nanos) == text


def test_sql_forms() -> None:
    moment = dt.datetime(1899, 1, 1, 0, 59, 20)
    assert sql_timestamp_text(moment, 1_001_001, 9) == "1899-01-01 00:59:20.001001001"
    assert sql_timestamp_text(moment, 0, 0) == "1899-01-01 00:59:20"
    assert sql_timestamp_text(moment, 500_000_000, 6) == "1899-01-01 00:59:20.500000"
    assert sql_time_text(3_723_004, 3) == "01:02:03.004"
    assert sql_time_text(3_723_004, 0) == "01:02:03"
    assert sql_time_text(-1000, 0) == "23:59:59"


def test_sql_forms_as_java_prints_them() -> None:
    """``DateTimeUtils``' own digit printing: four-digit years (``int4``, also below 1000), TIME fractions
    that stop after the last non-zero digit (``formatTimestampMillis``), times past a day not wrapped."""
    assert sql_timestamp_text(dt.datetime(999, 1, 2, 3, 4, 5), 0, 3) == "0999-01-02 03:04:05.000"
    assert sql_time_text(500, 3) == "00:00:00.5"
    assert sql_time_text(0, 3) == "00:00:00.0"
    assert sql_time_text(120, 6) == "00:00:00.12"
    assert sql_time_text(90_000_000, 0) == "25:00:00"
    assert java_date_text(19782) == "2024-02-29"
    assert java_date_text(-719528) == "0000-01-01"  # year 0 (proleptic Gregorian)
    assert java_date_text(2_932_897) == "0000-01-01"  # year 10000: int4 keeps four digits
    assert java_timestamp_text(-1, 500_000, 9) == "1969-12-31 23:59:59.999500000"
    assert java_timestamp_text(-62_135_596_800_000 - 86_400_000, 0, 3) == "0000-12-31 00:00:00.000"


@pytest.mark.parametrize(
    ("value", "double", "single"),
    [
        (5e-324, "4.9E-324", "0.0"),
        (1e23, "1.0E23", "1.0E23"),
        (1.4e-45, "1.4E-45", "1.4E-45"),
        (3e-45, "3.0E-45", "2.8E-45"),
    ],
)
def test_at_least_two_digits(value: float, double: str, single: str) -> None:
    """JDK 19+: when one digit is enough, the closest two-digit decimal is printed (``Double.MIN_VALUE`` is
    ``4.9E-324``, ``Float.MIN_VALUE`` ``1.4E-45``)."""
    assert java_double_to_string(value) == double
    assert java_float_to_string(value) == single
