"""Commits through ``paimon_meta.connect()``: the lock, the event log and the pointer with real Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.metastore import guard as metastore_guard
from paimon_meta.errors import (
    CommitConflictError,
    CommitFailedError,
    TableAlreadyExistsError,
    ValidationError,
)
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.table import FileStoreTable
from tests.commit.helpers import append_msg, compact_msg, data_file

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"))
    try:
        yield cat
    finally:
        cat.close()


def events(cat: MetastoreCatalog, table: str) -> list[dict[str, Any]]:
    with cat.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_type, commit_user, commit_identifier, commit_kind, snapshot_id, attempt "
                "FROM paimon_commit_events WHERE table_identifier = :t ORDER BY event_id"
            ),
            {"t": table},
        )
        return [dict(r._mapping) for r in rows]


def pointer(cat: MetastoreCatalog, identifier: str) -> int | None:
    db, name = identifier.split(".")
    return cat.registry.get_table_row(db, name).latest_snapshot_id


def committer(table: FileStoreTable, user: str | None = None) -> Any:
    assert table.committer_factory is not None
    return table.committer_factory(table, user or str(uuid.uuid4()))


def test_create_write_commit_read_and_audit(catalog: MetastoreCatalog) -> None:
    table = catalog.create_table(
        "db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"}
    )
    assert catalog.list_tables("db") == ["t"]
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(
        pa.table(
            {"k": pa.array([1, 2, 3], pa.int32()), "p": pa.array([0, 0, 1], pa.int32()), "v": ["a", "b", "c"]}
        )
    )
    result = wb.new_commit().commit(w.prepare_commit())
    assert result.snapshot_ids == (1,)
    got = catalog.get_table("db.t")
    rb = got.new_read_builder()
    assert sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist()) == [1, 2, 3]
    assert [e["event_type"] for e in events(catalog, "db.t")] == [
        "prepared",
        "conflict_checked",
        "snapshot_published",
    ]
    assert pointer(catalog, "db.t") == 1
    with catalog.engine.connect() as conn:
        history = conn.execute(
            text("SELECT * FROM paimon_commit_history WHERE table_identifier = 'db.t'")
        ).all()
    assert len(history) == 1 and history[0]._mapping["snapshot_id"] == 1
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("db.t", SCHEMA)
    with pytest.raises(ValidationError, match="invalid table name"):
        catalog.create_table("db.bad name", SCHEMA)


def test_same_identifier_twice_one_snapshot_and_an_aborted_event(catalog: MetastoreCatalog) -> None:
    table = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    msg = append_msg(0, 0, data_file())
    assert committer(table, "u").commit([msg], 5).snapshot_ids == (1,)
    again = committer(catalog.get_table("db.t"), "u").commit([msg], 5)
    assert again.deduplicated and again.snapshot_ids == (1,)
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]
    types = [e["event_type"] for e in events(catalog, "db.t")]
    assert types.count("snapshot_published") == 1 and types[-1] == "aborted"


def test_crash_between_publish_and_event_is_recovered_then_deduplicated(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    msg = append_msg(0, 0, data_file())

    def crash(self: Any, snapshot: Any, *, attempt: int, details: Any) -> None:
        raise ConnectionError("process died after publishing, before recording")

    with monkeypatch.context() as m:
        m.setattr(metastore_guard.MetastoreSession, "published", crash)
        committer(table, "u").commit([msg], 9)  # durable on storage: acknowledged
    assert pointer(catalog, "db.t") is None  # the log does not know yet
    # the restarted writer re-commits the same identifier: reconcile records the snapshot, dedupe hits
    again = committer(catalog.get_table("db.t"), "u").commit([msg], 9)
    assert again.deduplicated and again.snapshot_ids == (1,)
    assert pointer(catalog, "db.t") == 1
    kinds = [(e["event_type"], e["snapshot_id"]) for e in events(catalog, "db.t")]
    assert ("recovered", 1) in kinds and ("snapshot_published", 1) not in kinds
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]


def test_snapshots_written_by_another_engine_are_recorded_as_external(catalog: MetastoreCatalog) -> None:
    catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    path = catalog.get_table("db.t").path
    foreign = paimon_meta.open_table(path)  # a writer that ignores the metastore (e.g. pypaimon)
    committer(foreign, "java-job").commit([append_msg()], 1)
    committer(catalog.get_table("db.t")).commit([append_msg()], 1)
    seen = [(e["event_type"], e["commit_user"], e["snapshot_id"]) for e in events(catalog, "db.t")]
    assert ("external", "java-job", 1) in seen
    assert pointer(catalog, "db.t") == 2


def test_two_writers_deleting_the_same_file_exactly_one_conflict(catalog: MetastoreCatalog) -> None:
    table = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    f = data_file()
    committer(table).commit([append_msg(0, 0, f)])
    outcomes = []
    for name in ("a", "b"):
        try:
            committer(catalog.get_table("db.t")).commit(
                [compact_msg(0, 0, [f], [data_file(name=f"data-{name}.parquet")])]
            )
            outcomes.append("ok")
        except CommitConflictError:
            outcomes.append("conflict")
    assert sorted(outcomes) == ["conflict", "ok"]
    evs = events(catalog, "db.t")
    assert [e["event_type"] for e in evs].count("failed") == 1
    snap = catalog.get_table("db.t").latest_snapshot()
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT


def test_alter_table_adds_a_column(catalog: MetastoreCatalog) -> None:
    catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    from paimon_meta.model.types import BIGINT

    table = catalog.alter_table("db.t", add_columns=[("extra", BIGINT())])
    assert table.schema.id == 1 and table.schema.field_names[-1] == "extra"


def test_a_commit_recovery_aborted_is_never_published_by_its_woken_writer(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer stalls past the recovery grace period; recovery aborts its commit; the writer wakes up inside
    its attempt. It must not publish (invariant I5)."""
    from paimon_meta.metastore.events import Aborted, EventLog

    table = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    original = metastore_guard.MetastoreSession.before_publish

    def stalled_then_woken(self: Any) -> None:
        # what recovery did while we were frozen (it holds the same lock, so it ran before we got it back)
        with catalog.engine.begin() as conn:
            EventLog.append(conn, Aborted(ref=self.ref, reason="writer presumed dead"))
        original(self)

    monkeypatch.setattr(metastore_guard.MetastoreSession, "before_publish", stalled_then_woken)
    with pytest.raises(CommitFailedError, match="will not be published"):
        committer(table, "u").commit([append_msg()], 1)
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == []
