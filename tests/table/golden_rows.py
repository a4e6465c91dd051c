"""Expected rows of the Java-written golden tables, transcribed from each table's README.

Keys are (format, table, snapshot id); ``None`` as snapshot id means "latest, read with the latest
schema" (the READMEs' "Recall" sections). Rows are tuples in the read schema's column order.
Timestamps are written as their README text and compared as epoch nanoseconds; DATE values are
days since the epoch, as the README lists them.

Deletion-vector tables (``deletion-vectors.enabled``) hide uncompacted level-0 files from batch reads
(Java ``CoreOptions.batchScanSkipLevel0``), so a README's "snapshot-1-2" rows are the rows of the
compacted snapshot 2; snapshot 1 reads empty unless ``deletion-vectors.merge-on-read`` is set.

``pk_09`` has no README in our copy; its history is the one in paimon-cpp's README for the ORC twin
(``test/test_data/orc/pk_09.db/pk_09/README``) and its snapshot-6/8 rows are asserted by paimon-cpp's
``test/inte/read_inte_test.cpp`` (TestPkTableWithSnapshot6/8).
"""

from __future__ import annotations

from typing import Any

TWO_ROADS = (
    "Two roads diverged in a wood, and I took the one less traveled by, And that has made all the difference."
)
WHETHER = "Whether I shall turn out to be the hero of my own life."

Row = tuple[Any, ...]

_APPEND_BASE: list[Row] = [
    ("Alice", 10, 1, 11.1),
    ("Bob", 10, 0, 12.1),
    ("Emily", 10, 0, 13.1),
    ("Tony", 10, 0, 14.1),
    ("Lucy", 20, 1, 14.1),
]
_APPEND_09_S2 = [
    *_APPEND_BASE,
    ("Emily", 10, 0, 15.1),
    ("Bob", 10, 0, 12.1),
    ("Alex", 10, 0, 16.1),
    ("Paul", 20, 1, None),
]
_APPEND_09_S3 = [*_APPEND_09_S2, ("David", 10, 0, 17.1)]
_APPEND_09_S4 = [*_APPEND_09_S3, ("Lily", 10, 0, 17.1)]

_PK_S2: list[Row] = [
    (TWO_ROADS, 10, 1, 11.0),
    ("Alice", 10, 1, 11.1),
    ("Bob", 10, 0, 12.1),
    ("Emily", 10, 0, 13.1),
    ("Tony", 10, 0, 14.1),
    ("Alex", 10, 0, 16.1),
    ("David", 10, 0, 17.1),
    ("Lucy", 20, 1, 14.1),
    ("Paul", 20, 1, 18.1),
]
_TOTAL_BUCKETS: list[Row] = [
    ("Alice", 10, 1, 11.1),
    ("Bob", 10, 0, 12.1),
    ("Emily", 10, 0, 13.1),
    ("Tony", 10, 0, 14.1),
    ("Alex", 10, 0, 16.1),
]
_PK_DV_S4 = [r for r in _PK_S2 if r[0] not in ("Tony", "Alice")] + [("Alice", 10, 1, 19.1)]

_PK09_S4 = [*_PK_S2, (WHETHER, 10, 1, 19.1), ("Lily", 10, 1, 20.1)]
_PK09_S6 = [r for r in _PK09_S4 if r[0] not in ("Tony", "Alice", "Lily")] + [("Alice", 10, 1, 19.1)]
_PK09_S8 = [r for r in _PK09_S6 if r[0] != "Alice"] + [("Alice", 10, 1, 21.1)]

_COMPLEX_S1: list[Row] = [
    (10, 1, 1234, "2033-05-18 03:33:20.0", "123456789987654321.45678", b"add"),
    (20, 1, -1234, "1899-01-01 00:59:20.001001001", "-123456789987654321.45678", b"bad"),
    (10, 1, 19909, "2033-05-18 03:33:20.000001001", "12.30000", b"cat"),
]
_COMPLEX_S2 = [
    *_COMPLEX_S1,
    (10, 1, 0, "2008-12-28 00:00:00.000123456", None, b"dad"),
    (10, 1, 100, "2008-12-28 00:00:00.00012345", "-123.45000", b"eat"),
    (10, 1, None, "1899-01-01 00:59:20.001001001", "0.00000", b"fat"),
    (20, 0, -100, None, "-0.00000", b"get"),
]
_COMPLEX_S3 = [*_COMPLEX_S2, (10, 1, 20006, "2024-10-10 10:10:10.1001001", "1728551410100.10010", None)]

