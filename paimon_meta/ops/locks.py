"""Lock tooling: list the metastore's lock rows (ours and Java's) and release stuck ones.

A row is *stale* when Java's own expiry rule says so (``now - acquired_at > expire_time_seconds``; our
heartbeat refreshes ``acquired_at``), so a stale row is one any acquirer would delete anyway. Releasing a
stale row needs only a reason; releasing a live one (a holder that still heartbeats, or a Java holder
within its expiry) is refused unless forced, because that holder may be about to publish: our holders
then fail their fencing check and retry, a Java holder does not check at all. Every release is appended to
``paimon_lock_events`` as ``force_released`` with the operator (``user@host``) and the reason, in the
transaction that deletes the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text

from paimon_meta.errors import NotFoundError, ValidationError
from paimon_meta.metastore.lock import LockInfo, MetastoreLock
from paimon_meta.ops.common import RefusedError, operator_identity

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
    age_seconds: float
    lease_left_seconds: float
    heartbeat_at: datetime | None
    heartbeat_age_seconds: float | None
    expire_time_seconds: int
    stale: bool

    @classmethod
    def of(cls, info: LockInfo, heartbeat_age: float | None) -> LockRow:
        return cls(
            lock_id=info.lock_id,
            kind="java" if info.java else "paimon_meta",
            owner=info.owner,
            fencing_token=info.fencing_token,
            hostname=info.hostname,
            pid=info.pid,
            acquired_at=info.acquired_at,
            age_seconds=round(info.age_seconds, 3),
            lease_left_seconds=round(info.lease_left_seconds, 3),
            heartbeat_at=info.heartbeat_at,
            heartbeat_age_seconds=None if heartbeat_age is None else round(heartbeat_age, 3),
            expire_time_seconds=info.expire_time_seconds,
            stale=info.stale,
        )


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """A released row: who held it, whether it was stale, and who released it why."""

    lock: LockRow
    forced: bool
    operator: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"lock": self.lock, "forced": self.forced, "operator": self.operator, "reason": self.reason}


def list_locks(lock: MetastoreLock, *, stale_only: bool = False) -> list[LockRow]:
    """Every lock row, Java's included, with age, lease left, heartbeat age and the stale flag."""
    with lock.engine.connect() as conn:
        heartbeats = {r.lock_id: r.heartbeat_age for r in conn.execute(_HEARTBEAT_AGE)}
    rows = [LockRow.of(info, heartbeats.get(info.lock_id)) for info in lock.list_locks()]
    return [r for r in rows if r.stale] if stale_only else rows


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
