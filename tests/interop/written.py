"""The tables we write for the interop read tests, and how each is known to differ per engine.

Each :class:`Written` case builds one table through ``paimon_meta.open_table`` (schema-0 created with
``SchemaManager``, no catalog) and returns its path and the rows it holds by construction: append with
bucket -1 and fixed buckets, a partitioned primary-key table with updates and deletes (also in thin mode),
partition values that need escaping, nested types, an empty table; Parquet and ORC; every simple type
with edge values. ``tests/interop/changed.py`` adds tables changed by our table operations (compaction,
overwrite, manifest compaction, expiration, schema evolution). ``tests/fixtures/interop_tables.py``
builds all of them once per session; Java (``test_java_read.py``) and paimon-rust
(``test_rust_read.py``) read them.

Known differences are strict xfails with the reason: ``java_differs`` (Java reads neither what we read
nor what we wrote), ``we_differ`` (our reader does not read what we wrote; Java does), ``rust_differs``
(paimon-rust does not read what we read).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import paimon_meta
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import to_arrow_schema, to_arrow_type
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
    RowType,
)
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)


def ts(text: str) -> int:
    """Epoch nanoseconds of a wall-clock ``yyyy-mm-dd HH:MM:SS[.fffffffff]`` (any year 1..9999)."""
    date_part, _, fraction = text.partition(".")
    seconds = (dt.datetime.fromisoformat(date_part) - _EPOCH) // dt.timedelta(seconds=1)
    return seconds * 1_000_000_000 + int(fraction.ljust(9, "0"))


def days(text: str) -> int:
    return (dt.date.fromisoformat(text) - dt.date(1970, 1, 1)).days


Column = tuple[str, DataType, list[Any]]

F32_MAX = 3.4028234663852886e38
F32_MIN_SUBNORMAL = 1.401298464324817e-45
DEC38 = Decimal("9999999999999999999999999999.9999999999")
DEC38_MIN = Decimal("-9999999999999999999999999999.9999999999")  # not -DEC38: that rounds to 28 digits
NAN, INF = float("nan"), float("inf")

# Timestamps of the main tables: before 1970 and after 2038, but inside what every path handles (see the
# tables below for the rest): 1677-09-22..2262-04-10, and before 1970 only whole milliseconds.
TS3 = [
    "2024-01-02 03:04:05.678",
    "1900-01-01 00:00:00.001",
    "2262-04-10 23:59:59.999",
    None,
    "1969-12-31 23:59:59.999",
    "2038-01-19 03:14:08.001",
]
TS6 = [
    "2024-01-02 03:04:05.678901",
    "1677-09-22 00:00:00.001000",
    "2262-04-10 23:59:59.999999",
    None,
    "1969-12-31 23:59:59.999000",
    "2100-02-28 12:00:00.000001",
]

# (name, type, six values): row 0 ordinary, 1 minimums, 2 maximums, 3 nulls, 4 special/unicode, 5 edges.
SIMPLE_COLUMNS: list[Column] = [
    ("b", BOOLEAN(), [True, False, True, None, False, True]),
    ("ti", TINYINT(), [1, -128, 127, None, 0, -1]),
    ("si", SMALLINT(), [2, -32768, 32767, None, 0, -2]),
    ("i", INT(), [3, -(2**31), 2**31 - 1, None, 0, -3]),
    ("bi", BIGINT(), [4, -(2**63), 2**63 - 1, None, 0, -4]),
    ("f", FLOAT(), [1.1, -F32_MAX, F32_MIN_SUBNORMAL, None, NAN, -0.0]),
    ("d", DOUBLE(), [0.1, -1.7976931348623157e308, 5e-324, None, NAN, -INF]),
    ("dec9", DECIMAL(9, 2), ["1234567.89", "-9999999.99", "9999999.99", None, "0.00", "-0.01"]),
    (
        "dec18",
        DECIMAL(18, 4),
        ["12345678901234.5678", "-99999999999999.9999", "99999999999999.9999", None, "0.0001", "0.0000"],
    ),
    (
        "dec38",
        DECIMAL(38, 10),
        ["1234567890123456789012345678.0123456789", DEC38_MIN, DEC38, None, "0E-10", "-1E-10"],
    ),
    (
        "s",
        STRING(),
        [
            "hello",
            "",
            "x" * 300,
            None,
            "héllo wörld 日本語 🦀",
            'q " b \\ nl \n tab \t \x01 \x7f \x85 \u2028',
        ],
    ),
    ("vc", VARCHAR(20), ["abc", "", "twenty characters!!!", None, "ünïcödé", "🦀 trailing  "]),
    ("c", CHAR(5), ["abcde", "a", "zzzzz", None, "ééééé", " ab"]),  # trailing spaces: CHAR_COLUMNS
    (
        "bin",
        BINARY(4),
        [b"\x00\x01\x02\x03", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", None, b"abcd", b"\x80\x7f\x00\x01"],
    ),
    ("vb", VARBINARY(10), [b"\xde\xad\xbe\xef", b"", bytes(range(10)), None, b"\x00", b"z"]),
    ("by", BYTES(), [b"bytes", b"", bytes(range(256)), None, b"\x00\x00\x00", b"\xff"]),
    ("dt", DATE(), [days("2024-02-29"), days("1900-01-01"), days("9999-12-31"), None, 0, -1]),
    ("tm", TIME(3), [45296789, 0, 86399999, None, 1, 43200000]),
    ("ts3", TIMESTAMP(3), TS3),
    ("ts6", TIMESTAMP(6), TS6),
    ("ltz3", TIMESTAMP_LTZ(3), TS3),
    ("ltz6", TIMESTAMP_LTZ(6), TS6),
]

# TIMESTAMP(7..9): before 1970 only whole milliseconds (see PRE_1970_SUB_MILLIS_COLUMNS).
NANOS_COLUMNS: list[Column] = [
    (
        "ts7",
        TIMESTAMP(7),
        ["2024-01-02 03:04:05.1234567", "1900-01-01 00:00:00.001", None, "2200-06-01 00:00:00.9999999"],
    ),
    (
        "ts9",
        TIMESTAMP(9),
        ["2024-01-02 03:04:05.123456789", "1969-12-31 23:59:59.999", None, "2262-04-11 23:47:16.854775807"],
    ),
    (
        "ltz9",
        TIMESTAMP_LTZ(9),
        ["2024-01-02 03:04:05.123456789", "1677-09-22 00:00:00.001", None, "2038-01-19 03:14:08.000000001"],
    ),
]

# Lower precisions in the same Parquet file as TIMESTAMP(7..9): INT96 for 7..9, INT64 for the rest.
MILLIS_MICROS_COLUMNS: list[Column] = [
    ("m3", TIMESTAMP(3), TS3[:4]),
    ("m6", TIMESTAMP(6), TS6[:4]),
    ("mltz3", TIMESTAMP_LTZ(3), TS3[:4]),
    ("mltz6", TIMESTAMP_LTZ(6), TS6[:4]),
]

# Before 1970 with digits below the millisecond.
PRE_1970_SUB_MILLIS_COLUMNS: list[Column] = [
    (
        "ts6",
        TIMESTAMP(6),
        ["1969-12-31 23:59:59.999999", "1900-01-01 00:00:00.000001", "1969-12-31 23:59:58.500001", None],
    ),
    (
        "ltz6",
        TIMESTAMP_LTZ(6),
        ["1969-12-31 23:59:59.999999", "1900-01-01 00:00:00.000001", "1969-12-31 23:59:58.500001", None],
    ),
]

# Far from 1970 (Arrow's nanosecond range is 1677-09-21..2262-04-11), and around the Gregorian switch
# (1582-10-15; hybrid-calendar readers would shift the days before it). Whole milliseconds only.
FAR_COLUMNS: list[Column] = [
    ("dt", DATE(), [days("0001-01-01"), days("1000-06-15"), days("1582-10-04"), days("9999-12-31")]),
    (
        "ts3",
        TIMESTAMP(3),
        [
            "0001-01-01 00:00:00.000",
            "1000-06-15 12:00:00.001",
            "1582-10-04 23:59:59.999",
            "9999-12-31 23:59:59.999",
        ],
    ),
    (
        "ts6",
        TIMESTAMP(6),
        [
            "0001-01-01 00:00:00.000",
            "1582-10-15 00:00:00.001",
            "2262-04-12 00:00:00.000",
            "9999-12-31 23:59:59.999",
        ],
    ),
    (
        "ltz6",
        TIMESTAMP_LTZ(6),
        [
            "0001-01-01 00:00:00.000",
            "1582-10-15 00:00:00.001",
            "2262-04-12 00:00:00.000",
            "9999-12-31 23:59:59.999",
        ],
    ),
]


# CHAR(n) values with trailing spaces (Java's ORC reader trims them, see JAVA_CHAR_ORC).
CHAR_COLUMNS: list[Column] = [("c", CHAR(5), ["a    ", " a   ", "ab", "abcde"])]


def arrow_column(data_type: DataType, values: Sequence[Any]) -> pa.Array:
    pa_type = to_arrow_type(data_type)
    if pa.types.is_timestamp(pa_type):
        per_unit = 1_000_000_000 // _UNITS_PER_SECOND[pa_type.unit]
        ints = [None if v is None else ts(v) // per_unit for v in values]
        return pa.array(ints, pa.int64()).cast(pa_type)
    if pa.types.is_date32(pa_type) or pa.types.is_time32(pa_type):
        return pa.array(values, pa.int32()).cast(pa_type)
    if pa.types.is_decimal(pa_type):
        return pa.array([None if v is None else Decimal(v) for v in values], pa_type)
    return pa.array(values, pa_type)


def create_table(
    path: Path,
    columns: Sequence[tuple[str, DataType]],
    *,
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: dict[str, str],
) -> str:
    """schema-0 through SchemaManager (the catalog-less path), as ``create_table`` writes it."""
    fields = tuple(DataField(i, name, t) for i, (name, t) in enumerate(columns))
    schema = TableSchema(
        0,
        fields,
        len(fields) - 1,
        tuple(partition_keys),
        tuple(primary_keys),
        options,
        time_millis=int(time.time() * 1000),
    )
    uri = str(path)
    assert SchemaManager(get_file_io(uri), uri).commit_new_schema(schema)
    return uri


def commit(
    target: str | FileStoreTable,
    data: pa.Table | None,
    *,
    overwrite: Mapping[str, Any] | OverwriteSpec | None = None,
) -> None:
    """Write ``data`` (None: no rows) and commit it, as an OVERWRITE of ``overwrite`` when given, to the
    table at a path (a storage-guarded commit) or to a catalog's table (through the metastore)."""
    table = paimon_meta.open_table(target) if isinstance(target, str) else target
    wb = table.new_batch_write_builder()
    if overwrite is not None:
        wb.overwrite(overwrite)
    write, table_commit = wb.new_write(), wb.new_commit()
    if data is not None:
        write.write_arrow(data)
    table_commit.commit(write.prepare_commit())
    write.close()