# schema 0 of pk_table_with_alter_table: key0, key1, key2, a, b, c, d, k
_ALTER_S2: list[Row] = [
    (0, 1, 2, 3, 4, 5, 6, TWO_ROADS),
    (0, 1, 12, 13, 14, 15, 16, "Alice"),
    (1, 1, 22, 23, 24, 25, 26, "Bob"),
    (1, 1, 32, 33, 34, 35, 36, "Emily"),
    (1, 1, 42, 43, 44, 45, 46, "Tony"),
    (1, 1, 52, 53, 54, 55, 56, "Alex"),
    (1, 1, 62, 63, 64, 65, 66, "David"),
    (1, 1, 72, 73, 74, 75, 76, WHETHER),
    (1, 1, 82, 83, 84, 85, 86, "Lily"),
]
_ALTER_S4 = [r for r in _ALTER_S2 if r[7] not in ("Tony", "Lily", "Alice")] + [
    (0, 1, 12, 93, 94, 95, 96, "Alice")
]
# latest schema: key1, k, key_2, c, d, a, key0, e ("Recall with schema-1")
_ALTER_RECALL: list[Row] = [
    (1, "Bob", 22, 24, None, 26, 1, None),
    (1, "Emily", 32, 34, None, 36, 1, None),
    (1, "David", 62, 64, None, 66, 1, None),
    (1, WHETHER, 72, 74, None, 76, 1, None),
    (1, "Alex", 52, 514, 518, 516, 1, 519),
    (1, TWO_ROADS, 2, 4, None, 6, 0, None),
    (1, "Alice", 12, 94, None, 96, 0, None),
    (1, "Paul", 502, 504, 508, 506, 0, 509),
]

# schema 0 of pk_table_with_mor: k0, k1, p0, p1, s0, s1, v0, v1 (sequence.field = s0,s1)
_MOR_S1: list[Row] = [
    (0, 0, 0, 0, "apple", "see", 10.0, True),
    (0, 1, 0, 0, "banana", "you", 11.1, False),
    (1, 0, 0, 0, "car", "later", 12.2, True),
    (1, 1, 0, 0, "driver", "!", 13.3, False),
    (0, 0, 1, 0, "elephant", "hi", 20.0, True),
    (0, 1, 0, 1, "mouse", "you", 30.0, False),
]
# snapshot 2 updates every key, but the user-defined sequence field (s0, s1) keeps the rows whose
# (s0, s1) is larger: banana > abandon, (car, later) > (car, again), zoo > mouse; equal -> newer wins.
_MOR_S2: list[Row] = [
    (0, 0, 0, 0, "apple", "see", 110.0, False),
    (0, 1, 0, 0, "banana", "you", 11.1, False),
    (1, 0, 0, 0, "car", "later", 12.2, True),
    (1, 1, 0, 0, "driver", "!", 13.3, False),
    (1, 2, 0, 0, "driver", "!", 13.3, False),
    (0, 0, 1, 0, "elephant", "hi", 120.0, False),
    (0, 1, 0, 1, "zoo", "you", 130.0, False),
]
_MOR_S3 = [*_MOR_S2, (100, 200, 0, 0, "max", "number", 140.4, False)]
# latest schema: k1, k0, p0, p1, s1 STRING, s0 BYTES, v0 INT, v1 STRING, v2 INT: renames by id,
# string->bytes, double->int (truncation), boolean->string, an added column (null)
_MOR_RECALL: list[Row] = [
    (0, 0, 0, 0, "apple", b"see", 110, "false", None),
    (0, 1, 0, 0, "banana", b"you", 11, "false", None),
    (1, 0, 0, 0, "car", b"later", 12, "true", None),
    (1, 1, 0, 0, "driver", b"!", 13, "false", None),
    (1, 2, 0, 0, "driver", b"!", 13, "false", None),
    (100, 200, 0, 0, "max", b"number", 140, "false", None),
    (0, 1, 0, 1, "zoo", b"you", 130, "false", None),
    (0, 0, 1, 0, "elephant", b"hi", 120, "false", None),
]

EXPECTED: dict[tuple[str, str, int | None], list[Row]] = {
    ("orc", "append_10_stats_dense_store", 1): _APPEND_BASE,
    ("orc", "append_10_stats_dense_store", None): _APPEND_BASE,
    ("orc", "pk_dv_index_with_commit_message_version10", 1): [],
    ("orc", "pk_dv_index_with_commit_message_version10", 2): _PK_S2,
    ("orc", "pk_dv_index_with_commit_message_version10", 3): _PK_S2,
    ("orc", "pk_dv_index_with_commit_message_version10", 4): _PK_DV_S4,
    ("orc", "pk_dv_index_with_commit_message_version10", None): _PK_DV_S4,
    ("orc", "pk_table_with_total_buckets", 1): _TOTAL_BUCKETS,
    ("orc", "pk_table_with_total_buckets", None): _TOTAL_BUCKETS,
    ("parquet", "append_09", 1): _APPEND_BASE,
    ("parquet", "append_09", 2): _APPEND_09_S2,
    ("parquet", "append_09", 3): _APPEND_09_S3,
    ("parquet", "append_09", 4): _APPEND_09_S4,
    ("parquet", "append_09", 5): _APPEND_09_S4,
    ("parquet", "append_09", None): _APPEND_09_S4,
    ("parquet", "append_10", 1): _APPEND_BASE,
    ("parquet", "append_10", None): _APPEND_BASE,
    ("parquet", "append_complex_data", 1): _COMPLEX_S1,
    ("parquet", "append_complex_data", 2): _COMPLEX_S2,
    ("parquet", "append_complex_data", 3): _COMPLEX_S3,
    ("parquet", "append_complex_data", 4): _COMPLEX_S3,
    ("parquet", "append_complex_data", None): _COMPLEX_S3,
    ("parquet", "append_with_empty_partition", None): [
        ("2025", 500, -1, 15.1),
        ("2024", 100, -2, 11.1),
        ("2024", 300, 1, 13.1),
        (None, 200, -3, 12.1),
        (None, 50, 1, 14.1),
        (None, 100, 2, 16.1),
    ],
    ("parquet", "pk_09", 1): [],
    ("parquet", "pk_09", 2): _PK_S2,
    ("parquet", "pk_09", 4): _PK09_S4,
    ("parquet", "pk_09", 6): _PK09_S6,
    ("parquet", "pk_09", 8): _PK09_S8,
    ("parquet", "pk_09", None): _PK09_S8,
    ("parquet", "pk_table_with_alter_table", 1): [],
    ("parquet", "pk_table_with_alter_table", 2): _ALTER_S2,
    ("parquet", "pk_table_with_alter_table", 4): _ALTER_S4,
    ("parquet", "pk_table_with_alter_table", 6): _ALTER_RECALL,
    ("parquet", "pk_table_with_alter_table", None): _ALTER_RECALL,
    ("parquet", "pk_table_with_mor", 1): _MOR_S1,
    ("parquet", "pk_table_with_mor", 2): _MOR_S2,
    ("parquet", "pk_table_with_mor", 3): _MOR_S3,
    ("parquet", "pk_table_with_mor", None): _MOR_RECALL,
}

# With deletion-vectors.merge-on-read=true uncompacted level-0 files are merged in: snapshot 1 of
# a "snapshot-1-2" pair already shows its rows, and snapshot 3 of "snapshot-3-4" its changes.
EXPECTED_DV_MERGE_ON_READ: dict[tuple[str, str, int], list[Row]] = {
    ("orc", "pk_dv_index_with_commit_message_version10", 1): _PK_S2,
    ("orc", "pk_dv_index_with_commit_message_version10", 3): _PK_DV_S4,
    ("parquet", "pk_09", 1): _PK_S2,
    ("parquet", "pk_09", 7): _PK09_S8,
    ("parquet", "pk_table_with_alter_table", 3): _ALTER_S4,
}


def expected_for(fmt: str, name: str, snapshot_id: int | None) -> list[Row]:
    return EXPECTED[(fmt, name, snapshot_id)]
