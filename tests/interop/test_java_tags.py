"""Tags with Java 0.9 and 1.0, both ways, in one JVM per version.

Ours: a primary-key table we write (four commits), tag ``t2`` -> snapshot 2 and ``t4`` -> the latest with
our ``create_tag``, then expire every snapshot but the latest, so ``t2`` outlives its snapshot file.
Java lists our tags (``TagManager.tags()`` parses every tag file) and time-travels to both
(``scan.tag-name``); the rows must be ours. Theirs: Java writes three commits and tags snapshot 1 as
``j1`` (``Table.createTag``); our ``with_tag`` and ``scan.tag-name`` read what Java's tag read returns.
Time travel by ``scan.snapshot-id`` and ``scan.timestamp-millis`` on a second table of ours (nothing
expired) reads what Java reads, except before the first snapshot, where Java 0.9/1.0 read the earliest
snapshot and we refuse, as Java 1.1 on does (checked in its source).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import SnapshotNotFoundError
from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING, DataField
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.tags import create_tag
from paimon_meta.table.option_policy import SCAN_SNAPSHOT_ID, SCAN_TAG_NAME, SCAN_TIMESTAMP_MILLIS
from paimon_meta.table.read.builder import ReadBuilder
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.time_travel import tag_manager, tag_snapshot
from tests.interop.canonical import assert_same_rows, canonical_arrow, canonical_java
from tests.interop.java_env import VERSIONS, JavaHarness

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
Row = dict[str, Any]


def _rows(*values: tuple[int, str]) -> list[Row]:
    return [{"id": i, "v": v} for i, v in values]


COMMITS = [
    _rows((1, "a"), (2, "b")),
    _rows((2, "B"), (3, "c")),
    _rows((1, "X")),
    _rows((4, "d")),
]
AT_1 = COMMITS[0]
AT_2 = _rows((1, "a"), (2, "B"), (3, "c"))
AT_3 = _rows((1, "X"), (2, "B"), (3, "c"))
AT_4 = _rows((1, "X"), (2, "B"), (3, "c"), (4, "d"))


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"))
    try:
        yield cat
    finally:
        cat.close()


def _read(builder: ReadBuilder) -> list[dict[str, Any]]:
    return canonical_arrow(builder.new_read().to_arrow(builder.new_scan().plan().splits()))


def _option(table: FileStoreTable, key: str, value: str) -> FileStoreTable:
    return FileStoreTable(table.file_io, table.path, table.schema, {key: value})


def _write(catalog: MetastoreCatalog, identifier: str, commits: list[list[Row]]) -> FileStoreTable:
    table = catalog.create_table(identifier, ARROW, primary_keys=["id"], options={"bucket": "2"})
    for rows in commits:
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.Table.from_pylist(rows, schema=ARROW))
        builder.new_commit().commit(write.prepare_commit())
        write.close()
        time.sleep(0.005)  # distinct commit times for scan.timestamp-millis
    return catalog.get_table(identifier)


def _ours(catalog: MetastoreCatalog) -> str:
    """Our table, tagged and expired past ``t2``; returns its path."""
    _write(catalog, "db.t", COMMITS)
    create_tag(catalog, "db.t", "t2", 2)
    create_tag(catalog, "db.t", "t4", time_retained_ms=7 * 86_400_000)  # Java parses its retention
    assert expire_snapshots(catalog, "db.t", retain_min=1, time_retained_ms=0).expired == [1, 2, 3]
    table = catalog.get_table("db.t")
    assert table.snapshot_manager.list_snapshot_ids() == [4]
    assert_same_rows(AT_2, _read(table.new_read_builder().with_tag("t2")), "our t2")
    return table.path


@pytest.mark.parametrize("version", VERSIONS)
def test_tags_with_java(
    tmp_path: Path, catalog: MetastoreCatalog, java_harnesses: dict[str, JavaHarness], version: str
) -> None:
    ours = _ours(catalog)
    timed = _write(catalog, "db.u", COMMITS[:3])
    times = [timed.snapshot(i).time_millis for i in (1, 2, 3)]
    assert times == sorted(set(times))
    travels = [
        (SCAN_SNAPSHOT_ID, "2"),
        (SCAN_TIMESTAMP_MILLIS, str(times[1])),
        (SCAN_TIMESTAMP_MILLIS, str(times[1] - 1)),
        (SCAN_TIMESTAMP_MILLIS, str(times[0] - 1)),
    ]
    theirs = str(tmp_path / "java.db" / "t")
    fields = (DataField(0, "id", BIGINT(False)), DataField(1, "v", STRING()))
    assert SchemaManager(get_file_io(theirs), theirs).commit_new_schema(
        TableSchema(0, fields, 1, (), ("id",), {"bucket": "2"})
    )
    ops: list[dict[str, Any]] = [
        {"op": "tags", "table": ours},
        {"op": "read", "table": ours, "options": {SCAN_TAG_NAME: "t2"}},
        {"op": "read", "table": ours, "options": {SCAN_TAG_NAME: "t4"}},
        *({"op": "write", "table": theirs, "rows": rows} for rows in COMMITS[:2]),
        {"op": "create_tag", "table": theirs, "tag": "j1", "snapshot": 1},
        {"op": "create_tag", "table": theirs, "tag": "j2"},
        {"op": "write", "table": theirs, "rows": COMMITS[2]},
        {"op": "read", "table": theirs, "options": {SCAN_TAG_NAME: "j1"}},
        {"op": "read", "table": theirs, "options": {SCAN_TAG_NAME: "j2"}},
        {"op": "read", "table": theirs},
        *({"op": "read", "table": timed.path, "options": {key: value}} for key, value in travels),
    ]
    script = tmp_path / "ops.jsonl"
    script.write_text("".join(json.dumps(op) + "\n" for op in ops), encoding="utf-8")
    out = java_harnesses[version].run(["script", str(script)])
    answers = [json.loads(line) for line in out.rstrip("\n").split("\n")]
    assert len(answers) == len(ops) and not [a for a in answers if "error" in a], out[-3000:]

    # Java reads our tag files, also the one whose snapshot expired
    assert answers[0]["tags"] == {"t2": {"snapshot": 2, "schema": 0}, "t4": {"snapshot": 4, "schema": 0}}
    assert_same_rows(AT_2, canonical_java(answers[1]["rows"]), f"Java {version} reading our t2")
    assert_same_rows(AT_4, canonical_java(answers[2]["rows"]), f"Java {version} reading our t4")

    # we read Java's tags as Java does
    java_j1, java_j2, java_latest = (canonical_java(a["rows"]) for a in answers[-7:-4])
    assert_same_rows(COMMITS[0], java_j1, f"Java {version} j1")
    assert_same_rows(AT_2, java_j2, f"Java {version} j2")
    assert_same_rows(AT_3, java_latest, f"Java {version} latest")
    table = FileStoreTable.open(theirs)
    assert tag_manager(table).names() == ["j1", "j2"]
    assert (tag_snapshot(table, "j1").id, tag_snapshot(table, "j2").id) == (1, 2)
    for tag, java_rows in (("j1", java_j1), ("j2", java_j2)):
        assert_same_rows(java_rows, _read(table.new_read_builder().with_tag(tag)), f"our {tag}")
        assert_same_rows(java_rows, _read(_option(table, SCAN_TAG_NAME, tag).new_read_builder()), tag)
    assert_same_rows(java_latest, _read(table.new_read_builder()), "our latest")

    # time travel by snapshot id and by timestamp as Java's
    java_travels = [canonical_java(a["rows"]) for a in answers[-4:]]
    for expected, java_rows, (key, value) in zip((AT_2, AT_2, AT_1), java_travels, travels, strict=False):
        assert_same_rows(expected, java_rows, f"Java {version} {key}={value}")
    assert_same_rows(AT_1, java_travels[3], f"Java {version} before the first snapshot: the earliest")
    for (key, value), java_rows in zip(travels[:3], java_travels[:3], strict=True):
        assert_same_rows(java_rows, _read(_option(timed, key, value).new_read_builder()), f"{key}={value}")
    with pytest.raises(SnapshotNotFoundError):  # as Java 1.1 on
        _option(timed, *travels[3]).new_read_builder().new_scan()
