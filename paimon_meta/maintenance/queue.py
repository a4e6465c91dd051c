"""The maintenance queue in Postgres (``paimon_maintenance_jobs``, migration 0017).

* **At most one run per table and kind**: a partial unique index over the queued and running jobs;
  :meth:`MaintenanceQueue.enqueue` of a job that is already there does nothing (``ON CONFLICT DO
  NOTHING``), so every commit can ask for compaction without piling up jobs.
* **Taken under a lease**: :meth:`claim` takes the oldest due job with ``FOR UPDATE SKIP LOCKED`` (workers
  of every replica skip each other's rows instead of waiting), marks it ``running`` with an owner and a
  lease; a worker renews the lease while it works (:meth:`renew`). A job whose lease ran out (its worker
  died or froze) is due again and the next :meth:`claim` takes it over, counting one more attempt.
* **Retries with backoff, then the dead letter**: :meth:`fail` puts the job back ``queued`` with
  ``run_after`` = now + ``base * 2^(attempts-1)`` (capped), or, out of attempts, leaves it ``dead``
  with its last error until an operator retries (:meth:`retry_dead`) or deletes it; meanwhile no new
  job of that table and kind is queued.
* A job that succeeds is deleted (:meth:`finish`): its run is in the maintenance log.
* **Paused**: jobs of a paused table (or of a paused catalog) are not claimed (``paimon_maintenance_pauses``).

Every method is one short transaction; owner-checked updates make a worker that lost its lease unable to
finish or fail a job another worker took over.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, text

from paimon_meta.db.models import MaintenanceJobState, MaintenanceKind
from paimon_meta.errors import NotFoundError

CATALOG_SCOPE = "*"
DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_BACKOFF_SECONDS = 5.0
MAX_BACKOFF_SECONDS = 3600.0


class JobNotFoundError(NotFoundError):
    """No maintenance job with that id (or it is not in the state asked for)."""

    resource = "job"


@dataclass(frozen=True, slots=True)
class Job:
    """One row of the queue."""

    job_id: int
    table_id: int
    table_identifier: str
    kind: MaintenanceKind
    state: MaintenanceJobState
    reason: str
    attempts: int
    max_attempts: int
    run_after: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    debt: dict[str, Any]
    last_error: str | None
    created_at: datetime

    @classmethod
    def from_mapping(cls, m: Mapping[Any, Any]) -> Job:
        return cls(
            job_id=m["job_id"],
            table_id=m["table_id"],
            table_identifier=m["table_identifier"],
            kind=MaintenanceKind(m["kind"]),
            state=MaintenanceJobState(m["state"]),
            reason=m["reason"],
            attempts=m["attempts"],
            max_attempts=m["max_attempts"],
            run_after=m["run_after"],
            lease_owner=m["lease_owner"],
            lease_expires_at=m["lease_expires_at"],
            debt=dict(m["debt"] or {}),
            last_error=m["last_error"],
            created_at=m["created_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "table": self.table_identifier,
            "kind": self.kind.value,
            "state": self.state.value,
            "reason": self.reason,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "run_after": self.run_after.isoformat(),
            "lease_owner": self.lease_owner,
            "lease_expires_at": None if self.lease_expires_at is None else self.lease_expires_at.isoformat(),
            "debt": self.debt,
            "last_error": self.last_error,
        }


_COLUMNS = (
    "job_id, table_id, table_identifier, kind, state, reason, attempts, max_attempts, run_after, "
    "lease_owner, lease_expires_at, debt, last_error, created_at"
)

# Due: queued and past run_after, or running with a lease that ran out (taken over). Not paused.
_CLAIM = text(
    f"""
    UPDATE paimon_maintenance_jobs j SET
        state = 'running', attempts = j.attempts + 1, lease_owner = :owner,
        lease_expires_at = clock_timestamp() + make_interval(secs => :lease), updated_at = clock_timestamp()
    WHERE j.job_id = (
        SELECT c.job_id FROM paimon_maintenance_jobs c
        WHERE c.catalog_key = :catalog
          AND ((c.state = 'queued' AND c.run_after <= clock_timestamp())
               OR (c.state = 'running' AND c.lease_expires_at < clock_timestamp()))
          AND NOT EXISTS (
              SELECT 1 FROM paimon_maintenance_pauses p
              WHERE p.catalog_key = c.catalog_key AND p.scope IN ('*', c.table_identifier))
          AND (CAST(:kinds AS text[]) IS NULL OR c.kind = ANY(CAST(:kinds AS text[])))
        ORDER BY c.run_after, c.job_id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    RETURNING {", ".join("j." + c.strip() for c in _COLUMNS.split(","))}
    """  # noqa: S608 - column names are constants of this module
)


class MaintenanceQueue:
    """The queue of one catalog (``catalog_key``)."""

    def __init__(
        self,
        engine: Engine,
        catalog_key: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        backoff_seconds: float = DEFAULT_BACKOFF_SECONDS,
    ) -> None:
        self.engine = engine
        self.catalog_key = catalog_key
        self.lease_seconds = lease_seconds
        self.backoff_seconds = backoff_seconds

    # ---- producers ---------------------------------------------------------------------------------

    def enqueue(
        self,
        table_id: int,
        table_identifier: str,
        kind: MaintenanceKind,
        *,
        reason: str,
        debt: Mapping[str, Any] | None = None,
        max_attempts: int = 5,
        delay_seconds: float = 0.0,
    ) -> int | None:
        """Queue ``kind`` for the table unless a job of that kind is queued or running already (its
        debt is then refreshed while still queued), or is dead: a dead job holds its table and kind until
        an operator retries or deletes it, so a table maintenance cannot help does not fill the dead
        letter with one job per commit. The new job's id, or None."""
        params = {
            "catalog": self.catalog_key,
            "table_id": table_id,
            "identifier": table_identifier,
            "kind": kind.value,
            "reason": reason,
            "debt": _json(debt or {}),
            "max_attempts": max_attempts,
            "delay": delay_seconds,
        }
        with self.engine.begin() as conn:
            job_id = conn.execute(
                text(
                    "INSERT INTO paimon_maintenance_jobs (catalog_key, table_id, table_identifier, kind, "
                    "reason, debt, max_attempts, run_after) SELECT CAST(:catalog AS varchar), "
                    "CAST(:table_id AS bigint), CAST(:identifier AS text), CAST(:kind AS text), "
                    "CAST(:reason AS text), CAST(:debt AS jsonb), CAST(:max_attempts AS integer), "
                    "clock_timestamp() + make_interval(secs => CAST(:delay AS float8)) "
                    "WHERE NOT EXISTS (SELECT 1 FROM paimon_maintenance_jobs d "
                    "WHERE d.catalog_key = CAST(:catalog AS varchar) "
                    "AND d.table_id = CAST(:table_id AS bigint) "
                    "AND d.kind = CAST(:kind AS text) AND d.state = 'dead') "
                    "ON CONFLICT (catalog_key, table_id, kind) WHERE state IN ('queued', 'running') "
                    "DO NOTHING RETURNING job_id"
                ),
                params,
            ).scalar_one_or_none()
            if job_id is None and debt:
                conn.execute(
                    text(
                        "UPDATE paimon_maintenance_jobs SET debt = CAST(:debt AS jsonb) "
                        "WHERE catalog_key = :catalog AND table_id = :table_id AND kind = :kind "
                        "AND state = 'queued'"
                    ),
                    params,
                )
        return None if job_id is None else int(job_id)

    # ---- workers -----------------------------------------------------------------------------------

    def claim(self, owner: str, *, kinds: tuple[MaintenanceKind, ...] | None = None) -> Job | None:
        """Take the oldest due job (see the module docstring) for ``owner`` under a lease; None if
        there is none."""
        params = {
            "catalog": self.catalog_key,
            "owner": owner,
            "lease": self.lease_seconds,
            "kinds": None if kinds is None else [k.value for k in kinds],
        }
        with self.engine.begin() as conn:
            row = conn.execute(_CLAIM, params).mappings().first()
        return None if row is None else Job.from_mapping(row)

    def renew(self, job_id: int, owner: str) -> bool:
        """Extend ``owner``'s lease on a running job; False if the job is no longer its own (taken
        over after the lease ran out, or gone)."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text(
                    "UPDATE paimon_maintenance_jobs SET lease_expires_at = clock_timestamp() + "
                    "make_interval(secs => :lease), updated_at = clock_timestamp() "
                    "WHERE job_id = :job AND state = 'running' AND lease_owner = :owner"
                ),
                {"job": job_id, "owner": owner, "lease": self.lease_seconds},
            ).rowcount
        return bool(count)

    def finish(self, job_id: int, owner: str) -> bool:
        """The job succeeded: delete it (False if ``owner`` no longer holds it)."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text(
                    "DELETE FROM paimon_maintenance_jobs "
                    "WHERE job_id = :job AND state = 'running' AND lease_owner = :owner"
                ),
                {"job": job_id, "owner": owner},
            ).rowcount
        return bool(count)

    def fail(self, job_id: int, owner: str, error: str, *, retry: bool = True) -> MaintenanceJobState | None:
        """The job failed: back to ``queued`` after a backoff, or ``dead`` when out of attempts (or
        ``retry`` is false: retrying cannot help). The new state; None if ``owner`` no longer holds it."""
        with self.engine.begin() as conn:
            state = conn.execute(
                text(
                    "UPDATE paimon_maintenance_jobs SET "
                    "state = CASE WHEN :retry AND attempts < max_attempts THEN 'queued' ELSE 'dead' END, "
                    "run_after = clock_timestamp() + make_interval(secs => "
                    "  least(:cap, :base * power(2, greatest(attempts - 1, 0)))), "
                    "lease_owner = NULL, lease_expires_at = NULL, last_error = :error, "
                    "updated_at = clock_timestamp() "
                    "WHERE job_id = :job AND state = 'running' AND lease_owner = :owner RETURNING state"
                ),
                {
                    "job": job_id,
                    "owner": owner,
                    "error": error[:4000],
                    "retry": retry,
                    "base": self.backoff_seconds,
                    "cap": MAX_BACKOFF_SECONDS,
                },
            ).scalar_one_or_none()
        return None if state is None else MaintenanceJobState(state)

    def release(self, job_id: int, owner: str, *, delay_seconds: float) -> bool:
        """Give a claimed job back without counting the attempt (the worker yields, e.g. the table was
        paused or the worker stops): queued again after ``delay_seconds``."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text(
                    "UPDATE paimon_maintenance_jobs SET state = 'queued', "
                    "attempts = greatest(attempts - 1, 0), "
                    "lease_owner = NULL, lease_expires_at = NULL, "
                    "run_after = clock_timestamp() + make_interval(secs => :delay), "
                    "updated_at = clock_timestamp() "
                    "WHERE job_id = :job AND state = 'running' AND lease_owner = :owner"
                ),
                {"job": job_id, "owner": owner, "delay": delay_seconds},
            ).rowcount
        return bool(count)

    # ---- operators ---------------------------------------------------------------------------------

    def jobs(self, *, state: MaintenanceJobState | None = None, limit: int = 200) -> list[Job]:
        """The queue (every state, or one), oldest first."""
        query = (
            f"SELECT {_COLUMNS} FROM paimon_maintenance_jobs WHERE catalog_key = :catalog "  # noqa: S608
            "AND (CAST(:state AS text) IS NULL OR state = :state) ORDER BY run_after, job_id LIMIT :limit"
        )
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(query),
                {
                    "catalog": self.catalog_key,
                    "state": None if state is None else state.value,
                    "limit": limit,
                },
            ).mappings()
            return [Job.from_mapping(r) for r in rows]

    def depth(self) -> dict[str, int]:
        """Jobs by state (``queued``, ``running``, ``dead``)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT state, count(*) FROM paimon_maintenance_jobs WHERE catalog_key = :catalog "
                    "GROUP BY state"
                ),
                {"catalog": self.catalog_key},
            ).all()
        out = {s.value: 0 for s in MaintenanceJobState}
        out.update({str(state): int(n) for state, n in rows})
        return out

    def retry_dead(self, job_id: int) -> None:
        """Queue a dead job again with fresh attempts (``JobNotFoundError`` if no such dead job)."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text(
                    "UPDATE paimon_maintenance_jobs SET state = 'queued', attempts = 0, "
                    "run_after = clock_timestamp(), updated_at = clock_timestamp() "
                    "WHERE job_id = :job AND catalog_key = :catalog AND state = 'dead'"
                ),
                {"job": job_id, "catalog": self.catalog_key},
            ).rowcount
        if not count:
            raise JobNotFoundError(f"no dead maintenance job {job_id}", job_id=job_id)

    def pause(self, scope: str, *, by: str | None) -> bool:
        """Pause maintenance of ``scope`` (``*``: the catalog; else ``db.table``); False if it was."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text(
                    "INSERT INTO paimon_maintenance_pauses (catalog_key, scope, paused_by) "
                    "VALUES (:catalog, :scope, :by) ON CONFLICT DO NOTHING"
                ),
                {"catalog": self.catalog_key, "scope": scope, "by": by},
            ).rowcount
        return bool(count)

    def resume(self, scope: str) -> bool:
        """Resume maintenance of ``scope``; False if it was not paused."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text("DELETE FROM paimon_maintenance_pauses WHERE catalog_key = :catalog AND scope = :scope"),
                {"catalog": self.catalog_key, "scope": scope},
            ).rowcount
        return bool(count)

    def pauses(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT scope, paused_by, paused_at FROM paimon_maintenance_pauses "
                    "WHERE catalog_key = :catalog ORDER BY scope"
                ),
                {"catalog": self.catalog_key},
            ).mappings()
            return [{**r, "paused_at": r["paused_at"].isoformat()} for r in rows]

    def paused(self, table_identifier: str) -> bool:
        with self.engine.connect() as conn:
            return (
                conn.execute(
                    text(
                        "SELECT 1 FROM paimon_maintenance_pauses WHERE catalog_key = :catalog "
                        "AND scope IN ('*', :table)"
                    ),
                    {"catalog": self.catalog_key, "table": table_identifier},
                ).first()
                is not None
            )


def new_owner(where: str) -> str:
    """A worker's lease owner: where it runs and a fresh suffix."""
    return f"{where}:{uuid.uuid4().hex[:8]}"


def _json(value: Mapping[str, Any]) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)
