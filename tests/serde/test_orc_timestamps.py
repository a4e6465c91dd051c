"""The ORC stripe footer's writer zone, and the one-second TIMESTAMP correction (against Java: the interop
test tests/interop/test_java_orc_timestamps.py)."""

from __future__ import annotations

import datetime as dt
import io
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.serde.orc_timestamps import correct_timestamps, java_second_shift, writer_timezone

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
    corrected = correct_timestamps(table, "Asia/Shanghai")
    expected = [ns("1970-01-01T00:00:00.001") // 1000, ns(reads[1]) // 1000, ns(reads[2]) // 1000, None]
    assert corrected.column("t").type == pa.timestamp("us")
    assert corrected.column("t").cast(pa.int64()).to_pylist() == expected
    assert corrected.column("ltz").equals(table.column("ltz"))
    assert correct_timestamps(table, "UTC") is table
    assert correct_timestamps(table, None) is table
