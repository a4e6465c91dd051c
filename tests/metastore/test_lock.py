"""The metastore lock in one process: exclusion, fencing, leases, heartbeats, validation, hand-off."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from paimon_meta.db.notify import ListenerPool
from paimon_meta.errors import LockLostError, LockNotHeldError, LockTimeoutError, ValidationError
from paimon_meta.metastore.events import EventLog, LockEventType
from paimon_meta.metastore.lock import LockLease, MetastoreLock, lock_id_for

pytestmark = pytest.mark.postgres


@pytest.fixture
def lock(pg_engine: Engine) -> Iterator[MetastoreLock]:
    with MetastoreLock(pg_engine, poll_interval_seconds=0.2) as metastore_lock:
        yield metastore_lock


def _lid() -> str:
    return f"jdbc.test.{uuid.uuid4().hex}"


def _events(engine: Engine, lock_id: str) -> list[LockEventType]:
    return [e.event.event_type for e in EventLog(engine).lock_events(lock_id)]


def _validate(engine: Engine, lease: LockLease) -> None:
    with engine.begin() as conn:
        lease.validate_in_txn(conn)


def test_acquire_release_and_inspect(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    with lock.acquire(lid, owner="writer-a", lease_seconds=10) as lease:
        info = lock.get_lock(lid)
        assert info is not None
        assert (info.owner, info.fencing_token, info.lease_seconds, info.expire_time_seconds) == (
            "writer-a",
            lease.fencing_token,
            10,
            10,
        )
        assert not info.stale and not info.java and 0 < info.lease_left_seconds <= 10
        assert info.hostname == lease.hostname and info.pid == lease.pid
        assert lid in {i.lock_id for i in lock.list_locks()}
        assert lock.try_acquire(lid, owner="writer-b") is None
        _validate(pg_engine, lease)
        lease.check()
    assert lease.released and lock.get_lock(lid) is None
    assert lease.release() is False
    with pytest.raises(LockNotHeldError):
        lease.check()
    assert _events(pg_engine, lid) == [LockEventType.ACQUIRED, LockEventType.RELEASED]


def test_exclusion_and_increasing_tokens_across_threads(lock: MetastoreLock) -> None:
    lid = _lid()
    inside = 0
    overlaps = 0
    tokens: list[int] = []
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        nonlocal inside, overlaps
        try:
            for _ in range(8):
                with lock.acquire(lid, owner=name, lease_seconds=10, timeout_seconds=60) as lease:
                    inside += 1
                    if inside != 1:
                        overlaps += 1
                    tokens.append(lease.fencing_token)
                    time.sleep(0.002)
                    inside -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and overlaps == 0
    assert len(tokens) == 40
    # Appended while holding the lock, so this is acquisition order.
    assert all(a < b for a, b in itertools.pairwise(tokens)), tokens


def test_timeout_names_the_holder(lock: MetastoreLock) -> None:
    lid = _lid()
    with (
        lock.acquire(lid, owner="holder", lease_seconds=10),
        pytest.raises(LockTimeoutError, match="holder") as info,
    ):
        lock.acquire(lid, owner="waiter", timeout_seconds=0.3)
    assert info.value.fields["holder"].owner == "holder"


def test_waiter_gets_the_lock_after_release(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    holder = lock.acquire(lid, owner="holder", lease_seconds=10)
    got: list[LockLease] = []
    waiter = threading.Thread(
        target=lambda: got.append(lock.acquire(lid, owner="waiter", lease_seconds=10, timeout_seconds=20))
    )
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # blocked while held
    holder.release()
    waiter.join(20)
    assert len(got) == 1 and got[0].fencing_token > holder.fencing_token
    got[0].release()
    acquired = next(e.event for e in EventLog(pg_engine).lock_events(lid) if e.event.owner == "waiter")
    assert acquired.wait_ms is not None and acquired.wait_ms > 0


def test_heartbeat_keeps_a_short_lease_alive(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    with lock.acquire(lid, owner="slow", lease_seconds=1) as lease:
        time.sleep(2.5)
        lease.check()
        _validate(pg_engine, lease)
        info = lock.get_lock(lid)
        assert info is not None and not info.stale and info.heartbeat_at is not None
        assert lock.try_acquire(lid, owner="other") is None
        # Java's own expiry statement sees a live row.
        with pg_engine.begin() as conn:
            deleted = conn.execute(
                text(
                    "DELETE FROM paimon_distributed_locks WHERE EXTRACT(EPOCH FROM AGE(NOW(), acquired_at))"
                    " > expire_time_seconds and lock_id = :l"
                ),
                {"l": lid},
            ).rowcount
        assert deleted == 0


def test_paused_holder_loses_to_a_takeover(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    frozen = lock.acquire(lid, owner="frozen", lease_seconds=1, heartbeat=False)
    time.sleep(1.3)
    taker = lock.acquire(lid, owner="taker", lease_seconds=10, timeout_seconds=10)
    assert taker.fencing_token > frozen.fencing_token
    with pytest.raises(LockLostError):
        _validate(pg_engine, frozen)
    with pytest.raises(LockLostError):
        frozen.renew()
    assert frozen.lost
    assert frozen.release() is False  # owner+token-checked: the taker's row stays
    info = lock.get_lock(lid)
    assert info is not None and info.owner == "taker"
    _validate(pg_engine, taker)
    taker.release()
    events = EventLog(pg_engine).lock_events(lid)
    takeover = [e.event for e in events if e.event.event_type is LockEventType.EXPIRY_TAKEOVER]
    assert len(takeover) == 1
    assert (takeover[0].owner, takeover[0].previous_owner, takeover[0].previous_fencing_token) == (
        "taker",
        "frozen",
        frozen.fencing_token,
    )


def test_validation_is_authoritative(lock: MetastoreLock, pg_engine: Engine) -> None:
    # Within its local lease the holder believes it holds the lock; the database says otherwise.
    lid = _lid()
    lease = lock.acquire(lid, owner="a", lease_seconds=30)
    removed = lock.force_release(lid, operator="oncall", reason="stuck writer")
    assert removed is not None and removed.owner == "a" and removed.fencing_token == lease.fencing_token
    other = lock.acquire(lid, owner="b", lease_seconds=30)
    lease.check()  # nothing known locally yet
    with pytest.raises(LockLostError, match="taken by owner='b'"):
        _validate(pg_engine, lease)
    with pytest.raises(LockLostError):
        lease.check()
    lease.release()
    assert lock.get_lock(lid) is not None
    other.release()
    forced = [e.event for e in EventLog(pg_engine).lock_events(lid)][1]
    assert (forced.event_type, forced.operator, forced.reason, forced.previous_owner) == (
        LockEventType.FORCE_RELEASED,
        "oncall",
        "stuck writer",
        "a",
    )
    assert lock.force_release(lid, operator="oncall", reason="again") is None
    with pytest.raises(ValidationError):
        lock.force_release(lid, operator="", reason="x")


def test_a_stale_only_release_leaves_a_live_row_alone(lock: MetastoreLock, pg_engine: Engine) -> None:
    live, old = _lid(), _lid()
    with pg_engine.begin() as conn:  # a Java row past its expiry
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, acquired_at, expire_time_seconds) "
                "VALUES (:l, now() - interval '10 minutes', 60)"
            ),
            {"l": old},
        )
    with lock.acquire(live, owner="a", lease_seconds=30) as lease:
        assert lock.force_release(live, operator="ops", reason="stale?", stale_only=True) is None
        lease.check()
        assert _events(pg_engine, live) == [LockEventType.ACQUIRED]
    removed = lock.force_release(old, operator="ops", reason="expired", stale_only=True)
    assert removed is not None and removed.java and lock.get_lock(old) is None
    [event] = [e.event for e in EventLog(pg_engine).lock_events(old)]
    assert (event.event_type, event.operator, event.reason) == (
        LockEventType.FORCE_RELEASED,
        "ops",
        "expired",
    )
    assert {k: v for k, v in event.payload.items() if k != "age_seconds"} == {
        "stale": True,
        "java": True,
        "forced": False,
    }


def test_heartbeat_notices_a_lost_row(lock: MetastoreLock, pg_engine: Engine) -> None:
    lid = _lid()
    lease = lock.acquire(lid, owner="a", lease_seconds=1)
    lock.force_release(lid, operator="ops", reason="test")
    time.sleep(1.0)  # > lease/3: the heartbeat has run
    assert lease.lost
    with pytest.raises(LockLostError):
        lease.check()
    assert LockEventType.LOST in _events(pg_engine, lid)


def test_expired_lease_is_lost_even_if_nobody_took_it(lock: MetastoreLock, pg_engine: Engine) -> None:
    lease = lock.acquire(_lid(), owner="a", lease_seconds=1, heartbeat=False)
    time.sleep(1.2)
    with pytest.raises(LockLostError):
        _validate(pg_engine, lease)
    with pytest.raises(LockLostError):
        lease.renew()


def test_a_validated_row_cannot_be_taken_until_the_transaction_ends(
    lock: MetastoreLock, pg_engine: Engine
) -> None:
    lid = _lid()
    holder = lock.acquire(lid, owner="holder", lease_seconds=1, heartbeat=False)
    got: list[LockLease] = []
    with pg_engine.begin() as conn:
        holder.validate_in_txn(conn)
        time.sleep(1.3)  # the lease expires while the publishing transaction is open
        waiter = threading.Thread(
            target=lambda: got.append(lock.acquire(lid, owner="waiter", lease_seconds=5, timeout_seconds=20))
        )
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive() and got == []  # its DELETE waits for our row lock
        conn.execute(text("SELECT 1"))
    waiter.join(20)
    assert len(got) == 1
    got[0].release()


def test_polling_when_listen_is_unavailable(pg_engine: Engine) -> None:
    lid = _lid()
    with MetastoreLock(pg_engine, poll_interval_seconds=0.05) as lock:
        lock._listeners = ListenerPool("postgresql://nobody@127.0.0.1:1/none", connect_timeout=1)
        holder = lock.acquire(lid, owner="a", lease_seconds=10)
        got: list[LockLease] = []
        waiter = threading.Thread(target=lambda: got.append(lock.acquire(lid, owner="b", timeout_seconds=20)))
        waiter.start()
        time.sleep(0.3)
        holder.release()
        waiter.join(20)
        assert len(got) == 1
        got[0].release()


@pytest.mark.parametrize(
    ("lock_id", "owner", "lease"),
    [("", "o", 5), ("x" * 256, "o", 5), ("l", "", 5), ("l", "o", 0), ("l", "o", 1.5), ("l", "o", True)],
)
def test_arguments_are_validated(lock: MetastoreLock, lock_id: str, owner: str, lease: int) -> None:
    with pytest.raises(ValidationError):
        lock.acquire(lock_id, owner=owner, lease_seconds=lease, timeout_seconds=0)


def test_lock_id_matches_java() -> None:
    # JdbcCatalogLock: String.format("%s.%s.%s", catalogKey, database, table)
    assert lock_id_for("db", "t") == "jdbc.db.t"
    assert lock_id_for("db", "t", catalog_key="prod") == "prod.db.t"
