"""TablePaths, partition path rendering and escaping, file naming."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import Timestamp
from paimon_meta.model.manifest import EMPTY_STATS, DataFileMeta, IndexFileMeta
from paimon_meta.model.options import CoreOptions
from paimon_meta.model.types import (
    BOOLEAN,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    STRING,
    TIME,
    TIMESTAMP,
    DataField,
)
from paimon_meta.table.paths import (
    DataFilePathFactory,
    PartitionComputer,
    TablePaths,
    escape_path_name,
    partition_value_text,
    unescape_path_name,
)

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("plain-value_1.5", "plain-value_1.5"),
        ("a/b", "a%2Fb"),
        ("k=v", "k%3Dv"),
        ("50%", "50%25"),
        ("\"#'*:?\\{}[]^", "%22%23%27%2A%3A%3F%5C%7B%7D%5B%5D%5E"),
        ("tab\there", "tab%09here"),
        ("\x00\x1f\x7f", "%00%1F%7F"),
        ("space and ümlaut 日本", "space and ümlaut 日本"),  # Java escapes ASCII only
    ],
)
def test_escape_path_name_matches_java(raw: str, escaped: str) -> None:
    assert escape_path_name(raw) == escaped
    assert unescape_path_name(escaped) == raw


def test_escape_rejects_empty_and_unescape_keeps_invalid_sequences() -> None:
    with pytest.raises(ValidationError):
        escape_path_name("")
    assert unescape_path_name("100%zz%4") == "100%zz%4"


@pytest.mark.parametrize(
    ("value", "dtype", "legacy", "text"),
    [
        (10, INT(), True, "10"),
        (True, BOOLEAN(), True, "true"),
        (1.0, DOUBLE(), True, "1.0"),
        (1e7, DOUBLE(), True, "1.0E7"),
        (0.0001, DOUBLE(), True, "1.0E-4"),
        (1.1, FLOAT(), True, "1.1"),
        (Decimal("12.30"), DECIMAL(10, 2), True, "12.30"),
        (dt.date(2024, 1, 31), DATE(), True, "19753"),  # legacy: the internal day number
        (dt.date(2024, 1, 31), DATE(), False, "2024-01-31"),
        (3_723_004, TIME(3), True, "3723004"),
        (3_723_004, TIME(3), False, "01:02:03.004"),
        (Timestamp.from_datetime(dt.datetime(2024, 1, 2, 3, 4)), TIMESTAMP(6), True, "2024-01-02T03:04"),
        (
            Timestamp.from_datetime(dt.datetime(2024, 1, 2, 3, 4, 5, 120000)),
            TIMESTAMP(6),
            True,
            "2024-01-02T03:04:05.120",
        ),
        (Timestamp(1_704_164_645_000, 1), TIMESTAMP(9), True, "2024-01-02T03:04:05.000000001"),
        (
            Timestamp.from_datetime(dt.datetime(2024, 1, 2, 3, 4, 5, 120000)),
            TIMESTAMP(6),
            False,
            "2024-01-02 03:04:05.120000",
        ),
        (
            Timestamp.from_datetime(dt.datetime(2024, 1, 2, 3, 4, 5)),
            TIMESTAMP(3),
            False,
            "2024-01-02 03:04:05.000",
        ),
        (
            Timestamp.from_datetime(dt.datetime(2024, 1, 2, 3, 4, 5)),
            TIMESTAMP(0),
            False,
            "2024-01-02 03:04:05",
        ),
        (Timestamp(1_704_164_645_123, 400_000), TIMESTAMP(3), False, "2024-01-02 03:04:05.1234"),
        (Timestamp(1_704_164_645_123, 400_000), TIMESTAMP(9), False, "2024-01-02 03:04:05.123400000"),
    ],
)
def test_partition_value_text(value: object, dtype: object, legacy: bool, text: str) -> None:
    assert partition_value_text(value, dtype, legacy=legacy) == text  # type: ignore[arg-type]


def test_partition_computer_defaults_null_and_blank_values() -> None:
    fields = [DataField(0, "dt", STRING()), DataField(1, "hr", INT())]
    computer = PartitionComputer(fields)
    assert computer.path(("2024/01", 7)) == "dt=2024%2F01/hr=7"
    assert computer.path((None, None)) == "dt=__DEFAULT_PARTITION__/hr=__DEFAULT_PARTITION__"
    assert computer.path(("  ", 1)) == "dt=__DEFAULT_PARTITION__/hr=1"
    assert computer.path(("\u00a0", 1)) == "dt=\u00a0/hr=1"  # not whitespace to Java
    custom = PartitionComputer(fields, "NULL_PART")
    assert custom.path(("", 1)) == "dt=NULL_PART/hr=1"
    with pytest.raises(ValidationError):
        computer.path(("x",))


def _file(name: str, external: str | None = None) -> DataFileMeta:
    return DataFileMeta(name, 1, 1, b"", b"", EMPTY_STATS, EMPTY_STATS, 0, 0, 0, 0, external_path=external)


def test_table_paths_layout() -> None:
    paths = TablePaths("s3://bucket/wh/db.db/t/", [DataField(0, "p", STRING())])
    assert paths.schema_path(3) == "s3://bucket/wh/db.db/t/schema/schema-3"
    assert paths.snapshot_path(7) == "s3://bucket/wh/db.db/t/snapshot/snapshot-7"
    assert paths.latest_hint_path.endswith("/snapshot/LATEST")
    assert paths.earliest_hint_path.endswith("/snapshot/EARLIEST")
    assert paths.manifest_path("manifest-list-x-0") == "s3://bucket/wh/db.db/t/manifest/manifest-list-x-0"
    assert paths.index_file_path("index-x-0") == "s3://bucket/wh/db.db/t/index/index-x-0"
    ext = IndexFileMeta("DELETION_VECTORS", "index-x-1", 1, 1, external_path="s3://other/index-x-1")
    assert paths.index_file_path(ext) == "s3://other/index-x-1"
    assert paths.bucket_path(("a b",), 3) == "s3://bucket/wh/db.db/t/p=a b/bucket-3"
    assert paths.bucket_path(("x",), -2).endswith("/p=x/bucket-postpone")
    assert (
        paths.data_file_path(("x",), 0, _file("data-1.orc"))
        == "s3://bucket/wh/db.db/t/p=x/bucket-0/data-1.orc"
    )
    assert paths.data_file_path(("x",), 0, _file("data-1.orc", "s3://ext/p=x/bucket-0/data-1.orc")) == (
        "s3://ext/p=x/bucket-0/data-1.orc"
    )


def test_unpartitioned_and_path_directory() -> None:
    assert TablePaths("/wh/t").bucket_path((), 0) == "/wh/t/bucket-0"
    options = CoreOptions({"data-file.path-directory": "data", "partition.default-name": "N"})
    paths = TablePaths.for_table("/wh/t", [DataField(0, "p", INT())], options)
    assert paths.bucket_path((None,), 1) == "/wh/t/data/p=N/bucket-1"


def test_metadata_names_share_one_uuid_and_count_per_kind() -> None:
    paths = TablePaths("/wh/t")
    names = [paths.new_manifest_name(), paths.new_manifest_name(), paths.new_manifest_list_name()]
    names += [paths.new_index_manifest_name(), paths.new_index_file_name()]
    u = paths.uuid
    assert names == [
        f"manifest-{u}-0",
        f"manifest-{u}-1",
        f"manifest-list-{u}-0",
        f"index-manifest-{u}-0",
        f"index-{u}-0",
    ]
    assert re.fullmatch(UUID_RE, u)
    assert TablePaths("/wh/t").uuid != u


def test_data_file_names() -> None:
    factory = DataFilePathFactory("/wh/t/bucket-0", "parquet")
    first, second, log = (
        factory.new_data_file_name(),
        factory.new_data_file_name(),
        factory.new_changelog_file_name(),
    )
    assert re.fullmatch(rf"data-{UUID_RE}-0\.parquet", first)
    assert second == first.replace("-0.parquet", "-1.parquet")
    assert log == f"changelog-{factory.uuid}-2.parquet"  # one counter per factory, as Java
    assert factory.new_path(first) == (f"/wh/t/bucket-0/{first}", None)
    zst = DataFilePathFactory("/b", "orc", compression="zstd", suffix_include_compression=True, uid="u")
    assert zst.new_data_file_name() == "data-u-0.zst.orc"
    csv = DataFilePathFactory("/b", "csv", compression="gzip", uid="u")
    assert csv.new_data_file_name() == "data-u-0.csv.gz"
    ext = DataFilePathFactory("/b", "orc", external_dir="s3://e/p=1/bucket-0", uid="u")
    assert ext.new_path("data-u-0.orc") == ("s3://e/p=1/bucket-0/data-u-0.orc",) * 2


def test_data_file_factory_from_options() -> None:
    options = CoreOptions({"file.format": "orc", "data-file.prefix": "part-"})
    paths = TablePaths("/wh/t", [DataField(0, "p", INT())])
    factory = paths.data_file_factory((5,), 2, options, external_root="s3://ext/root")
    assert factory.bucket_dir == "/wh/t/p=5/bucket-2"
    assert factory.external_dir == "s3://ext/root/p=5/bucket-2"
    assert re.fullmatch(rf"part-{UUID_RE}-0\.orc", factory.new_data_file_name())
