"""Java's text forms of numbers and date-times (partition names, casts to STRING)."""

from __future__ import annotations

import datetime as dt

import pytest

from paimon_meta.table.java_text import (
    java_double_to_string,
    java_float_to_string,
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
