"""The ORC stripe footer's writer zone, the one-second TIMESTAMP correction and the legacy TIMESTAMP_LTZ
shift (against Java: the interop test tests/interop/test_java_orc_timestamps.py)."""

from __future__ import annotations

import datetime as dt
import io
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from paimon_meta.errors import CorruptMetadataError, UnsupportedError
from paimon_meta.serde.orc_timestamps import (
    correct_timestamps,
    java_offsets,
    java_second_shift,
    writer_timezone,
)

SHANGHAI = ZoneInfo("Asia/Shanghai")
LOS_ANGELES = ZoneInfo("America/Los_Angeles")


def ns(value: str) -> int:
    whole, _, fraction = value.partition(".")
    seconds = (dt.datetime.fromisoformat(whole) - dt.datetime(1970, 1, 1)) // dt.timedelta(seconds=1)
    return seconds * 1_000_000_000 + int(fraction.ljust(9, "0"))


@pytest.mark.parametrize("compression", ["uncompressed", "zlib", "snappy", "lz4", "zstd"])
def test_writer_timezone_of_every_codec(compression: str) -> None:
    table = pa.table({"a": list(range(5000)), "s": [str(i) * 7 for i in range(5000)]})
    sink = io.BytesIO()
    pa_orc.write_table(table, sink, compression=compression)
    assert writer_timezone(sink.getvalue()) == "GMT"  # what the C++ writer records


def test_writer_timezone_of_an_empty_file_and_garbage() -> None:
    sink = io.BytesIO()
    pa_orc.write_table(pa.table({"a": pa.array([], pa.int32())}), sink)
    assert writer_timezone(sink.getvalue()) is None
    with pytest.raises(CorruptMetadataError, match=r"x\.orc"):
        writer_timezone(b"ORC" + bytes([0x0A, 0xFF, 0xFF, 3]), path="x.orc")