KEY_COLUMNS: list[tuple[str, DataType]] = [("id", INT(False)), ("p", STRING(False))]


def batch(
    ids: Sequence[int],
    parts: Sequence[str],
    columns: Sequence[Column],
    rows: Sequence[int],
    kinds: Sequence[str] | None = None,
) -> pa.Table:
    """Rows ``rows`` (indexes into each column's values) with the given ids and partitions."""
    data = {"id": pa.array(ids, pa.int32()), "p": pa.array(parts, pa.string())}
    for name, data_type, values in columns:
        data[name] = arrow_column(data_type, [values[r] for r in rows])
    if kinds is not None:
        data["_row_kind"] = pa.array(kinds, pa.string())
    return pa.table(data)


Built = tuple[str, list[pa.Table]]  # the table's path, and the rows it holds in the end


def write_append(root: Path, fmt: str, bucket: int, columns: list[Column]) -> Built:
    options = {"bucket": str(bucket), "file.format": fmt}
    if bucket > 0:
        options["bucket-key"] = "id"
    path = create_table(
        root, [*KEY_COLUMNS, *((n, t) for n, t, _ in columns)], partition_keys=["p"], options=options
    )
    n = len(columns[0][2])
    batches = [
        batch(list(range(1, n + 1)), (["a", "b"] * n)[:n], columns, range(n)),
        batch([n + 1, n + 2], ["a", "c"], columns, [0, n - 1]),
    ]
    for data in batches:
        commit(path, data)
    return path, batches


