"""A snapshot published while the metastore connection died is settled by its holder: recorded under the
lease once the metastore answers (then the lock released), or handed to recovery at once when the lease
is gone. Exactly once throughout: one ``snapshot_published`` or one ``recovered`` per snapshot."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator, CommitResult
from paimon_meta.commit.metastore import guard as metastore_guard
from paimon_meta.commit.metastore.batch import commit_batch
from paimon_meta.commit.metastore.guard import LockHold, MetastoreGuard
from paimon_meta.metastore.deferred import DeferredRelease, ReleaseOutcome
from paimon_meta.metastore.lock import MetastoreLock
from tests.commit.helpers import append_msg, data_file
from tests.torture.pg import PrivatePostgres

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)
LOCK_ID = "jdbc.db.t"
AFTER_RESTART = timedelta(seconds=2)


def _catalog(url: str, tmp_path: Path) -> MetastoreCatalog:
    cat = paimon_meta.connect(url, str(tmp_path / "warehouse"))
    cat.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    return cat


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    with _catalog(clean_db, tmp_path) as cat:
        yield cat


@pytest.fixture
def private_catalog(private_pg: PrivatePostgres, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    url = private_pg.copy_database(f"t_{uuid.uuid4().hex[:12]}")  # an empty event log per test
    with _catalog(url, tmp_path) as cat:
        yield cat


def _commit(cat: MetastoreCatalog, identifier: int, user: str = "u") -> CommitResult:
    coordinator: CommitCoordinator = cat.message_committer("db.t", user)
    return coordinator.commit([append_msg(0, 0, data_file())], identifier)


def _recorded(cat: MetastoreCatalog) -> list[tuple[str, int]]:
    """(event type, snapshot id) of the events that record a snapshot."""
    with cat.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_type, snapshot_id FROM paimon_commit_events "
                "WHERE event_type IN ('snapshot_published', 'recovered', 'external') ORDER BY event_id"
            )
        )
        return [(r.event_type, r.snapshot_id) for r in rows]


def _lock_events(cat: MetastoreCatalog) -> list[Any]:
    return cat.events.lock_events(LOCK_ID)


def _reports(lock: MetastoreLock) -> list[DeferredRelease]:
    reports: list[DeferredRelease] = []
    lock.observe_deferred(reports.append)
    return reports


def test_a_publish_whose_recording_died_with_the_server_is_recorded_once_it_is_back(
    private_pg: PrivatePostgres,
    private_catalog: MetastoreCatalog,
    monkeypatch: pytest.MonkeyPatch,
    caplog: Any,
) -> None:
    cat = private_catalog
    reports = _reports(cat.lock)
    original = metastore_guard.MetastoreSession.published

    def server_gone(self: Any, snapshot: Any, *, attempt: int, details: dict[str, Any]) -> None:
        private_pg.stop()  # snapshot-1 is durable; the server goes away before its record commits
        original(self, snapshot, attempt=attempt, details=details)

    monkeypatch.setattr(metastore_guard.MetastoreSession, "published", server_gone)
    caplog.set_level(logging.INFO, logger="paimon_meta.commit.metastore.guard")
    try:
        result = _commit(cat, 1)
    finally:
        monkeypatch.undo()
        private_pg.start()
    back = private_pg.started_at()
    assert result.snapshot_ids == (1,)  # durable on storage: it succeeded
    assert cat.lock.wait_deferred(30)
    assert _recorded(cat) == [("snapshot_published", 1)]  # by its holder, not by a later recovery
    assert cat.registry.get_table_row("db", "t").latest_snapshot_id == 1
    events = _lock_events(cat)
    assert [e.event.event_type.value for e in events] == ["acquired", "released"]
    assert events[1].event.payload["after_reconnect"] is True
    assert events[1].created_at - back < AFTER_RESTART
    assert [(r.outcome, r.settlement) for r in reports] == [(ReleaseOutcome.RELEASED, "recorded")]
    assert any("snapshot 1 of db.t: deferred recording finished" in m for m in caplog.messages)
    assert _commit(cat, 2).snapshot_ids == (2,)
    assert _commit(cat, 1).deduplicated


def test_a_group_hold_records_its_deferred_publish_and_the_next_commit_takes_the_lock_at_once(
    private_pg: PrivatePostgres, private_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = private_catalog
    hold = LockHold(cat.lock, LOCK_ID, owner="group", settings=cat.lock_settings)
    original = metastore_guard.MetastoreSession.published
    stopped: list[bool] = []

    def server_gone_once(self: Any, snapshot: Any, *, attempt: int, details: dict[str, Any]) -> None:
        if not stopped:
            stopped.append(True)
            private_pg.stop()
        original(self, snapshot, attempt=attempt, details=details)

    def run(identifier: int) -> CommitResult:
        coordinator = cat.message_committer("db.t", "u")
        assert isinstance(coordinator.guard, MetastoreGuard)
        coordinator.guard.hold = hold
        try:
            result: CommitResult = coordinator.commit([append_msg(0, 0, data_file())], identifier)
            return result
        finally:
            coordinator.guard.hold = None

    monkeypatch.setattr(metastore_guard.MetastoreSession, "published", server_gone_once)
    try:
        try:
            first = run(1)  # its publish keeps the lock for the group: the record fails with the server
        finally:
            private_pg.start()
        back = private_pg.started_at()
        second = run(2)  # the hold dropped the lease to the retrier and acquires afresh
    finally:
        hold.release()
    assert (first.snapshot_ids, second.snapshot_ids) == ((1,), (2,))
    assert cat.lock.wait_deferred(30)
    assert _recorded(cat) == [("snapshot_published", 1), ("snapshot_published", 2)]
    events = _lock_events(cat)
    assert [e.event.event_type.value for e in events] == ["acquired", "released", "acquired", "released"]
    assert events[1].event.payload["after_reconnect"] is True
    assert events[2].created_at - back < AFTER_RESTART  # the next commit did not wait out the lease
    assert hold.acquisitions == 2


def test_a_batch_whose_record_died_with_its_session_is_recorded_by_the_holder(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = _reports(catalog.lock)
    hold = LockHold(catalog.lock, LOCK_ID, owner="group", settings=catalog.lock_settings)
    coordinator = catalog.message_committer("db.t", "seed")
    assert isinstance(coordinator.guard, MetastoreGuard)
    coordinator.guard.hold = hold
    coordinator.commit([append_msg(0, 0, data_file())], 1)  # the hold has the lock now
    coordinator.guard.hold = None
    prepared = [
        catalog.message_committer("db.t", f"u{i}").prepare([append_msg(0, 0, data_file())], 1)
        for i in range(3)
    ]
    original = LockHold.record_batch

    def session_killed(self: LockHold, published: Any, others: Any) -> None:
        conn = self._connection()
        with catalog.engine.begin() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": conn.info.backend_pid})
        original(self, published, others)

    monkeypatch.setattr(LockHold, "record_batch", session_killed)
    try:
        outcome = commit_batch(hold, prepared)
    finally:
        monkeypatch.undo()
        hold.release()
    assert outcome.rest == []
    assert sorted(r.snapshot_ids for r in outcome.results.values() if isinstance(r, CommitResult)) == [
        (2,),
        (3,),
        (4,),
    ]
    assert catalog.lock.wait_deferred(30)
    assert _recorded(catalog) == [("snapshot_published", sid) for sid in (1, 2, 3, 4)]
    assert [(r.outcome, r.settlement) for r in reports] == [(ReleaseOutcome.RELEASED, "recorded")]
    kinds = [e.event.event_type.value for e in _lock_events(catalog)]
    assert kinds == ["acquired", "released"]


def test_a_deferred_recording_whose_lease_is_gone_is_handed_to_recovery_at_once(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    reports = _reports(catalog.lock)
    original = metastore_guard.MetastoreSession.published

    def lease_gone(self: Any, snapshot: Any, *, attempt: int, details: dict[str, Any]) -> None:
        # Its session dies (ending the publishing transaction that kept the row), then an operator
        # releases the row: the holder looked dead.
        with catalog.engine.begin() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": self.conn.info.backend_pid})
        with MetastoreLock(catalog.engine) as other:
            assert other.force_release(LOCK_ID, operator="op", reason="test") is not None
        original(self, snapshot, attempt=attempt, details=details)

    monkeypatch.setattr(metastore_guard.MetastoreSession, "published", lease_gone)
    caplog.set_level(logging.INFO, logger="paimon_meta.commit.metastore.guard")
    result = _commit(catalog, 1)
    monkeypatch.undo()
    assert result.snapshot_ids == (1,)
    assert catalog.lock.wait_deferred(30)
    assert [(r.outcome, r.settlement) for r in reports] == [(ReleaseOutcome.GONE, "reconciled")]
    assert _recorded(catalog) == [("recovered", 1)]  # recorded once, by the holder's own reconcile
    assert catalog.registry.get_table_row("db", "t").latest_snapshot_id == 1
    assert any("deferred recording handed over to recovery" in m for m in caplog.messages)
    kinds = [e.event.event_type.value for e in _lock_events(catalog)]
    assert kinds == ["acquired", "force_released", "acquired", "released"]  # the reconcile's own hold
    assert _commit(catalog, 1).deduplicated


def test_a_deferred_recording_is_left_to_the_lock_holder_who_records_it(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = _reports(catalog.lock)
    original = metastore_guard.MetastoreSession.published
    other = MetastoreLock(catalog.engine)
    taken: list[Any] = []

    def taken_over(self: Any, snapshot: Any, *, attempt: int, details: dict[str, Any]) -> None:
        with catalog.engine.begin() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": self.conn.info.backend_pid})
        assert other.force_release(LOCK_ID, operator="op", reason="test") is not None
        taken.append(other.acquire(LOCK_ID, owner="other", lease_seconds=30))
        original(self, snapshot, attempt=attempt, details=details)

    monkeypatch.setattr(metastore_guard.MetastoreSession, "published", taken_over)
    try:
        assert _commit(catalog, 1).snapshot_ids == (1,)
        monkeypatch.undo()
        assert catalog.lock.wait_deferred(30)
        assert [(r.outcome, r.settlement) for r in reports] == [(ReleaseOutcome.GONE, "left_to_holder")]
        assert _recorded(catalog) == []  # not yet: the holder records it
    finally:
        for lease in taken:
            lease.release()
        other.close()
    assert _commit(catalog, 2).snapshot_ids == (2,)  # the next holder reconciles first
    assert _recorded(catalog) == [("recovered", 1), ("snapshot_published", 2)]


def test_the_coordinator_path_is_unchanged_when_the_metastore_is_fine(catalog: MetastoreCatalog) -> None:
    coordinator: CommitCoordinator = catalog.message_committer("db.t", "u")
    assert coordinator.commit([append_msg(0, 0, data_file())], 1).snapshot_ids == (1,)
    assert catalog.lock.deferred_pending == 0
    assert _recorded(catalog) == [("snapshot_published", 1)]


def test_a_writer_waiting_for_the_lock_across_a_restart_takes_it_right_after(
    private_pg: PrivatePostgres, private_catalog: MetastoreCatalog
) -> None:
    """The issue's stall, end to end: the lock is held when Postgres goes down, its holder's release
    fails meanwhile, and a writer is waiting for it. Once the server is back the holder releases and
    the writer commits: within the restart plus 2 s on the event log's clock, in one attempt (it waited
    through the outage on a fresh connection), with one prepared event."""
    cat = private_catalog
    with MetastoreLock(cat.engine) as other:
        holder = other.acquire(LOCK_ID, owner="holder", lease_seconds=30)
        outcome: list[Any] = []
        worker = threading.Thread(target=lambda: outcome.append(_commit(cat, 1)))
        worker.start()
        deadline = time.monotonic() + 30
        while "prepared" not in _commit_event_types(cat):  # the writer waits for the lock
            assert time.monotonic() < deadline
            time.sleep(0.02)
        private_pg.stop()
        try:
            with pytest.raises(psycopg.OperationalError):
                holder.release()  # fails: retried in the background
        finally:
            private_pg.start()
        back = private_pg.started_at()
        worker.join(60)
        assert other.wait_deferred(30)
    assert outcome and outcome[0].snapshot_ids == (1,) and outcome[0].attempts == 1
    assert _commit_event_types(cat) == ["prepared", "conflict_checked", "snapshot_published"]
    events = _lock_events(cat)
    kinds = [(e.event.event_type.value, e.event.owner) for e in events]
    assert kinds[:2] == [("acquired", "holder"), ("released", "holder")]
    assert events[1].event.payload["after_reconnect"] is True
    taken = events[2]
    assert taken.event.event_type.value == "acquired" and taken.event.owner != "holder"
    assert taken.created_at - back < AFTER_RESTART


def _commit_event_types(cat: MetastoreCatalog) -> list[str]:
    with cat.engine.connect() as conn:
        return [
            r.event_type
            for r in conn.execute(text("SELECT event_type FROM paimon_commit_events ORDER BY event_id"))
        ]
