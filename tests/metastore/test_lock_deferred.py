"""Deferred releases: a release that failed with the metastore unreachable is retried by the holder, owner-
and token-checked, until it succeeds, the row is gone or someone else's, or the lease ends.

The metastore is made unreachable for the holder alone by pointing its lock's session pool at a closed
port (the rows stay readable through the engine); tests/metastore/test_lock_restart.py restarts a real
server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from paimon_meta.db.pool import SessionPool
from paimon_meta.metastore import lock_metrics
from paimon_meta.metastore.deferred import DeferredRelease, ReleaseOutcome
from paimon_meta.metastore.events import EventLog, LockEventType
from paimon_meta.metastore.lock import MetastoreLock

pytestmark = pytest.mark.postgres

_NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.fixture
def lock(clean_engine: Engine) -> Iterator[MetastoreLock]:
    with MetastoreLock(clean_engine, poll_interval_seconds=0.2) as metastore_lock:
        yield metastore_lock


def _lid() -> str:
    return f"jdbc.deferred.{uuid.uuid4().hex}"


def _cut_off(lock: MetastoreLock) -> SessionPool:
    """Make the metastore unreachable for ``lock``'s hot statements; returns the real pool."""
    real = lock._sessions
    lock._sessions = SessionPool(_NOWHERE, connect_timeout=1)
    return real


def _reports(lock: MetastoreLock) -> list[DeferredRelease]:
    reports: list[DeferredRelease] = []
    lock.observe_deferred(reports.append)
    return reports


def test_a_failed_release_is_retried_once_the_metastore_answers(
    lock: MetastoreLock, clean_engine: Engine
) -> None:
    registry = CollectorRegistry()
    lock_metrics.register(lock, registry)
    reports = _reports(lock)
    lid = _lid()
    lease = lock.acquire(lid, owner="a", lease_seconds=30)
    real = _cut_off(lock)
    with pytest.raises(psycopg.OperationalError):
        lease.release()
    assert lease.released
    assert lock.get_lock(lid) is not None  # still ours: nobody else could delete it yet
    assert lock.deferred_pending == 1
    assert registry.get_sample_value("paimon_meta_lock_deferred_releases_pending") == 1
    lock._sessions = real  # the metastore answers again
    assert lock.wait_deferred(20)
    assert lock.get_lock(lid) is None
    assert not lease.lost
    events = EventLog(clean_engine).lock_events(lid)
    assert [e.event.event_type for e in events] == [LockEventType.ACQUIRED, LockEventType.RELEASED]
    released = events[1].event
    assert released.owner == "a" and released.fencing_token == lease.fencing_token
    assert released.payload["after_reconnect"] is True
    assert released.payload["attempts"] >= 1
    assert [(r.outcome, r.settlement) for r in reports] == [(ReleaseOutcome.RELEASED, None)]
    assert registry.get_sample_value("paimon_meta_lock_released_after_reconnect_total") == 1
    assert registry.get_sample_value("paimon_meta_lock_deferred_releases_total", {"outcome": "released"}) == 1
    assert registry.get_sample_value("paimon_meta_lock_deferred_releases_pending") == 0


def test_a_deferred_release_leaves_a_row_someone_else_took_alone(
    lock: MetastoreLock, clean_engine: Engine
) -> None:
    reports = _reports(lock)
    lid = _lid()
    lease = lock.acquire(lid, owner="a", lease_seconds=30)
    real = _cut_off(lock)
    with pytest.raises(psycopg.OperationalError):
        lease.release()
    # An operator releases it meanwhile and another writer takes the lock.
    with MetastoreLock(clean_engine) as other:
        assert other.force_release(lid, operator="op", reason="test") is not None
        taken = other.acquire(lid, owner="b", lease_seconds=30)
        lock._sessions = real
        assert lock.wait_deferred(20)
        row = lock.get_lock(lid)
        assert row is not None and (row.owner, row.fencing_token) == ("b", taken.fencing_token)
        assert taken.release()
    assert [r.outcome for r in reports] == [ReleaseOutcome.GONE]
    assert lease.lost
    kinds = [e.event.event_type for e in EventLog(clean_engine).lock_events(lid)]
    assert kinds == [
        LockEventType.ACQUIRED,
        LockEventType.FORCE_RELEASED,
        LockEventType.ACQUIRED,
        LockEventType.RELEASED,  # b's own
    ]


