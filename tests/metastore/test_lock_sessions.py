"""The lock's plain connections: the caller's statements in the lock's round trips, one heartbeat thread
for every lease (the session pool itself: tests/db/test_pool.py)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text

from paimon_meta.errors import LockTimeoutError
from paimon_meta.metastore.lock import LockLease, MetastoreLock

pytestmark = pytest.mark.postgres


@pytest.fixture
def lock(clean_engine: Engine) -> Iterator[MetastoreLock]:
    with MetastoreLock(clean_engine, poll_interval_seconds=0.1) as metastore_lock:
        yield metastore_lock


def _lid() -> str:
    return f"jdbc.sessions.{uuid.uuid4().hex}"


def _scratch(engine: Engine) -> str:
    name = f"scratch_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f"CREATE TABLE {name} (n int)"))
    return name


def test_first_statements_commit_once_even_when_the_lock_was_busy(
    lock: MetastoreLock, clean_engine: Engine
) -> None:
    table = _scratch(clean_engine)
    lid = _lid()
    holder = lock.acquire(lid, owner="holder", lease_seconds=10)
    got: list[Any] = []

    def waiter() -> None:
        with lock.connection() as conn:
            got.append(
                lock.acquire_on(
                    conn,
                    lid,
                    owner="waiter",
                    timeout_seconds=30,
                    first=[(f"INSERT INTO {table} VALUES (1)", {})],  # noqa: S608
                    after=[(f"SELECT count(*) AS n FROM {table}", {})],  # noqa: S608
                )
            )

    thread = threading.Thread(target=waiter)
    thread.start()
    # the first attempt found the lock busy, committed the caller's statement, and is now waiting
    deadline = time.monotonic() + 30
    while _count(clean_engine, table) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    holder.release()
    thread.join(30)
    ((lease, after),) = got
    assert after == [[{"n": 1}]]  # read after the acquiring transaction, in its round trip
    assert _count(clean_engine, table) == 1  # not repeated by the attempt that got the lock
    lease.release()


def test_first_statements_are_committed_when_acquiring_times_out(
    lock: MetastoreLock, clean_engine: Engine
) -> None:
    table = _scratch(clean_engine)
    lid = _lid()
    holder = lock.acquire(lid, owner="holder", lease_seconds=10)
    with lock.connection() as conn, pytest.raises(LockTimeoutError):
        lock.acquire_on(
            conn,
            lid,
            owner="late",
            timeout_seconds=0.3,
            first=[(f"INSERT INTO {table} VALUES (1)", {})],  # noqa: S608
        )
    assert _count(clean_engine, table) == 1
    holder.release()


def _count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())  # noqa: S608


def _heartbeat_threads() -> int:
    return [t.name for t in threading.enumerate()].count("paimon-lock-heartbeat")


def test_one_heartbeat_thread_renews_every_lease(lock: MetastoreLock, clean_engine: Engine) -> None:
    before = _heartbeat_threads()  # other locks of this process may still have theirs
    leases: list[LockLease] = [lock.acquire(_lid(), owner=f"o{i}", lease_seconds=1) for i in range(3)]
    time.sleep(1.6)  # past the lease: only renewals keep them
    for lease in leases:
        with clean_engine.begin() as conn:
            lease.validate_in_txn(conn)
    assert _heartbeat_threads() <= before + 1
    for lease in leases:
        assert lease.release()
