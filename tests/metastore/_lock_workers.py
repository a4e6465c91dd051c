"""Entry points of child processes for the cross-process lock tests (spawned, so importable)."""

from __future__ import annotations

import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

from sqlalchemy import text

from paimon_meta.db.engine import make_engine
from paimon_meta.errors import LockLostError
from paimon_meta.metastore.lock import MetastoreLock


def increment(url: str, lock_id: str, table: str, times: int, out: Queue[list[int]]) -> None:
    """Read-modify-write a counter in separate transactions, under the lock ``times`` times."""
    engine = make_engine(url, pool_size=2)
    tokens = []
    with MetastoreLock(engine) as lock:
        for _ in range(times):
            with lock.acquire(lock_id, owner="incrementer", lease_seconds=10, timeout_seconds=60) as lease:
                with engine.begin() as conn:
                    value = conn.execute(text(f"SELECT value FROM {table}")).scalar_one()  # noqa: S608
                time.sleep(0.002)  # widen the race window
                with engine.begin() as conn:
                    lease.validate_in_txn(conn)
                    conn.execute(text(f"UPDATE {table} SET value = :v"), {"v": value + 1})  # noqa: S608
                tokens.append(lease.fencing_token)
    engine.dispose()
    out.put(tokens)


def hold(url: str, lock_id: str, owner: str, lease_seconds: int, ready: Queue[int]) -> None:
    """Acquire, report the token, then idle with the heartbeat running until killed."""
    engine = make_engine(url, pool_size=2)
    lease = MetastoreLock(engine).acquire(lock_id, owner=owner, lease_seconds=lease_seconds)
    ready.put(lease.fencing_token)
    time.sleep(600)


def freeze_then_publish(
    url: str, lock_id: str, lease_seconds: int, *, ready: Queue[int], resume: Event, result: Queue[str]
) -> None:
    """Hold the lock; after being stopped and continued, try to publish as the commit path would."""
    engine = make_engine(url, pool_size=2)
    lease = MetastoreLock(engine).acquire(lock_id, owner="frozen", lease_seconds=lease_seconds)
    ready.put(lease.fencing_token)
    resume.wait(60)
    try:
        with engine.begin() as conn:
            lease.validate_in_txn(conn)
            result.put("published")
    except LockLostError:
        result.put("lost")
    result.put(f"released={lease.release()}")
    engine.dispose()
