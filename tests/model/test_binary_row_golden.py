"""BinaryRows written by Java Paimon (golden commit messages) decode and re-encode byte for byte.

Each commit message holds DataFileMeta rows (nested SimpleStats rows, arrays of strings and nullable
longs, a TIMESTAMP(3)) whose stats are BinaryRows of the table's columns, including TIMESTAMP(9) and
DECIMAL(23, 5) values and nulls of both: a strong check of every layout rule against Java's writer.
Only the framing needed to reach the first file list is parsed here; the full CommitMessage codec lives
in paimon_meta.serde.
"""

from __future__ import annotations

import json
import struct
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from paimon_meta.model import types as T
from paimon_meta.model.binary_row import Timestamp, decode_row, deserialize_row, encode_row, serialize_row
from tests.fixtures.golden import golden_table_path

STATS = T.RowType(
    False,
    (
        T.DataField(0, "_MIN_VALUES", T.BYTES(False)),
        T.DataField(1, "_MAX_VALUES", T.BYTES(False)),
        T.DataField(2, "_NULL_COUNTS", T.ArrayType(True, T.BIGINT())),
    ),
)
# DataFileMeta.SCHEMA in field order; older serializers write a prefix of it.
DATA_FILE_META: list[T.DataType] = [
    T.STRING(False),
    T.BIGINT(False),
    T.BIGINT(False),
    T.BYTES(False),
    T.BYTES(False),
    STATS,
    STATS,
    T.BIGINT(False),
    T.BIGINT(False),
    T.BIGINT(False),
    T.INT(False),
    T.ArrayType(False, T.STRING(False)),
    T.TIMESTAMP(3),
    T.BIGINT(),
    T.BYTES(),
    T.TINYINT(),
    T.ArrayType(True, T.STRING(False)),
    T.STRING(),
    T.BIGINT(),
    T.ArrayType(True, T.STRING(False)),
    T.ArrayType(True, T.BIGINT(False)),
]

# (format, table, whether the framing carries totalBuckets (v10+), DataFileMeta arity)
CASES = [
    ("parquet", "append_09", False, 16),
    ("orc", "append_10_stats_dense_store", False, 17),
    ("parquet", "append_10", True, 18),
    ("parquet", "append_complex_data", True, 18),
    ("parquet", "append_with_empty_partition", True, 18),
    ("orc", "pk_table_with_total_buckets", True, 18),
    ("orc", "pk_dv_index_with_commit_message_version10", True, 20),
]


def first_file_rows(path: Path, has_total_buckets: bool) -> list[tuple[bytes, bytes]]:
    """(partition, DataFileMeta row) of the first file list of every message in a Java batch."""
    data = path.read_bytes()
    (count,), pos = struct.unpack_from(">i", data, 0), 4
    out = []
    for _ in range(count):
        (length,) = struct.unpack_from(">i", data, pos)
        partition = data[pos + 4 : pos + 4 + length]
        pos += 4 + length + 4  # partition, bucket
        if has_total_buckets:
            pos += 5 if data[pos] else 1
        (files,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(files):
            (size,) = struct.unpack_from(">i", data, pos)
            out.append((partition, data[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        break  # later lists and messages need the full codec
    return out


def table_types(table: Path) -> dict[str, T.DataType]:
    schema = json.loads((table / "schema" / "schema-0").read_text())
    return {f["name"]: T.parse_type(f["type"]) for f in schema["fields"]}


@pytest.mark.parametrize(("fmt", "name", "has_total", "arity"), CASES, ids=[c[1] for c in CASES])
def test_java_data_file_meta_round_trips(fmt: str, name: str, has_total: bool, arity: int) -> None:
    table = golden_table_path(fmt, name)
    columns = table_types(table)
    schema_types = DATA_FILE_META[:arity]
    rows = [r for f in sorted((table / "commit_messages").iterdir()) for r in first_file_rows(f, has_total)]
    assert rows
    for partition, raw in rows:
        assert len(deserialize_row(partition, [T.INT()] if "f1" in columns else [T.STRING()])) == 1
        meta = decode_row(raw, schema_types, path=name)
        assert meta[0].startswith("data-") and meta[2] > 0
        assert isinstance(meta[12], Timestamp) and meta[12].millisecond > 1_500_000_000_000
        assert encode_row(list(meta), schema_types) == raw, "re-encoding must reproduce Java's bytes"
        value_cols = list(meta[16]) if arity > 16 and meta[16] is not None else list(columns)
        stats_types = [columns[c] for c in value_cols]
        for stats_row in meta[6][:2]:  # value stats min and max
            values = deserialize_row(stats_row, stats_types, path=name)
            assert serialize_row(list(values), stats_types) == stats_row


def test_complex_stats_values() -> None:
    # README of append_complex_data, snapshot 1, f1=10: DATE 1234 and 19909, DECIMAL(23, 5) values;
    # Java keeps no stats for the TIMESTAMP(9) and BYTES columns (null min and max).
    table = golden_table_path("parquet", "append_complex_data")
    types = list(table_types(table).values())
    _, raw = first_file_rows(table / "commit_messages" / "commit_messages-01", True)[0]
    meta = decode_row(raw, DATA_FILE_META[:18])
    assert meta[2] == 2
    assert deserialize_row(meta[6][0], types) == (
        10,
        1,
        date(1970, 1, 1) + timedelta(days=1234),
        None,
        Decimal("12.30000"),
        None,
    )
    assert deserialize_row(meta[6][1], types) == (
        10,
        1,
        date(1970, 1, 1) + timedelta(days=19909),
        None,
        Decimal("123456789987654321.45678"),
        None,
    )
    assert meta[6][2] == (0, 0, 0, 0, 0, 0)