def pk_rounds(columns: Sequence[Column]) -> tuple[list[pa.Table], pa.Table]:
    """Three commits on a primary-key table keyed by (id, p), and the rows it holds after them."""
    rounds = [
        batch([1, 2, 3, 4, 5, 6], ["a", "a", "b", "b", "c", "c"], columns, range(6)),
        # +U, a -U/+U pair, a -D, a key written twice in one batch, the -D of a key that never existed.
        batch(
            [1, 3, 7, 7, 9, 5, 5],
            ["a", "b", "c", "c", "a", "c", "c"],
            columns,
            [5, 2, 0, 1, 3, 4, 0],
            kinds=["+U", "-D", "+I", "+I", "-D", "-U", "+U"],
        ),
        batch([2], ["a"], columns, [3], kinds=["+U"]),
    ]
    return rounds, batch([1, 2, 4, 5, 6, 7], ["a", "a", "b", "c", "c", "c"], columns, [5, 3, 3, 0, 5, 1])


def write_pk(
    root: Path, fmt: str, bucket: int, columns: list[Column], options: dict[str, str] | None = None
) -> Built:
    path = create_table(
        root,
        [*KEY_COLUMNS, *((n, t) for n, t, _ in columns)],
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options={"bucket": str(bucket), "file.format": fmt, **(options or {})},
    )
    rounds, expected = pk_rounds(columns)
    for data in rounds:
        commit(path, data)
    return path, [expected]


