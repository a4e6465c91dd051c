"""The lock across a real Postgres restart (a private embedded server): a holder whose release failed
while the server was down releases its row once it is back, so nobody waits out the lease; a waiter's
LISTEN connection comes back by itself. Asserted on the event log's timeline (the server's clock), not
on the test's wall-clock."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import Engine

from paimon_meta.db.engine import libpq_conninfo, make_engine
from paimon_meta.errors import LockLostError
from paimon_meta.metastore.events import EventLog, LockEventType
from paimon_meta.metastore.lock import LockLease, MetastoreLock
from tests.torture.pg import PrivatePostgres, terminate_backends

pytestmark = pytest.mark.postgres

LEASE_SECONDS = 30
#: The goal of issue 25: across a restart nobody waits longer than the restart plus this.
AFTER_RESTART = timedelta(seconds=2)


@pytest.fixture
def engine(private_pg: PrivatePostgres) -> Iterator[Engine]:
    engine = make_engine(private_pg.url, pool_size=2)
    try:
        yield engine
    finally:
        engine.dispose()


def _lid() -> str:
    return f"jdbc.restart.{uuid.uuid4().hex}"


def _acquire_retrying(lock: MetastoreLock, lock_id: str, owner: str, got: list[LockLease]) -> None:
    """A writer that keeps asking for the lock through the outage, as the commit path's retries do."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            got.append(lock.acquire(lock_id, owner=owner, lease_seconds=LEASE_SECONDS, timeout_seconds=60))
            return
        except (psycopg.OperationalError, psycopg.InterfaceError, LockLostError):
            time.sleep(0.05)


def test_a_release_that_failed_during_the_outage_happens_right_after_it(
    private_pg: PrivatePostgres, engine: Engine
) -> None:
    lid = _lid()
    with (
        MetastoreLock(engine, poll_interval_seconds=5.0) as holder_lock,
        MetastoreLock(engine) as waiter_lock,
    ):
        lease = holder_lock.acquire(lid, owner="holder", lease_seconds=LEASE_SECONDS)
        private_pg.stop()
        try:
            with pytest.raises((psycopg.OperationalError, psycopg.InterfaceError)):
                lease.release()  # the server is down: handed to the background retrier
            got: list[LockLease] = []
            waiter = threading.Thread(target=_acquire_retrying, args=(waiter_lock, lid, "waiter", got))
            waiter.start()
        finally:
            private_pg.start()
        back = private_pg.started_at()
        assert holder_lock.wait_deferred(LEASE_SECONDS)
        waiter.join(120)
        assert len(got) == 1
        got[0].release()
    events = EventLog(engine).lock_events(lid)
    kinds = [(e.event.event_type, e.event.owner) for e in events]
    assert kinds == [
        (LockEventType.ACQUIRED, "holder"),
        (LockEventType.RELEASED, "holder"),
        (LockEventType.ACQUIRED, "waiter"),
        (LockEventType.RELEASED, "waiter"),
    ]
    acquired, released, taken = events[0], events[1], events[2]
    assert released.event.payload["after_reconnect"] is True
    # Released by its holder within the restart plus 2 s, not after the lease; the waiter got it then.
    assert released.created_at - back < AFTER_RESTART
    assert taken.created_at - back < AFTER_RESTART
    assert released.created_at - acquired.created_at < timedelta(seconds=LEASE_SECONDS)


def test_a_killed_holder_is_still_taken_over_after_its_lease(
    private_pg: PrivatePostgres, engine: Engine
) -> None:
    """A holder that is really gone has nobody retrying its release: the row expires as before, also
    across a restart (the retrier lives in the holder's process)."""
    lid = _lid()
    lease_seconds = 2
    with MetastoreLock(engine) as dead:
        lease = dead.acquire(lid, owner="dead", lease_seconds=lease_seconds, heartbeat=False)
        private_pg.restart("immediate")
        # The holder dies without releasing (no heartbeat either): nothing of it runs any more.
    with MetastoreLock(engine) as lock, lock.acquire(lid, owner="next", timeout_seconds=30) as taken:
        assert taken.fencing_token > lease.fencing_token
    events = [e.event for e in EventLog(engine).lock_events(lid)]
    assert [e.event_type for e in events][:3] == [
        LockEventType.ACQUIRED,
        LockEventType.EXPIRY_TAKEOVER,
        LockEventType.ACQUIRED,
    ]
    assert events[1].previous_owner == "dead"
    assert float(events[1].payload["age_seconds"]) > lease_seconds


def test_a_waiter_is_woken_by_notify_after_its_listen_connection_died(
    private_pg: PrivatePostgres, engine: Engine
) -> None:
    """Only the waiter's LISTEN session dies (its acquiring session lives on): it re-opens it, and the
    holder's release wakes it by NOTIFY, long before its poll interval or the lease would."""
    lid = _lid()
    with MetastoreLock(engine, poll_interval_seconds=LEASE_SECONDS) as lock:
        lease = lock.acquire(lid, owner="holder", lease_seconds=LEASE_SECONDS)
        got: list[LockLease] = []
        waiter = threading.Thread(
            target=lambda: got.append(lock.acquire(lid, owner="waiter", timeout_seconds=2 * LEASE_SECONDS))
        )
        waiter.start()
        first = _listener_pid(private_pg)
        assert terminate_backends(private_pg.url, application_name="paimon_meta_listen") == 1
        _listener_pid(private_pg, other_than=first)  # re-opened: the release's NOTIFY reaches it
        assert lease.release()
        waiter.join(2 * LEASE_SECONDS)
        assert len(got) == 1
        got[0].release()
    events = EventLog(engine).lock_events(lid)
    released = next(e for e in events if e.event.event_type is LockEventType.RELEASED)
    taken = next(e for e in events if e.event.owner == "waiter")
    assert taken.event.event_type is LockEventType.ACQUIRED
    assert taken.created_at - released.created_at < AFTER_RESTART


def _listener_pid(pg: PrivatePostgres, *, other_than: int | None = None) -> int:
    """The backend pid of the one session that LISTENs (the waiter's), once it is not ``other_than``."""
    query = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'paimon_meta_listen' "
        "AND query LIKE 'LISTEN%%' AND datname = current_database() AND pid <> %s"
    )
    deadline = time.monotonic() + 30
    with psycopg.connect(libpq_conninfo(pg.url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(query, (other_than or 0,)).fetchall()
            if len(rows) == 1:
                return int(rows[0][0])
            time.sleep(0.02)
    raise AssertionError("the waiter never LISTENed")
