"""End to end through the pypaimon-shaped public API: write, commit, read back."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.errors import ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import INT, STRING, DataField
from paimon_meta.serde.json import schema_to_json
from paimon_meta.table.table import FileStoreTable


def create(tmp_path: Path, *, pk: bool) -> str:
    path = str(tmp_path / "db.db" / "t")
    schema = TableSchema(
        0,
        (DataField(0, "id", INT(False)), DataField(1, "p", STRING(False)), DataField(2, "v", STRING())),
        2,
        partition_keys=("p",),
        primary_keys=("id", "p") if pk else (),
        options={"bucket": "2"},
    )
    Path(path, "schema").mkdir(parents=True)
    Path(path, "schema", "schema-0").write_text(schema_to_json(schema))
    return path


def read_all(path: str) -> list[dict[str, object]]:
    rb = open_table(path).new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: (r["p"], r["id"]))


def test_batch_write_commit_read(tmp_path: Path) -> None:
    path = create(tmp_path, pk=True)
    table = open_table(path)
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(
        pa.table({"id": pa.array([1, 2, 3], pa.int32()), "p": ["a", "a", "b"], "v": ["x", "y", "z"]})
    )
    result = commit.commit(write.prepare_commit())
    write.close()
    assert result.snapshot_ids == (1,)
    wb = open_table(path).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(
        pa.table(
            {
                "id": pa.array([1, 3], pa.int32()),
                "p": ["a", "b"],
                "v": ["x2", None],
                "_row_kind": ["+U", "-D"],
            }
        )
    )
    commit.commit(write.prepare_commit())
    assert read_all(path) == [{"id": 1, "p": "a", "v": "x2"}, {"id": 2, "p": "a", "v": "y"}]
    with pytest.raises(ValidationError, match="only be committed once"):
        commit.commit([])


def test_overwrite_through_builder(tmp_path: Path) -> None:
    path = create(tmp_path, pk=False)
    for p in ("a", "b"):
        wb = open_table(path).new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.table({"id": pa.array([1, 2], pa.int32()), "p": [p, p], "v": ["old", "old"]}))
        wb.new_commit().commit(w.prepare_commit())
    wb = open_table(path).new_batch_write_builder().overwrite({"p": "a"})
    w = wb.new_write()
    w.write_arrow(pa.table({"id": pa.array([9], pa.int32()), "p": ["a"], "v": ["new"]}))
    wb.new_commit().commit(w.prepare_commit())
    assert read_all(path) == [
        {"id": 9, "p": "a", "v": "new"},
        {"id": 1, "p": "b", "v": "old"},
        {"id": 2, "p": "b", "v": "old"},
    ]


def test_stream_commits_are_exactly_once_per_identifier(tmp_path: Path) -> None:
    path = create(tmp_path, pk=False)
    for attempt in range(2):  # the second round replays identifiers 0..2 after a "restart"
        sb = open_table(path).new_stream_write_builder().with_commit_user("job-1")
        commit = sb.new_commit()
        for batch_id in range(3):
            w = sb.new_write()
            w.write_arrow(pa.table({"id": pa.array([batch_id], pa.int32()), "p": ["a"], "v": [str(attempt)]}))
            msgs = w.prepare_commit()
            result = commit.commit(msgs, batch_id)
            if attempt == 1:
                assert result.deduplicated
                commit.abort(msgs)  # the replayed files were never committed: drop them
    assert [r["id"] for r in read_all(path)] == [0, 1, 2]
    assert all(r["v"] == "0" for r in read_all(path))
    assert open_table(path).new_stream_write_builder().with_commit_user(
        "job-1"
    ).new_commit().filter_committed([1, 2, 3]) == [3]


def test_read_only_table_refuses_commit(tmp_path: Path) -> None:
    path = create(tmp_path, pk=False)
    with pytest.raises(ValidationError, match="read-only"):
        FileStoreTable.open(path).new_batch_write_builder().new_commit()


def test_abort_never_deletes_a_file_a_compaction_only_moved_up_a_level(tmp_path: Path) -> None:
    from dataclasses import replace

    from paimon_meta.model.commit_message import CommitMessage, CompactIncrement

    path = create(tmp_path, pk=True)
    wb = open_table(path).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"id": pa.array([1], pa.int32()), "p": ["a"], "v": ["x"]}))
    msgs = w.prepare_commit()
    wb.new_commit().commit(msgs)
    live = msgs[0].data_increment.new_files[0]
    upgrade = CommitMessage(
        msgs[0].partition,
        msgs[0].bucket,
        msgs[0].total_buckets,
        compact_increment=CompactIncrement(compact_before=(live,), compact_after=(replace(live, level=5),)),
    )
    open_table(path).new_stream_write_builder().new_commit().abort([upgrade])
    assert read_all(path) == [{"id": 1, "p": "a", "v": "x"}]