def test_a_deferred_release_ends_with_the_lease_and_the_row_is_taken_over_as_before(
    lock: MetastoreLock, clean_engine: Engine
) -> None:
    reports = _reports(lock)
    lid = _lid()
    lease = lock.acquire(lid, owner="a", lease_seconds=1)
    _cut_off(lock)  # never answers again for this holder
    with pytest.raises(psycopg.OperationalError):
        lease.release()
    assert lock.wait_deferred(20)
    assert [r.outcome for r in reports] == [ReleaseOutcome.EXPIRED]
    assert reports[0].attempts >= 1
    with MetastoreLock(clean_engine) as other, other.acquire(lid, owner="b", timeout_seconds=10) as taken:
        assert taken.fencing_token > lease.fencing_token
    kinds = [e.event.event_type for e in EventLog(clean_engine).lock_events(lid)]
    assert kinds[:3] == [LockEventType.ACQUIRED, LockEventType.EXPIRY_TAKEOVER, LockEventType.ACQUIRED]


def test_closing_the_lock_ends_pending_releases(clean_engine: Engine) -> None:
    lock = MetastoreLock(clean_engine)
    lock.CLOSE_DRAIN_SECONDS = 0.1
    reports = _reports(lock)
    lid = _lid()
    lease = lock.acquire(lid, owner="a", lease_seconds=30)
    _cut_off(lock)
    with pytest.raises(psycopg.OperationalError):
        lease.release()
    lock.close()
    assert lock.wait_deferred(10)
    assert [r.outcome for r in reports] == [ReleaseOutcome.CLOSED]
    assert lock.get_lock(lid) is not None  # it expires after its lease


def _answer_lost(monkeypatch: pytest.MonkeyPatch, *, committed: bool) -> None:
    """The next acquiring batch loses its answer: with ``committed`` it ran (the row and its events are
    in), else it never reached the server; either way the caller sees a connection failure."""
    import paimon_meta.metastore.lock as lock_module

    real = lock_module.run_batch  # type: ignore[attr-defined]
    armed = [True]

    def run_batch(conn: object, statements: list[object], *args: object, **kwargs: object) -> object:
        acquiring = any(getattr(s, "statement", None) is lock_module._ACQUIRE_PREPARED for s in statements)
        if acquiring and armed[0]:
            armed[0] = False
            if committed:
                real(conn, statements, *args, **kwargs)  # type: ignore[arg-type]
            raise psycopg.OperationalError("server closed the connection unexpectedly (injected)")
        return real(conn, statements, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lock_module, "run_batch", run_batch)


def test_an_acquire_whose_answer_was_lost_does_not_block_the_table_for_its_lease(
    lock: MetastoreLock, clean_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acquiring transaction committed but its answer never came (a metastore restart): the row is
    ours, no lease knows its token, and every writer, the same owner's retry included, would wait the
    whole lease. It is released in the background instead, by the token its attempt's event recorded."""
    reports = _reports(lock)
    lid = _lid()
    _answer_lost(monkeypatch, committed=True)
    with pytest.raises(psycopg.OperationalError):
        lock.acquire(lid, owner="a", lease_seconds=30)
    assert lock.wait_deferred(20)
    assert lock.get_lock(lid) is None
    # the same owner's retry gets the lock at once, far within the 30 s lease the orphan would have had
    again = lock.acquire(lid, owner="a", lease_seconds=30, timeout_seconds=5)
    events = [e.event for e in EventLog(clean_engine).lock_events(lid)]
    assert [e.event_type for e in events] == [
        LockEventType.ACQUIRED,
        LockEventType.RELEASED,
        LockEventType.ACQUIRED,
    ]
    orphan, released = events[0], events[1]
    assert released.owner == "a" and released.fencing_token == orphan.fencing_token
    assert released.payload["in_doubt_acquire"] == orphan.payload["attempt"]
    assert again.fencing_token > (orphan.fencing_token or 0)
    assert [r.outcome for r in reports] == [ReleaseOutcome.RELEASED]
    again.release()


def test_an_acquire_that_never_committed_releases_nothing(
    lock: MetastoreLock, clean_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lost before it ran: the background release finds no row of that attempt and deletes nothing,
    not even the same owner's next, live, lease."""
    reports = _reports(lock)
    lid = _lid()
    _answer_lost(monkeypatch, committed=False)
    with pytest.raises(psycopg.OperationalError):
        lock.acquire(lid, owner="a", lease_seconds=30)
    live = lock.acquire(lid, owner="a", lease_seconds=30, timeout_seconds=5)
    assert lock.wait_deferred(20)
    held = lock.get_lock(lid)
    assert held is not None and held.fencing_token == live.fencing_token
    assert [r.outcome for r in reports] == [ReleaseOutcome.GONE]
    assert [e.event.event_type for e in EventLog(clean_engine).lock_events(lid)] == [LockEventType.ACQUIRED]
    assert live.release()