def write_partitions(root: Path, fmt: str) -> Built:
    """Partition values that need escaping in paths, the default partition (null), a DATE partition."""
    columns = [("ps", STRING()), ("pd", DATE()), ("v", INT())]
    path = create_table(
        root, columns, partition_keys=["ps", "pd"], options={"bucket": "-1", "file.format": fmt}
    )
    names = ["a b", "x/y", "ü", "a=b", "%41", "#?:*\\", "", None, "a", "a"]
    dates = [0, 0, 0, 0, 0, 0, 0, 0, None, days("1900-01-01")]
    data = pa.table(
        {
            "ps": pa.array(names, pa.string()),
            "pd": pa.array(dates, pa.int32()).cast(pa.date32()),
            "v": pa.array(range(len(names)), pa.int32()),
        }
    )
    commit(path, data)
    return path, [data]


def write_nested(root: Path, fmt: str) -> Built:
    """ARRAY, MAP and ROW (nested ones too), with nulls and empty collections."""
    row_type = RowType(
        True,
        (
            DataField(5, "x", INT()),
            DataField(6, "ts", TIMESTAMP(6)),
            DataField(7, "a", ArrayType(True, STRING())),
            DataField(8, "ts9", TIMESTAMP(9)),  # with ts: INT96 and INT64 in one Parquet file
        ),
    )
    columns = [
        *KEY_COLUMNS,
        ("arr", ArrayType(True, INT())),
        ("m", MapType(True, STRING(False), DECIMAL(10, 2))),
        ("r", row_type),
    ]
    path = create_table(root, columns, partition_keys=["p"], options={"bucket": "-1", "file.format": fmt})
    schema = to_arrow_schema(paimon_meta.open_table(path).schema.fields)
    rows = [
        {
            "id": 1,
            "p": "a",
            "arr": [1, None, 3],
            "m": [("k", Decimal("1.50")), ("ü", None)],
            "r": {
                "x": 1,
                "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
                "a": ["u", None],
                "ts9": dt.datetime(2024, 1, 2, 3, 4, 5, 678901),
            },
        },
        {"id": 2, "p": "a", "arr": None, "m": None, "r": None},
        {"id": 3, "p": "b", "arr": [], "m": [], "r": {"x": None, "ts": None, "a": [], "ts9": None}},
    ]
    data = pa.Table.from_pylist(rows, schema=schema)
    commit(path, data)
    return path, [data]


