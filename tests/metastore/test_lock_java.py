"""Interlock with Java Paimon's JdbcCatalogLock, using its exact SQL (PostgresqlDistributedLockDialect)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from paimon_meta.errors import LockLostError
from paimon_meta.metastore.events import EventLog, LockEventType
from paimon_meta.metastore.lock import LockLease, MetastoreLock

pytestmark = pytest.mark.postgres

# Verbatim from PostgresqlDistributedLockDialect (parameters bound the same way).
JAVA_ACQUIRE = "INSERT INTO paimon_distributed_locks (lock_id,expire_time_seconds) VALUES (:lock_id, :expire)"
JAVA_RELEASE = "DELETE FROM paimon_distributed_locks WHERE lock_id = :lock_id"
JAVA_RELEASE_TIMED_OUT = (
    "DELETE FROM paimon_distributed_locks WHERE EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) >"
    "expire_time_seconds and lock_id = :lock_id"
)


def _java_acquire(engine: Engine, lock_id: str, expire_seconds: int = 480) -> bool:
    """JdbcUtils.acquire: clear an expired row, then insert; any SQL error means not acquired."""
    with engine.begin() as conn:
        conn.execute(text(JAVA_RELEASE_TIMED_OUT), {"lock_id": lock_id})
    try:
        with engine.begin() as conn:
            conn.execute(text(JAVA_ACQUIRE), {"lock_id": lock_id, "expire": expire_seconds})
    except IntegrityError:
        return False
    return True


def _java_release(engine: Engine, lock_id: str) -> None:
    with engine.begin() as conn:
        conn.execute(text(JAVA_RELEASE), {"lock_id": lock_id})


@pytest.fixture
def lock(pg_engine: Engine) -> Iterator[MetastoreLock]:
    with MetastoreLock(pg_engine, poll_interval_seconds=0.1) as metastore_lock:
        yield metastore_lock


def _lid() -> str:
    return f"jdbc.java.{uuid.uuid4().hex}"


def test_a_java_row_blocks_us_until_java_releases(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    assert _java_acquire(pg_engine, lid)
    assert lock.try_acquire(lid, owner="py") is None
    info = lock.get_lock(lid)
    assert info is not None and info.java and info.owner is None and info.fencing_token is None
    assert info.expire_time_seconds == 480 and not info.stale
    got: list[LockLease] = []
    waiter = threading.Thread(target=lambda: got.append(lock.acquire(lid, owner="py", timeout_seconds=20)))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()
    _java_release(pg_engine, lid)  # Java never notifies: the waiter's bounded polling notices
    waiter.join(20)
    assert len(got) == 1
    got[0].release()


def test_an_expired_java_row_is_taken_over(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    assert _java_acquire(pg_engine, lid, expire_seconds=1)
    with lock.acquire(lid, owner="py", lease_seconds=5, timeout_seconds=10) as lease:
        assert lease.fencing_token > 0
    takeover = [
        e.event
        for e in EventLog(pg_engine).lock_events(lid)
        if e.event.event_type is LockEventType.EXPIRY_TAKEOVER
    ]
    assert len(takeover) == 1 and takeover[0].previous_owner is None and takeover[0].payload["java"] is True


def test_our_lock_makes_java_fail(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    with lock.acquire(lid, owner="py", lease_seconds=1):
        time.sleep(1.5)  # past one lease: only the heartbeat keeps Java's expiry check false
        with pytest.raises(IntegrityError) as info, pg_engine.begin() as conn:
            conn.execute(text(JAVA_ACQUIRE), {"lock_id": lid, "expire": 480})
        assert getattr(info.value.orig, "sqlstate", None) == "23505"
        assert not _java_acquire(pg_engine, lid)


def test_java_takes_over_from_a_frozen_holder_and_we_notice(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    lease = lock.acquire(lid, owner="py", lease_seconds=1, heartbeat=False)
    time.sleep(1.3)
    assert _java_acquire(pg_engine, lid)  # Java's own arithmetic treats our expired row as expired
    with pytest.raises(LockLostError), pg_engine.begin() as conn:
        lease.validate_in_txn(conn)
    assert lease.release() is False
    info = lock.get_lock(lid)
    assert info is not None and info.java  # Java's row survived our release
    _java_release(pg_engine, lid)


def test_list_locks_flags_stale_java_rows(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    with pg_engine.begin() as conn:  # a Java writer that crashed an hour ago
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds, acquired_at)"
                " VALUES (:l, 480, LOCALTIMESTAMP - interval '1 hour')"
            ),
            {"l": lid},
        )
    info = {i.lock_id: i for i in lock.list_locks()}[lid]
    assert info.java and info.stale and info.lease_left_seconds < 0
    removed = lock.force_release(lid, operator="ops", reason="crashed Java writer")
    assert removed is not None and removed.java
