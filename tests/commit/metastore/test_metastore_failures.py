"""The metastore failing under a commit: before the snapshot exists the attempt fails definitely and
is retried; after it, the commit has succeeded whatever Postgres says."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.metastore import guard as metastore_guard
from tests.commit.helpers import append_msg, data_file
from tests.torture.pg import terminate_backends

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    with paimon_meta.connect(clean_db, str(tmp_path / "warehouse")) as cat:
        cat.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
        yield cat


def _terminate(catalog: MetastoreCatalog, pid: int) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})


def _events(catalog: MetastoreCatalog) -> list[dict[str, Any]]:
    with catalog.engine.connect() as conn:
        return [
            dict(r._mapping)
            for r in conn.execute(
                text(
                    "SELECT event_type, snapshot_id, attempt, payload FROM paimon_commit_events "
                    "ORDER BY event_id"
                )
            )
        ]


def test_a_session_killed_before_publishing_fails_the_attempt_and_the_retry_commits(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = metastore_guard.MetastoreSession.before_publish
    killed: list[int] = []

    def killed_first(self: Any) -> None:
        if not killed:  # the server ends the lock holder's session (restart, admin, network)
            killed.append(self.conn.info.backend_pid)
            _terminate(catalog, killed[0])
        original(self)

    monkeypatch.setattr(metastore_guard.MetastoreSession, "before_publish", killed_first)
    table = catalog.get_table("db.t")
    assert table.committer_factory is not None
    result: Any = table.committer_factory(table, "u").commit([append_msg(0, 0, data_file())], 1)
    assert result.snapshot_ids == (1,) and result.attempts == 2
    kinds = [(e["event_type"], e["attempt"]) for e in _events(catalog)]
    assert kinds[0] == ("prepared", 1) and ("retried", 1) in kinds and kinds[-1] == ("snapshot_published", 2)
    retried = next(e for e in _events(catalog) if e["event_type"] == "retried")
    assert "metastore failed" in retried["payload"]["reason"]
    # the dead attempt's lock row was released (on a fresh connection), not left to expire
    lock_events = [e.event.event_type.value for e in catalog.events.lock_events("jdbc.db.t")]
    assert lock_events == ["acquired", "released", "acquired", "released"]
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]


def test_a_session_killed_after_publishing_still_reports_success_and_the_holder_records_it(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = metastore_guard.MetastoreSession.published

    def killed_first(self: Any, snapshot: Any, *, attempt: int, details: dict[str, Any]) -> None:
        _terminate(catalog, self.conn.info.backend_pid)
        original(self, snapshot, attempt=attempt, details=details)

    monkeypatch.setattr(metastore_guard.MetastoreSession, "published", killed_first)
    table = catalog.get_table("db.t")
    assert table.committer_factory is not None
    result: Any = table.committer_factory(table, "u").commit([append_msg(0, 0, data_file())], 1)
    assert result.snapshot_ids == (1,) and result.attempts == 1  # durable on storage: it succeeded
    monkeypatch.undo()
    # The holder records it itself, under its lease, and only then releases the lock.
    assert catalog.lock.wait_deferred(30)
    assert [(e["event_type"], e["snapshot_id"]) for e in _events(catalog) if e["snapshot_id"]] == [
        ("snapshot_published", 1)
    ]
    assert catalog.registry.get_table_row("db", "t").latest_snapshot_id == 1
    lock_events = [e.event for e in catalog.events.lock_events("jdbc.db.t")]
    assert [e.event_type.value for e in lock_events] == ["acquired", "released"]
    assert lock_events[1].payload["after_reconnect"] is True and lock_events[1].payload["attempts"] >= 1
    # re-running the same identifier deduplicates against it
    table = catalog.get_table("db.t")
    assert table.committer_factory is not None
    again: Any = table.committer_factory(table, "u").commit([append_msg(0, 0, data_file())], 1)
    assert again.deduplicated and again.snapshot_ids == (1,)
    assert [(e["event_type"], e["snapshot_id"]) for e in _events(catalog) if e["snapshot_id"]] == [
        ("snapshot_published", 1)
    ]


def test_a_waiter_whose_session_dies_while_waiting_goes_on_waiting_and_writes_its_prepared_event_once(
    catalog: MetastoreCatalog, clean_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The prepared event commits with the first lock attempt; the wait then dies with its connection
    (a restart): the writer goes on waiting on a fresh connection, in the same attempt, and never writes
    the prepared event again."""
    caplog.set_level(logging.INFO, logger="paimon_meta.commit.metastore.guard")
    holder = catalog.lock.acquire("jdbc.db.t", owner="other", lease_seconds=30)
    outcome: list[Any] = []

    def commit() -> None:
        table = catalog.get_table("db.t")
        assert table.committer_factory is not None
        outcome.append(table.committer_factory(table, "u").commit([append_msg(0, 0, data_file())], 1))

    worker = threading.Thread(target=commit)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while not [e for e in _events(catalog) if e["event_type"] == "prepared"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert terminate_backends(clean_db, application_name="paimon_meta_commit") >= 1
        while not any("the connection died while waiting" in m for m in caplog.messages):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        holder.release()
        worker.join(60)
    assert outcome and outcome[0].snapshot_ids == (1,) and outcome[0].attempts == 1
    kinds = [e["event_type"] for e in _events(catalog)]
    assert kinds == ["prepared", "conflict_checked", "snapshot_published"]