def write_empty(root: Path, fmt: str) -> Built:
    """A table without a snapshot."""
    path = create_table(root, KEY_COLUMNS, options={"bucket": "-1", "file.format": fmt})
    return path, []


class BuildContext:
    """What a case's build may need besides its directory: a catalog over the cases' common warehouse
    (only the cases marked ``needs_catalog``, e.g. snapshot expiration), connected on first use."""

    def __init__(self, warehouse: Path, metastore_url: Callable[[], str]) -> None:
        self.warehouse = warehouse
        self._metastore_url = metastore_url
        self._catalog: MetastoreCatalog | None = None

    def catalog(self) -> MetastoreCatalog:
        if self._catalog is None:
            self._catalog = paimon_meta.connect(self._metastore_url(), str(self.warehouse))
        return self._catalog

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()


Builder = Callable[[BuildContext, Path, str], Built]  # (context, table directory, file format)


@dataclass(frozen=True)
class Written:
    """A table we write, and the reasons of its known failures (strict xfail). ``builder`` builds the
    cases of ``tests/interop/changed.py``; the other kinds are built here."""

    name: str
    kind: str  # "append", "pk", "partitions", "nested", "empty", or "changed" (with a builder)
    fmt: str
    columns: list[Column] = field(default_factory=list)
    bucket: int = -1
    java_differs: str | None = None  # Java reads neither what we read nor what we wrote
    we_differ: str | None = None  # our reader does not read what we wrote (Java does)
    rust_differs: str | None = None  # paimon-rust does not read what we read
    options: dict[str, str] = field(default_factory=dict)  # table options ("pk" tables)
    builder: Builder | None = None
    needs_catalog: bool = False  # built through a catalog (a Postgres metastore)

    def build(self, ctx: BuildContext, path: Path) -> Built:
        if self.builder is not None:
            return self.builder(ctx, path, self.fmt)
        if self.kind == "pk":
            return write_pk(path, self.fmt, self.bucket, self.columns, self.options)
        if self.kind == "partitions":
            return write_partitions(path, self.fmt)
        if self.kind == "nested":
            return write_nested(path, self.fmt)
        if self.kind == "empty":
            return write_empty(path, self.fmt)
        return write_append(path, self.fmt, self.bucket, self.columns)


# pyarrow's ORC writer (Arrow's adapters/orc FillTimestampBatch) splits a timestamp into seconds with C++
# integer division, which truncates toward zero, so a pre-1970 value with a fraction gets a negative
# nanosecond part (-1 ms -> 0 s and -1,000,000 ns; ORC expects 0..999,999,999). pyarrow reads that back;
# other ORC readers do not. No option of pyarrow's ORC writer changes the split.
JAVA_PRE_1970_ORC = (
    "pyarrow's ORC writer stores pre-1970 timestamps with a negative nanosecond part; with sub-millisecond "
    "digits Java's ORC reader yields a negative nano-of-millisecond: Java Paimon 0.9/1.0 throws "
    "IllegalArgumentException on each"
)
RUST_PRE_1970_ORC = (
    "pyarrow's ORC writer stores pre-1970 timestamps with a fraction with a negative nanosecond part; "
    "paimon-rust's ORC reader (orc-rust 0.8) refuses them: 'Overflow while decoding timestamp (seconds=0, "
    "nanoseconds=18446744073708551616)'"
)
RUST_FAR_ORC = (
    "paimon-rust's ORC reader (orc-rust 0.8) decodes timestamps to nanoseconds and refuses values outside "
    "1677-09-21..2262-04-11 ('Overflow while decoding timestamp'), as our ORC reader does"
)
JAVA_CHAR_ORC = (
    "Java Paimon 0.9/1.0 read CHAR(n) from ORC right-trimmed ('a    ' -> 'a'; it writes them padded as ORC "
    "char(n) and reads them back trimmed); we write ORC string and read the value as written"
)
WE_FAIL_FAR_ORC = (
    "our ORC reader (pyarrow) reads timestamps at nanosecond resolution and refuses values outside "
    "1677-09-21..2262-04-11, which we write (and Java reads)"
)

