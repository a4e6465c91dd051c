"""Data-file stats: modes, truncation, dense store, format-specific raw stats (Java's rules)."""

from __future__ import annotations

import string

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.types import BYTES, DOUBLE, INT, STRING, ArrayType, DataField
from paimon_meta.table.write.stats import (
    NONE_STATS,
    ColStats,
    StatsMode,
    column_stats,
    stats_modes,
    to_dense_simple_stats,
    truncate_max,
    truncate_min,
)

# ---- truncation ----------------------------------------------------------------------------------


def test_truncate_matches_java_examples() -> None:
    assert truncate_min("abcdefghijklmnopqrstuvwxyz", 16) == "abcdefghijklmnop"
    assert truncate_max("abcdefghijklmnopqrstuvwxyz", 16) == "abcdefghijklmnoq"
    assert truncate_max("short", 16) == "short"
    # Code points, not UTF-16 units or bytes: emoji count once.
    assert truncate_min("\U0001f600" * 20, 16) == "\U0001f600" * 16
    assert truncate_max("\U0001f600" * 20, 16) == "\U0001f600" * 15 + "\U0001f601"
    # U+10FFFF cannot be incremented: the previous code point is bumped and the string shortened.
    assert truncate_max("a" * 15 + "\U0010ffff" + "zz", 16) == "a" * 14 + "b"
    assert truncate_max("\U0010ffff" * 17, 16) is None
    assert truncate_max(b"\x01" * 20, 16) == b"\x01" * 15 + b"\x02"
    assert truncate_max(b"\x01" * 15 + b"\xff" * 5, 16) == b"\x01" * 14 + b"\x02"
    assert truncate_max(b"\xff" * 17, 16) is None
    assert truncate_min(b"\x00" * 17, 16) == b"\x00" * 16
    assert truncate_max(12, 16) == 12


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=string.ascii_letters + "é\U0001f600\U0010ffff", max_size=40), min_size=1))
def test_truncated_bounds_enclose_every_value(values: list[str]) -> None:
    col = pa.array(values)
    stats = StatsMode.parse("truncate(16)").convert(column_stats(col, STRING(), "parquet"))
    encoded = [v.encode() for v in values]
    if stats.max is None:
        # Only when no upper bound exists: Java then drops min and max.
        assert stats.min is None and truncate_max(max(values), 16) is None
        return
    # UTF-8 byte order is the order Parquet/ORC and Java's BinaryString compare in.
    assert stats.min.encode() <= min(encoded) and max(encoded) <= stats.max.encode()
    assert len(stats.min) <= 16 and len(stats.max) <= 16


# ---- modes ---------------------------------------------------------------------------------------


def test_stats_mode_parsing_and_selection() -> None:
    assert StatsMode.parse("Truncate(8)") == StatsMode("truncate", 8)
    for bad in ("truncate(0)", "trunc(3)", "all"):
        with pytest.raises(ValidationError) as exc:
            StatsMode.parse(bad, option="fields.x.stats-mode")
        assert exc.value.fields["option"] == "fields.x.stats-mode"
    names = ["_KEY_a", "_SEQUENCE_NUMBER", "_VALUE_KIND", "a", "b", "c", "d"]
    options = {
        "metadata.stats-mode": "full",
        "fields.c.stats-mode": "counts",
        "metadata.stats-keep-first-n-columns": "2",
    }
    modes = stats_modes(options, names)
    # System fields: truncate(128) and not counted; a per-field mode counts towards the first N.
    assert modes == [
        StatsMode("truncate", 128),
        StatsMode("truncate", 128),
        StatsMode("truncate", 128),
        StatsMode("full"),
        StatsMode("full"),
        StatsMode("counts"),
        StatsMode("none"),
    ]
    assert stats_modes({"metadata.stats-mode.per.level": "0:none,1:full"}, ["a"]) == [StatsMode("none")]
    assert stats_modes({}, ["a"]) == [StatsMode("truncate", 16)]


def test_dense_store_drops_none_columns_and_names_the_rest() -> None:
    fields = [DataField(0, "a", INT()), DataField(1, "b", STRING()), DataField(2, "c", DOUBLE())]
    stats = [ColStats(1, 5, 0), NONE_STATS, ColStats(None, None, 2)]
    cols, simple = to_dense_simple_stats(stats, fields)
    assert cols == ("a", "c")
    types = [INT(), DOUBLE()]
    assert deserialize_row(simple.min_values, types) == (1, None)
    assert simple.null_counts == (0, 2)
    cols, simple = to_dense_simple_stats([ColStats(1, 5, 0)] * 3, fields[:1] * 3)
    assert cols is None


def test_format_specific_raw_stats() -> None:
    nested = pa.array([[1, 2], None, [3]])
    arr_type = ArrayType(True, INT())
    # Parquet footers have no stats under a nested column's name; ORC has its null count.
    assert column_stats(nested, arr_type, "parquet") == NONE_STATS
    assert column_stats(nested, arr_type, "orc") == ColStats(None, None, 1)
    binary = pa.array([b"b", None, b"a"])
    assert column_stats(binary, BYTES(), "parquet") == ColStats(b"a", b"b", 1)
    assert column_stats(binary, BYTES(), "orc") == ColStats(None, None, 1)
    with_nan = pa.array([1.0, float("nan"), 3.0])
    assert column_stats(with_nan, DOUBLE(), "parquet") == ColStats(None, None, 0)
    assert column_stats(pa.array([None, None], pa.int32()), INT(), "parquet") == ColStats(None, None, 2)
