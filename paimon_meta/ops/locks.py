"""Lock tooling: list the metastore's lock rows (ours and Java's) and release stuck ones.

A row is *stale* when Java's own expiry rule says so (``now - acquired_at > expire_time_seconds``; our
heartbeat refreshes ``acquired_at``), so a stale row is one any acquirer would delete anyway. Releasing a
stale row needs only a reason; releasing a live one (a holder that still heartbeats, or a Java holder
within its expiry) is refused unless forced, because that holder may be about to publish: our holders
then fail their fencing check and retry, a Java holder does not check at all. Every release is appended to
``paimon_lock_events`` as ``force_released`` with the operator (``user@host``) and the reason, in the
transaction that deletes the row.

Each row has a ``state`` (``paimon-meta locks list`` shows it; ``--overdue`` lists only those):

* ``stale``: expired by Java's rule;
* ``java``: a Java row within its expiry (Java writes no heartbeat: nothing more can be said);
* ``heartbeat_overdue``: ours, not expired, but not renewed for more than half its lease, where a live
  holder renews every third of it (``heartbeat_overdue_after``). Its holder lost its metastore
  connection, froze, or died. A live holder whose connection comes back renews it, or, if it was
  releasing, releases it itself (the lock's deferred release, ``released`` with ``after_reconnect``);
  a dead one's row is taken over when the lease ends;
* ``live``.

Only the heartbeat is used to judge: it is written by the holder itself, on the database's clock, so the
judgement needs nothing but the row. Matching a row to the holder's backend sessions
(``pg_stat_activity``) is not reliable: the row names the client's host and process, a backend shows only
a client address (NAT, proxies such as PgBouncer, several processes per host) and no client pid, and the
heartbeat runs on pooled connections that a live holder may not have open at any given moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text

from paimon_meta.errors import NotFoundError, ValidationError
from paimon_meta.metastore.lock import LockInfo, MetastoreLock
from paimon_meta.ops.common import RefusedError, operator_identity

#: A live holder renews every lease/3; a row not renewed for this fraction of its lease is overdue.
HEARTBEAT_OVERDUE_FRACTION = 0.5

_HEARTBEAT_AGE = text(
    "SELECT lock_id, EXTRACT(EPOCH FROM clock_timestamp() - heartbeat_at)::float8 AS heartbeat_age "
    "FROM paimon_distributed_locks"
)


@dataclass(frozen=True, slots=True)
class LockRow:
    """One lock row as ``paimon-meta locks list`` shows it."""

    lock_id: str
    kind: str  # "java" (no owner: Java's JdbcCatalogLock) or "paimon_meta"
    owner: str | None
    fencing_token: int | None
    hostname: str | None
    pid: int | None
    acquired_at: datetime
    #: How long the holder has held it (since ``held_since``): a hung writer's lock grows old even
    #: while its heartbeat keeps it live (``heartbeat_age_seconds`` is the time since the last renewal).
    age_seconds: float
    lease_left_seconds: float
    heartbeat_at: datetime | None
    heartbeat_age_seconds: float | None
    expire_time_seconds: int
    stale: bool
    # Ours, not expired, and not renewed for more than half its lease (module docstring).
    heartbeat_overdue: bool = False
    # "stale", "java", "heartbeat_overdue" or "live" (module docstring).
    state: str = "live"
    held_since: datetime | None = None

    @classmethod
    def of(cls, info: LockInfo, heartbeat_age: float | None) -> LockRow:
        overdue = heartbeat_overdue(info, heartbeat_age)
        if info.stale:
            state = "stale"
        elif info.java:
            state = "java"
        else:
            state = "heartbeat_overdue" if overdue else "live"
        return cls(
            lock_id=info.lock_id,
            kind="java" if info.java else "paimon_meta",
            owner=info.owner,
            fencing_token=info.fencing_token,
            hostname=info.hostname,
            pid=info.pid,
            acquired_at=info.acquired_at,
            # Before migration 0018 rows had no held_since: the time since the last renewal is all there is.
            age_seconds=round(info.age_seconds if info.held_seconds is None else info.held_seconds, 3),
            lease_left_seconds=round(info.lease_left_seconds, 3),
            heartbeat_at=info.heartbeat_at,
            heartbeat_age_seconds=None if heartbeat_age is None else round(heartbeat_age, 3),
            expire_time_seconds=info.expire_time_seconds,
            stale=info.stale,
            heartbeat_overdue=overdue,
            state=state,
            held_since=info.held_since,
        )


def heartbeat_overdue(info: LockInfo, heartbeat_age: float | None) -> bool:
    """Whether ``info`` is one of our rows, not expired, whose heartbeat is overdue (module docstring)."""
    if info.java or info.stale or heartbeat_age is None:
        return False
    lease = info.lease_seconds or info.expire_time_seconds
    return heartbeat_age > lease * HEARTBEAT_OVERDUE_FRACTION


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """A released row: who held it, whether it was stale, and who released it why."""

    lock: LockRow
    forced: bool
    operator: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"lock": self.lock, "forced": self.forced, "operator": self.operator, "reason": self.reason}


def list_locks(lock: MetastoreLock, *, stale_only: bool = False, overdue_only: bool = False) -> list[LockRow]:
    """Every lock row, Java's included, with age, lease left, heartbeat age, the stale flag and the
    state (module docstring). ``stale_only``/``overdue_only``: only the stale rows / only the rows whose
    heartbeat is overdue (holders that lost their connection); both: either."""
    with lock.engine.connect() as conn:
        heartbeats = {r.lock_id: r.heartbeat_age for r in conn.execute(_HEARTBEAT_AGE)}
    rows = [LockRow.of(info, heartbeats.get(info.lock_id)) for info in lock.list_locks()]
    if not stale_only and not overdue_only:
        return rows
    return [r for r in rows if (stale_only and r.stale) or (overdue_only and r.heartbeat_overdue)]


def release_lock(
    lock: MetastoreLock,
    lock_id: str,
    *,
    reason: str,
    force: bool = False,
    operator: str | None = None,
) -> ReleaseResult:
    """Release ``lock_id`` (see the module docstring).

    Raises:
        ValidationError: empty reason.
        NotFoundError: no such lock row.
        RefusedError: the row is live and ``force`` is not set (or became live again meanwhile).
    """
    if not reason or not reason.strip():
        raise ValidationError("a lock release needs a reason (--reason)")
    who = operator or operator_identity()
    info = lock.get_lock(lock_id)
    if info is None:
        raise NotFoundError(f"no lock {lock_id!r}", lock_id=lock_id)
    if force:
        released = lock.force_release(lock_id, operator=who, reason=reason)
        if released is None:
            raise NotFoundError(f"lock {lock_id!r} was released meanwhile", lock_id=lock_id)
        return ReleaseResult(LockRow.of(released, None), True, who, reason)
    if not info.stale:
        holder = info.owner or "a Java writer"
        raise RefusedError(
            f"lock {lock_id!r} is live (held by {holder}, {info.lease_left_seconds:.1f}s of its lease left); "
            "pass --force to release it anyway",
            lock_id=lock_id,
            owner=info.owner,
        )
    # Deleted only if still expired: a holder that renewed (or took over) since we looked is kept.
    released = lock.force_release(lock_id, operator=who, reason=reason, stale_only=True)
    if released is None:
        raise RefusedError(
            f"lock {lock_id!r} is no longer stale (renewed or taken over); nothing released",
            lock_id=lock_id,
        )
    return ReleaseResult(LockRow.of(released, None), False, who, reason)
