"""Time travel of a batch read: ``ReadBuilder.with_tag``/``with_snapshot`` and the table options
``scan.snapshot-id``, ``scan.tag-name``, ``scan.timestamp-millis`` (Java's ``TimeTravelUtil``).

    s1 {1:a}   s2 {1:a, 2:b}   s3 {1:a, 2:b, 3:c}     tag t1 -> s1, tag t2 -> s2
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.errors import SnapshotNotFoundError, TagNotFoundError, UnsupportedError, ValidationError
from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING, DataField
from paimon_meta.table.option_policy import (
    SCAN_FALLBACK_BRANCH,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    SCAN_TIMESTAMP_MILLIS,
)
from paimon_meta.table.paths import branch_path
from paimon_meta.table.read.builder import ReadBuilder
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.tags import TagManager
from paimon_meta.table.time_travel import TravelKind, is_stored, tag_snapshot

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
S1 = [(1, "a")]
S2 = [(1, "a"), (2, "b")]
S3 = [(1, "a"), (2, "b"), (3, "c")]


def _schema(**options: str) -> TableSchema:
    fields = (DataField(0, "id", BIGINT(False)), DataField(1, "v", STRING()))
    return TableSchema(0, fields, 1, (), ("id",), {"bucket": "1", **options})


@pytest.fixture
def path(tmp_path: Path) -> str:
    path = str(tmp_path / "db.db" / "t")
    assert SchemaManager(get_file_io(path), path).commit_new_schema(_schema())
    table = open_table(path)
    for row in S3:
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.Table.from_pylist([{"id": row[0], "v": row[1]}], schema=ARROW))
        builder.new_commit().commit(write.prepare_commit())
        write.close()
        time.sleep(0.01)  # distinct commit times for scan.timestamp-millis
    tags = TagManager(table.file_io, table.path)
    tags.create("t1", table.snapshot(1))
    tags.create("t2", table.snapshot(2))
    return path


def _rows(builder: ReadBuilder) -> list[tuple[Any, ...]]:
    out = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(tuple(r.values()) for r in out.to_pylist())


def _with(path: str, **options: str) -> FileStoreTable:
    plain = FileStoreTable.open(path)
    return FileStoreTable(plain.file_io, path, plain.schema, options)


def test_with_tag_reads_the_tagged_snapshot(path: str) -> None:
    table = FileStoreTable.open(path)
    assert _rows(table.new_read_builder().with_tag("t1")) == S1
    assert _rows(table.new_read_builder().with_tag("t2")) == S2
    assert _rows(table.new_read_builder()) == S3
    plan = table.new_read_builder().with_tag("t1").new_scan().plan()
    assert plan.snapshot_id == 1
    # the last of with_snapshot / with_tag wins
    assert _rows(table.new_read_builder().with_tag("t1").with_snapshot(3)) == S3
    assert _rows(table.new_read_builder().with_snapshot(3).with_tag("t2")) == S2
    with pytest.raises(TagNotFoundError) as err:
        table.new_read_builder().with_tag("nope").new_scan()
    assert err.value.fields == {"tag": "nope"}
    with pytest.raises(ValidationError):
        table.new_read_builder().with_tag("12")  # a number means a snapshot id


def test_a_tag_whose_snapshot_file_is_gone_still_reads(path: str) -> None:
    """The tag file is a whole snapshot: reading it needs its manifests and data files (which
    expiration keeps, tests/ops/test_tag_expiration.py), not the snapshot file."""
    table = FileStoreTable.open(path)
    tagged = tag_snapshot(table, "t1")
    assert is_stored(table, tagged)
    table.file_io.delete(table.snapshot_manager.snapshot_path(1))
    table = FileStoreTable.open(path)
    assert not is_stored(table, tagged)
    assert _rows(table.new_read_builder().with_tag("t1")) == S1
    assert _rows(_with(path, **{SCAN_TAG_NAME: "t1"}).new_read_builder()) == S1
    with pytest.raises(ValidationError):
        table.new_read_builder().with_snapshot(1).new_scan()


def test_scan_options_select_the_snapshot(path: str) -> None:
    assert _rows(_with(path, **{SCAN_SNAPSHOT_ID: "2"}).new_read_builder()) == S2
    assert _rows(_with(path, **{SCAN_SNAPSHOT_ID: " 1 ", "scan.mode": "default"}).new_read_builder()) == S1
    assert _rows(_with(path, **{SCAN_TAG_NAME: "t2"}).new_read_builder()) == S2
    builder = _with(path, **{SCAN_TAG_NAME: "t1"}).new_read_builder()
    travel = builder.time_travel()
    assert travel is not None and (travel.kind, travel.snapshot.id) == (TravelKind.TAG, 1)
    # an explicit snapshot or tag wins over the options
    assert _rows(_with(path, **{SCAN_TAG_NAME: "t1"}).new_read_builder().with_snapshot(3)) == S3
    assert _rows(_with(path, **{SCAN_SNAPSHOT_ID: "3"}).new_read_builder().with_tag("t1")) == S1
    assert FileStoreTable.open(path).new_read_builder().time_travel() is None


def test_scan_timestamp_millis_reads_the_latest_snapshot_at_or_before(path: str) -> None:
    table = FileStoreTable.open(path)
    times = [table.snapshot(i).time_millis for i in (1, 2, 3)]
    assert times == sorted(set(times))
    for ts, expected in ((times[0], S1), (times[1] - 1, S1), (times[1], S2), (times[2] + 10**6, S3)):
        assert _rows(_with(path, **{SCAN_TIMESTAMP_MILLIS: str(ts)}).new_read_builder()) == expected, ts
    with pytest.raises(SnapshotNotFoundError) as err:
        _with(path, **{SCAN_TIMESTAMP_MILLIS: str(times[0] - 1)}).new_read_builder().new_scan()
    assert err.value.fields["option"] == SCAN_TIMESTAMP_MILLIS


def test_scan_options_from_the_schema_file(path: str) -> None:
    evolved = dataclasses.replace(_schema(**{SCAN_TAG_NAME: "t1"}), id=1)
    assert SchemaManager(get_file_io(path), path).commit_new_schema(evolved)
    assert _rows(FileStoreTable.open(path).new_read_builder()) == S1


def test_bad_time_travel_options_are_refused(path: str) -> None:
    def scan(**options: str) -> None:
        _with(path, **options).new_read_builder().new_scan()

    with pytest.raises(ValidationError, match="only one of"):
        scan(**{SCAN_SNAPSHOT_ID: "1", SCAN_TAG_NAME: "t1"})
    with pytest.raises(ValidationError, match=r"scan\.mode='latest-full'"):
        scan(**{SCAN_SNAPSHOT_ID: "1", "scan.mode": "latest-full"})
    with pytest.raises(UnsupportedError) as refused:
        scan(**{SCAN_SNAPSHOT_ID: "1", "scan.mode": "from-snapshot"})
    assert refused.value.fields["option"] == "scan.mode"
    with pytest.raises(UnsupportedError) as refused:
        scan(**{"scan.watermark": "5"})
    assert refused.value.fields["option"] == "scan.watermark"
    with pytest.raises(ValidationError, match="must be an integer"):
        scan(**{SCAN_SNAPSHOT_ID: "two"})
    with pytest.raises(SnapshotNotFoundError) as missing:
        scan(**{SCAN_SNAPSHOT_ID: "9"})
    assert missing.value.fields == {"option": SCAN_SNAPSHOT_ID, "snapshot_id": 9}
    with pytest.raises(TagNotFoundError):
        scan(**{SCAN_TAG_NAME: "nope"})


def test_time_travel_with_a_fallback_branch(path: str) -> None:
    from tests.table.test_branches import create_branch

    create_branch(path, "b1", 1)
    assert _rows(_with(path, **{SCAN_FALLBACK_BRANCH: "b1", SCAN_SNAPSHOT_ID: "2"}).new_read_builder()) == S2
    for options in ({SCAN_TAG_NAME: "t1"}, {SCAN_TIMESTAMP_MILLIS: str(10**15)}):
        with pytest.raises(UnsupportedError) as err:
            _with(path, **{SCAN_FALLBACK_BRANCH: "b1", **options}).new_read_builder().new_scan()
        assert err.value.fields["option"] == SCAN_FALLBACK_BRANCH


def test_a_branch_reads_its_own_tags(path: str) -> None:
    """Java's ``TagManager`` of a branch is rooted at ``branch/branch-<name>/``."""
    from tests.table.test_branches import create_branch

    create_branch(path, "b1", 2)
    main = FileStoreTable.open(path)
    branch = main.branch("b1")
    TagManager(branch.file_io, branch_path(path, "b1")).create("bt", branch.snapshot(2))
    assert _rows(branch.new_read_builder().with_tag("bt")) == S2
    assert _rows(branch.new_read_builder()) == S2
    with pytest.raises(TagNotFoundError):
        branch.new_read_builder().with_tag("t1").new_scan()  # main's tags are not the branch's
    with pytest.raises(TagNotFoundError):
        main.new_read_builder().with_tag("bt").new_scan()