JAVA_THIN_MODE = (
    "Java Paimon 0.9.0 and the harness's 1.0-SNAPSHOT (a 2024-09 build) predate data-file.thin-mode (Paimon "
    "1.0.0: apache/paimon#4666 writes it, #4651 reads keys from the value columns): they read the _KEY_ "
    "columns and throw 'Required column is missing in data file. Col: [_KEY_id]'"
)

FMTS = ("parquet", "orc")


def _rust(fmt: str) -> str | None:
    """The main tables hold pre-1970 timestamps with a fraction (TS3, TS6): see RUST_PRE_1970_ORC."""
    return RUST_PRE_1970_ORC if fmt == "orc" else None


WRITTEN: list[Written] = [
    *(
        Written(f"append_unaware_{fmt}", "append", fmt, SIMPLE_COLUMNS, rust_differs=_rust(fmt))
        for fmt in FMTS
    ),
    *(
        Written(f"append_fixed_{fmt}", "append", fmt, SIMPLE_COLUMNS, bucket=3, rust_differs=_rust(fmt))
        for fmt in FMTS
    ),
    *(Written(f"pk_{fmt}", "pk", fmt, SIMPLE_COLUMNS, bucket=2, rust_differs=_rust(fmt)) for fmt in FMTS),
    Written(
        "pk_thin_parquet",
        "pk",
        "parquet",
        SIMPLE_COLUMNS,
        bucket=2,
        options={"data-file.thin-mode": "true"},
        java_differs=JAVA_THIN_MODE,
    ),
    *(Written(f"partitions_{fmt}", "partitions", fmt) for fmt in FMTS),
    *(Written(f"nested_{fmt}", "nested", fmt, rust_differs=_rust(fmt)) for fmt in FMTS),
    Written("empty", "empty", "parquet"),
    Written("timestamp_nanos_parquet", "append", "parquet", NANOS_COLUMNS),
    Written("timestamp_mixed_parquet", "append", "parquet", [*NANOS_COLUMNS, *MILLIS_MICROS_COLUMNS]),
    Written("timestamp_nanos_orc", "append", "orc", NANOS_COLUMNS, rust_differs=RUST_PRE_1970_ORC),
    Written("pre_1970_sub_millis_parquet", "append", "parquet", PRE_1970_SUB_MILLIS_COLUMNS),
    Written(
        "pre_1970_sub_millis_orc",
        "append",
        "orc",
        PRE_1970_SUB_MILLIS_COLUMNS,
        java_differs=JAVA_PRE_1970_ORC,
        rust_differs=RUST_PRE_1970_ORC,
    ),
    Written("char_trailing_spaces_parquet", "append", "parquet", CHAR_COLUMNS),
    Written("char_trailing_spaces_orc", "append", "orc", CHAR_COLUMNS, java_differs=JAVA_CHAR_ORC),
    Written("far_timestamps_parquet", "append", "parquet", FAR_COLUMNS),
    Written(
        "far_timestamps_orc",
        "append",
        "orc",
        FAR_COLUMNS,
        we_differ=WE_FAIL_FAR_ORC,
        rust_differs=RUST_FAR_ORC,
    ),
]