@pytest.mark.parametrize(
    ("pyarrow_read", "zone", "shift"),
    [
        ("1970-01-01T00:00:01.001", SHANGHAI, -1),  # Java: 00:00:00.001 (the example)
        ("1970-01-01T00:00:00.999", SHANGHAI, -1),  # Java: 1969-12-31T23:59:59.999
        ("1969-12-31T23:59:57.999", SHANGHAI, 0),  # both took the second off
        ("1970-01-01T08:00:00.999", SHANGHAI, 0),  # Java's own -1 s < t < 0 misread, shared
        ("1970-01-01T08:00:01.5", SHANGHAI, 0),  # after the epoch in UTC too
        ("1969-12-31T23:59:58.999", LOS_ANGELES, 1),  # Java: 23:59:59.999
        ("1969-12-31T15:59:58.5", LOS_ANGELES, 0),
        ("1969-12-31T16:00:00.5", LOS_ANGELES, 1),  # Java: 16:00:01.5 (UTC +1.5 s)
        ("1969-12-31T15:59:59.5", LOS_ANGELES, 1),  # Java: 16:00:00.5 (its own misread of UTC -0.5 s)
        ("1969-12-31T15:59:57.5", LOS_ANGELES, 0),
    ],
)
def test_java_second_shift(pyarrow_read: str, zone: ZoneInfo, shift: int) -> None:
    assert java_second_shift(ns(pyarrow_read) // 1_000_000_000, zone) == shift


def test_correct_timestamps_moves_only_misread_values() -> None:
    reads = ["1970-01-01T00:00:01.001", "1970-01-01T00:00:00.000999", "2014-06-01T12:00:00.5"]
    table = pa.table(
        {
            "t": pa.array([*(ns(v) // 1000 for v in reads), None], pa.timestamp("us")),
            "ltz": pa.array([0, 0, 0, 0], pa.timestamp("us", tz="UTC")),
        }
    )
    corrected = correct_timestamps(table, "Asia/Shanghai", writer="ORC_JAVA", ltz_legacy=False)
    expected = [ns("1970-01-01T00:00:00.001") // 1000, ns(reads[1]) // 1000, ns(reads[2]) // 1000, None]
    assert corrected.column("t").type == pa.timestamp("us")
    assert corrected.column("t").cast(pa.int64()).to_pylist() == expected
    assert corrected.column("ltz").equals(table.column("ltz"))  # not the legacy layout: the instants
    assert correct_timestamps(table, "UTC", writer="ORC_JAVA") is table
    assert correct_timestamps(table, "GMT", writer="ORC_CPP") is table  # ours
    assert correct_timestamps(table, None, writer="ORC_JAVA") is table


@pytest.mark.parametrize(
    ("instant", "zone", "offset"),
    [
        ("2014-06-01T04:00:00", SHANGHAI, 8 * 3600),
        ("1899-12-31T16:00:00", SHANGHAI, 8 * 3600),  # before 1900: Java's raw offset, not LMT +8:05:43
        ("1900-01-01T00:00:00", SHANGHAI, 8 * 3600 + 5 * 60 + 43),  # from 1900 on: the zone's history
        ("1850-01-01T00:00:00", LOS_ANGELES, -8 * 3600),  # LMT -7:52:58 in tzdata
        ("2021-03-14T09:59:59", LOS_ANGELES, -8 * 3600),  # the last second of PST
        ("2021-03-14T10:00:00", LOS_ANGELES, -7 * 3600),
        ("2050-07-01T00:00:00", LOS_ANGELES, -7 * 3600),  # after 2037: the last rules
        ("1811-07-23T15:06:40", ZoneInfo("Australia/Lord_Howe"), 37800),  # raw +10:30 (DST in January)
        ("1811-07-23T15:06:40", ZoneInfo("Asia/Kolkata"), 19800),
    ],
)
def test_java_offsets(instant: str, zone: ZoneInfo, offset: int) -> None:
    """``java.util.TimeZone.getOffset`` (these values printed by Java 17)."""
    nanos = np.array([ns(instant), ns(instant) + 999_999_999], dtype=np.int64)
    assert java_offsets(nanos, zone).tolist() == [offset, offset]


def test_legacy_ltz_of_the_java_writer_moves_to_the_writers_zone() -> None:
    """Java stored each instant minus the writer zone's offset; its reader in that zone adds it back."""
    stored = ["1969-12-31T16:00:00", "2014-06-01T04:00:00.5", "1899-12-31T16:00:00.123"]
    table = pa.table({"ltz": pa.array([*(ns(v) for v in stored), None], pa.timestamp("ns", tz="UTC"))})
    moved = correct_timestamps(table, "Asia/Shanghai", writer="ORC_JAVA", path="f.orc")
    written = ["1970-01-01T00:00:00", "2014-06-01T12:00:00.5", "1900-01-01T00:00:00.123"]
    assert moved.column("ltz").type == pa.timestamp("ns", tz="UTC")
    assert moved.column("ltz").cast(pa.int64()).to_pylist() == [*(ns(v) for v in written), None]
    assert correct_timestamps(table, "Asia/Shanghai", writer="ORC_JAVA", ltz_legacy=False) is table


@pytest.mark.parametrize(
    ("writer", "column", "message"),
    [
        ("ORC_CPP", pa.array([0], pa.timestamp("ns", tz="UTC")), "written by ORC_CPP"),
        ("TRINO", pa.array([0], pa.timestamp("ns", tz="UTC")), "written by TRINO"),
        ("ORC_JAVA", pa.array([[0]], pa.list_(pa.timestamp("ns", tz="UTC"))), "nested in 'ltz'"),
    ],
)
def test_legacy_ltz_that_cannot_be_told_is_refused(writer: str, column: pa.Array, message: str) -> None:
    table = pa.table({"ltz": column})
    with pytest.raises(UnsupportedError, match=message) as raised:
        correct_timestamps(table, "Asia/Shanghai", writer=writer, path="f.orc")
    assert raised.value.fields["path"] == "f.orc"
    assert correct_timestamps(table, "Asia/Shanghai", writer=writer, ltz_legacy=False) is table


def test_a_corrected_column_keeps_every_nanosecond_beside_nulls() -> None:
    """Values far from the epoch survive the correction of another value exactly (no float64 on the way)."""
    far = ns("2100-01-01T00:00:00.123456789")
    table = pa.table({"t": pa.array([ns("1970-01-01T00:00:01.001"), far, None], pa.timestamp("ns"))})
    corrected = correct_timestamps(table, "Asia/Shanghai", writer="ORC_JAVA")
    assert corrected.column("t").cast(pa.int64()).to_pylist() == [ns("1970-01-01T00:00:00.001"), far, None]


NESTED = pa.timestamp("ns")


@pytest.mark.parametrize(
    "column",
    [
        pa.array([[ns("2014-06-01T12:00:00.5")], None, [ns("1970-01-01T00:00:01.001")]], pa.list_(NESTED)),
        pa.array([{"a": ns("1970-01-01T00:00:01.001")}], pa.struct([("a", NESTED)])),
        pa.array([[(1, ns("1970-01-01T00:00:01.001"))]], pa.map_(pa.int32(), NESTED)),
    ],
)
def test_a_nested_timestamp_pyarrow_reads_a_second_off_is_refused(column: pa.Array) -> None:
    with pytest.raises(UnsupportedError, match="nested in 'n'"):
        correct_timestamps(pa.table({"n": column}), "Asia/Shanghai", writer="ORC_JAVA", path="f.orc")


def test_nested_timestamps_read_alike_pass() -> None:
    """Nested values pyarrow reads as Java does (and a misread one under a null parent) are read."""
    hidden = pa.StructArray.from_arrays(
        [pa.array([ns("1970-01-01T00:00:01.001")], NESTED)], names=["a"], mask=pa.array([True])
    )
    table = pa.table(
        {
            "l": pa.array([[ns("2014-06-01T12:00:00.5")], None], pa.list_(NESTED)),
            "s": pa.concat_arrays([hidden] * 2),
        }
    )
    assert correct_timestamps(table, "Asia/Shanghai", writer="ORC_JAVA") is table


@pytest.mark.parametrize(
    "zone", ["America/Los_Angeles", "Australia/Lord_Howe", "Europe/Dublin", "Pacific/Apia"]
)
def test_java_offsets_by_day_equal_the_offset_of_each_instant(zone: str) -> None:
    """The per-day look-ups give every instant's own offset from 1900 on (DST days included)."""
    seconds = np.random.default_rng(7).integers(-2_208_988_800, 4_200_000_000, 5_000)
    epoch, tz = dt.datetime(1970, 1, 1, tzinfo=dt.UTC), ZoneInfo(zone)
    expected = [(epoch + dt.timedelta(seconds=int(s))).astimezone(tz).utcoffset() for s in seconds]
    assert all(e is not None for e in expected)
    expected_seconds = [int(e.total_seconds()) for e in expected if e is not None]
    assert java_offsets(seconds * 1_000_000_000 + 999_999_999, tz).tolist() == expected_seconds
