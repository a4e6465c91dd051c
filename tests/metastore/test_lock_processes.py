"""The lock across real processes: exclusion, a SIGKILLed holder, a SIGSTOPped (frozen) holder."""

from __future__ import annotations

import multiprocessing
import os
import signal
import uuid

import pytest
from sqlalchemy import Engine, text

from paimon_meta.metastore.events import EventLog, LockEventType
from paimon_meta.metastore.lock import MetastoreLock
from tests.metastore import _lock_workers

pytestmark = pytest.mark.postgres

ctx = multiprocessing.get_context("spawn")


def _lid() -> str:
    return f"jdbc.proc.{uuid.uuid4().hex}"


def test_exclusion_across_processes(pg_url: str, pg_engine: Engine) -> None:
    lid = _lid()
    table = f"counter_{uuid.uuid4().hex[:12]}"
    with pg_engine.begin() as conn:
        conn.execute(text(f"CREATE TABLE {table} (value int NOT NULL)"))
        conn.execute(text(f"INSERT INTO {table} VALUES (0)"))  # noqa: S608
    out: multiprocessing.Queue[list[int]] = ctx.Queue()
    procs = [
        ctx.Process(target=_lock_workers.increment, args=(pg_url, lid, table, 10, out)) for _ in range(3)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with pg_engine.begin() as conn:
        assert conn.execute(text(f"SELECT value FROM {table}")).scalar_one() == 30  # noqa: S608
        conn.execute(text(f"DROP TABLE {table}"))
    tokens = [t for r in results for t in r]
    assert len(set(tokens)) == 30
    assert all(r == sorted(r) for r in results)


def test_a_killed_holder_is_replaced_within_its_lease(pg_url: str, pg_engine: Engine) -> None:
    lid = _lid()
    lease_seconds = 2
    ready: multiprocessing.Queue[int] = ctx.Queue()
    child = ctx.Process(target=_lock_workers.hold, args=(pg_url, lid, "doomed", lease_seconds, ready))
    child.start()
    try:
        dead_token = ready.get(timeout=60)
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(10)
        # Bounded by the lease (+ slack for the poll), not Java's 8 minutes.
        with (
            MetastoreLock(pg_engine) as lock,
            lock.acquire(lid, owner="next", lease_seconds=5, timeout_seconds=lease_seconds + 3) as lease,
        ):
            assert lease.fencing_token > dead_token
    finally:
        child.kill()
    takeover = [
        e.event
        for e in EventLog(pg_engine).lock_events(lid)
        if e.event.event_type is LockEventType.EXPIRY_TAKEOVER
    ]
    assert [(t.previous_owner, t.previous_fencing_token) for t in takeover] == [("doomed", dead_token)]


def test_a_frozen_holder_cannot_publish_after_a_takeover(pg_url: str, pg_engine: Engine) -> None:
    lid = _lid()
    ready: multiprocessing.Queue[int] = ctx.Queue()
    result: multiprocessing.Queue[str] = ctx.Queue()
    resume = ctx.Event()
    child = ctx.Process(
        target=_lock_workers.freeze_then_publish,
        args=(pg_url, lid, 1),
        kwargs={"ready": ready, "resume": resume, "result": result},
    )
    child.start()
    try:
        frozen_token = ready.get(timeout=60)
        os.kill(child.pid or 0, signal.SIGSTOP)  # heartbeat thread included
        with MetastoreLock(pg_engine) as lock:
            lease = lock.acquire(lid, owner="taker", lease_seconds=10, timeout_seconds=10)
            assert lease.fencing_token > frozen_token
            os.kill(child.pid or 0, signal.SIGCONT)
            resume.set()
            assert result.get(timeout=30) == "lost"
            assert result.get(timeout=30) == "released=False"
            info = lock.get_lock(lid)
            assert info is not None and info.owner == "taker"  # the frozen holder deleted nothing
            with pg_engine.begin() as conn:
                lease.validate_in_txn(conn)
            lease.release()
        child.join(30)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            os.kill(child.pid or 0, signal.SIGCONT)
            child.kill()
