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
