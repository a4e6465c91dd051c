"""Canonical values, so that rows read by different engines compare value by value.

Every side becomes the Java harness's canonical values (documented in
``tests/interop/java/PaimonHarness.java``): integers, floats as ``repr`` (``"NaN"``, ``"Infinity"``),
decimals as plain strings at the column's scale, binary as base64, dates as epoch days, TIME as millis
of the day, timestamps as ``yyyy-mm-ddTHH:MM:SS.fffffffff`` (``Z`` appended for TIMESTAMP_LTZ), nested
values as lists. Rows are compared as multisets: no engine promises an order. Arrow tables from any
reader (ours, paimon-rust, pypaimon) go through :func:`canonical_arrow`; the harness's JSON rows through
:func:`canonical_java`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

import paimon_meta
from tests.interop.java_env import TableRead

Row = dict[str, Any]

_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)


def canonical_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def canonical_timestamp(value: int, unit: str, zoned: bool) -> str:
    per_second = _UNITS_PER_SECOND[unit]
    seconds, fraction = divmod(value, per_second)
    wall = _EPOCH + dt.timedelta(seconds=seconds)
    nanos = fraction * (1_000_000_000 // per_second)
    return (
        f"{wall.year:04d}-{wall.month:02d}-{wall.day:02d}T{wall.hour:02d}:{wall.minute:02d}:"
        f"{wall.second:02d}.{nanos:09d}{'Z' if zoned else ''}"
    )


def _canonical_value(value: Any, pa_type: pa.DataType) -> Any:
    """One value from ``as_py`` (nested values; top-level columns go through ``canonical_column``)."""
    if value is None:
        return None
    t = pa.types
    if t.is_floating(pa_type):
        return canonical_float(float(value))
    if t.is_decimal(pa_type):
        return format(value, "f")
    if t.is_binary(pa_type) or t.is_large_binary(pa_type) or t.is_fixed_size_binary(pa_type):
        return base64.b64encode(value).decode()
    if t.is_date(pa_type):
        return (value - dt.date(1970, 1, 1)).days
    if t.is_time(pa_type):
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000
    if t.is_timestamp(pa_type):
        micros = (value.replace(tzinfo=None) - _EPOCH) // dt.timedelta(microseconds=1)
        return canonical_timestamp(micros, "us", pa_type.tz is not None)
    if t.is_map(pa_type):
        return [
            [_canonical_value(k, pa_type.key_type), _canonical_value(v, pa_type.item_type)] for k, v in value
        ]
    if t.is_list(pa_type) or t.is_large_list(pa_type):
        return [_canonical_value(v, pa_type.value_type) for v in value]
    if t.is_struct(pa_type):
        return [_canonical_value(value[f.name], f.type) for f in pa_type]
    return value


def canonical_column(column: pa.ChunkedArray) -> list[Any]:
    pa_type = column.type
    if pa.types.is_timestamp(pa_type):
        raw = column.cast(pa.int64()).to_pylist()
        return [
            None if v is None else canonical_timestamp(v, pa_type.unit, pa_type.tz is not None) for v in raw
        ]
    if pa.types.is_date32(pa_type) or (pa.types.is_time32(pa_type) and pa_type.unit == "ms"):
        ints: list[Any] = column.cast(pa.int32()).to_pylist()
        return ints
    return [_canonical_value(v, pa_type) for v in column.to_pylist()]


def canonical_arrow(table: pa.Table) -> list[Row]:
    columns = [canonical_column(table.column(i)) for i in range(table.num_columns)]
    names = table.column_names
    return [dict(zip(names, values)) for values in zip(*columns)] if columns else []


def _canonical_json(value: Any) -> Any:
    if isinstance(value, float):
        return canonical_float(value)
    if isinstance(value, list):
        return [_canonical_json(v) for v in value]
    return value


def canonical_java(rows: Sequence[Row]) -> list[Row]:
    """Java's rows: floats as ``repr``; ``+U`` dropped (a batch read's latest row of a key is an
    update-after when the key was updated: the same row as an insert); ``-U``/``-D`` stay."""
    out = []
    for row in rows:
        canon = {k: _canonical_json(v) for k, v in row.items()}
        if canon.get("_row_kind") == "+U":
            del canon["_row_kind"]
        out.append(canon)
    return out


def _key(row: Row) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


def assert_same_rows(theirs: Sequence[Row], ours: Sequence[Row], what: str, *, who: str = "Java") -> None:
    """The same rows as multisets, else an AssertionError listing (up to 20 of) the rows only one side has."""
    their_rows, our_rows = Counter(map(_key, theirs)), Counter(map(_key, ours))
    if their_rows == our_rows:
        return
    only_theirs = sorted((their_rows - our_rows).elements())
    only_ours = sorted((our_rows - their_rows).elements())
    lines = [f"{what}: {who} read {len(theirs)} rows, we read {len(ours)}"]
    lines += [f"  only {who}: {r}" for r in only_theirs[:20]]
    lines += [f"  only ours: {r}" for r in only_ours[:20]]
    raise AssertionError("\n".join(lines))


def our_read(path: str, columns: Sequence[str] = ()) -> tuple[int | None, list[str], list[Row]]:
    """(latest snapshot id, field names, canonical rows) as paimon_meta reads the table."""
    table = paimon_meta.open_table(path)
    rb = table.new_read_builder()
    if columns:
        rb = rb.with_projection(list(columns))
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    snapshot = table.latest_snapshot()
    return (snapshot.id if snapshot else None), data.column_names, canonical_arrow(data)


def assert_java_reads_as_we_do(read: TableRead, path: str, version: str, columns: Sequence[str] = ()) -> None:
    assert read.error is None, f"Java Paimon {version} cannot read {path}:\n{read.error}"
    snapshot, fields, ours = our_read(path, columns)
    assert read.snapshot == snapshot, f"latest snapshot: Java {read.snapshot}, ours {snapshot}"
    assert list(read.fields) == fields
    assert_same_rows(canonical_java(read.rows), ours, f"Paimon {version} reading {path}")
