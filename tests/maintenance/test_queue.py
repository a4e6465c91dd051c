"""The maintenance queue: one job per table and kind, SKIP LOCKED claims, leases taken over, retries with
backoff, the dead letter, pauses."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import MaintenanceJobState, MaintenanceKind
from paimon_meta.maintenance.queue import JobNotFoundError, MaintenanceQueue

pytestmark = pytest.mark.postgres

COMPACT = MaintenanceKind.COMPACT
EXPIRE = MaintenanceKind.EXPIRE_SNAPSHOTS


def _queue(catalog: MetastoreCatalog, **kwargs: float) -> MaintenanceQueue:
    return MaintenanceQueue(catalog.engine, catalog.registry.catalog_key, **kwargs)


def _expire_lease(catalog: MetastoreCatalog, job_id: int) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE paimon_maintenance_jobs SET lease_expires_at = now() - interval '1 s' "
                "WHERE job_id = :j"
            ),
            {"j": job_id},
        )


def _make_due(catalog: MetastoreCatalog, job_id: int) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(
            text("UPDATE paimon_maintenance_jobs SET run_after = now() - interval '1 s' WHERE job_id = :j"),
            {"j": job_id},
        )


def test_at_most_one_queued_or_running_job_per_table_and_kind(catalog: MetastoreCatalog) -> None:
    q = _queue(catalog)
    first = q.enqueue(1, "db.t", COMPACT, reason="debt", debt={"max_sorted_runs": 5})
    assert first is not None
    assert q.enqueue(1, "db.t", COMPACT, reason="debt", debt={"max_sorted_runs": 7}) is None
    assert q.enqueue(1, "db.t", EXPIRE, reason="debt") is not None  # another kind
    assert q.enqueue(2, "db.u", COMPACT, reason="debt") is not None  # another table
    job = q.claim("w1", kinds=(COMPACT,))
    assert job is not None and job.table_id == 1 and job.debt == {"max_sorted_runs": 7}
    # running counts too
    assert q.enqueue(1, "db.t", COMPACT, reason="debt") is None
    assert q.finish(job.job_id, "w1")
    assert q.enqueue(1, "db.t", COMPACT, reason="debt") is not None
    assert q.depth() == {"queued": 3, "running": 0, "dead": 0}


def test_concurrent_claims_never_take_one_job_twice(catalog: MetastoreCatalog) -> None:
    q = _queue(catalog)
    for table_id in range(20):
        q.enqueue(table_id, f"db.t{table_id}", COMPACT, reason="debt")
    taken: list[int] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        while (job := q.claim(name)) is not None:
            with lock:
                taken.append(job.job_id)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(taken) == 20 and len(set(taken)) == 20


def test_a_job_whose_lease_ran_out_is_taken_over_and_its_old_owner_cannot_finish_it(
    catalog: MetastoreCatalog,
) -> None:
    q = _queue(catalog, lease_seconds=60)
    job_id = q.enqueue(1, "db.t", COMPACT, reason="debt")
    first = q.claim("dead-worker")
    assert first is not None and first.job_id == job_id and first.attempts == 1
    assert q.claim("other") is None  # leased
    _expire_lease(catalog, first.job_id)
    second = q.claim("other")
    assert second is not None and second.job_id == job_id and second.attempts == 2
    assert second.lease_owner == "other"
    assert not q.renew(job_id, "dead-worker")
    assert not q.finish(job_id, "dead-worker")
    assert q.fail(job_id, "dead-worker", "late") is None
    assert q.renew(job_id, "other")
    assert q.finish(job_id, "other")
    assert q.jobs() == []


def test_failures_back_off_then_land_in_the_dead_letter(catalog: MetastoreCatalog) -> None:
    q = _queue(catalog, backoff_seconds=30)
    job_id = q.enqueue(1, "db.t", COMPACT, reason="debt", max_attempts=2)
    assert job_id is not None
    job = q.claim("w")
    assert job is not None
    assert q.fail(job_id, "w", "boom") is MaintenanceJobState.QUEUED
    assert q.claim("w") is None  # backing off
    (queued,) = q.jobs()
    assert queued.last_error == "boom" and (queued.run_after - queued.created_at).total_seconds() >= 29
    _make_due(catalog, job_id)
    assert q.claim("w") is not None
    assert q.fail(job_id, "w", "boom again") is MaintenanceJobState.DEAD
    _make_due(catalog, job_id)
    assert q.claim("w") is None
    assert [j.state for j in q.jobs()] == [MaintenanceJobState.DEAD]
    # a dead job holds its table and kind (no new job per commit) until an operator retries it
    assert q.enqueue(1, "db.t", COMPACT, reason="debt") is None
    assert q.enqueue(1, "db.t", EXPIRE, reason="debt") is not None
    assert q.depth() == {"queued": 1, "running": 0, "dead": 1}
    q.retry_dead(job_id)
    assert q.depth() == {"queued": 2, "running": 0, "dead": 0}
    with pytest.raises(JobNotFoundError):
        q.retry_dead(job_id)  # not dead any more


def test_a_failure_retrying_cannot_help_goes_to_the_dead_letter_at_once(catalog: MetastoreCatalog) -> None:
    q = _queue(catalog)
    job_id = q.enqueue(1, "db.t", COMPACT, reason="debt", max_attempts=5)
    assert job_id is not None and q.claim("w") is not None
    assert q.fail(job_id, "w", "unsupported", retry=False) is MaintenanceJobState.DEAD
    q.retry_dead(job_id)
    again = q.claim("w")
    assert again is not None and again.job_id == job_id and again.attempts == 1


def test_paused_tables_and_catalogs_are_not_claimed(catalog: MetastoreCatalog) -> None:
    q = _queue(catalog)
    q.enqueue(1, "db.t", COMPACT, reason="debt")
    q.enqueue(2, "db.u", COMPACT, reason="debt")
    assert q.pause("db.t", by="op")
    assert not q.pause("db.t", by="op")
    job = q.claim("w")
    assert job is not None and job.table_identifier == "db.u"
    q.finish(job.job_id, "w")
    assert q.claim("w") is None
    assert q.pause("*", by="op") and q.resume("db.t")
    assert q.claim("w") is None
    assert q.resume("*")
    job = q.claim("w")
    assert job is not None and job.table_identifier == "db.t"
