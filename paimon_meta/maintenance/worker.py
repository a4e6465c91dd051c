"""The workers: threads that run the scheduler and the queue's jobs (inside ``paimon-meta serve``, or as
``paimon-meta maintain``).

A worker claims a due job under a lease, renews the lease while the action runs, and records the run in
the maintenance log (operation ``maintain``: the kind, the table, files and bytes before and after, the
duration and the outcome; the change feed carries it). On success the job is deleted; on failure it is
retried with backoff, or, when retrying cannot help (a table whose options we refuse) or attempts ran
out, left in the dead letter. A worker that dies mid-run leaves its job ``running``; once the lease ran
out another worker takes it over. Concurrency: ``workers`` jobs at a time per process, one per table and
kind in the whole catalog (the queue's unique index).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from paimon_meta.db.models import (
    MaintenanceEventType,
    MaintenanceJobState,
    MaintenanceKind,
    MaintenanceOperation,
)
from paimon_meta.errors import NotFoundError, UnsupportedError, ValidationError
from paimon_meta.maintenance.actions import PRINCIPAL, run_action
from paimon_meta.maintenance.queue import Job, MaintenanceQueue, new_owner
from paimon_meta.maintenance.scheduler import Scheduler, record_success
from paimon_meta.maintenance.spark import SparkCompaction
from paimon_meta.metastore.registry import TableRow
from paimon_meta.ops.common import MaintenanceRun

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MaintainerSettings:
    """How the workers run: ``workers`` threads (0: none, the scheduler neither), polling the queue every
    ``poll_seconds`` when idle, ticking the scheduler every ``tick_seconds``, leases of ``lease_seconds``."""

    workers: int = 2
    poll_seconds: float = 1.0
    tick_seconds: float = 1.0
    sweep_seconds: float = 60.0
    lease_seconds: float = 60.0
    backoff_seconds: float = 5.0
    #: Large compactions as the Spark compaction job on this cluster (None: every one in-process).
    spark: SparkCompaction | None = None


@dataclass(slots=True)
class MaintainerStats:
    """Counts of this process's runs, by kind and outcome (for /metrics)."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, kind: str, outcome: str, seconds: float) -> None:
        self.runs[(kind, outcome)] = self.runs.get((kind, outcome), 0) + 1
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds


class Maintainer:
    """The scheduler and the workers of one catalog in this process."""

    def __init__(
        self,
        catalog: MetastoreCatalog,
        settings: MaintainerSettings,
        *,
        where: str = "maintainer",
        on_run: Callable[[Job, str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.catalog = catalog
        self.settings = settings
        self.queue = MaintenanceQueue(
            catalog.engine,
            catalog.registry.catalog_key,
            lease_seconds=settings.lease_seconds,
            backoff_seconds=settings.backoff_seconds,
        )
        self.scheduler = Scheduler(catalog, self.queue, sweep_seconds=settings.sweep_seconds)
        self.where = where
        self.on_run = on_run
        self.stats = MaintainerStats()
        self._stop = threading.Event()
        # Set when this process's scheduler queued jobs (or stop): idle workers take them at once instead
        # of at their next poll; jobs queued by other processes are found by polling.
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stats_lock = threading.Lock()

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler thread and the worker threads (none when ``workers`` is 0)."""
        if self.settings.workers <= 0:
            return
        self._threads.append(
            threading.Thread(target=self._schedule_loop, name="maintenance-scheduler", daemon=True)
        )
        for i in range(self.settings.workers):
            self._threads.append(
                threading.Thread(target=self._work_loop, name=f"maintenance-worker-{i}", daemon=True)
            )
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking jobs and wait up to ``timeout`` for the running ones."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()

    def _schedule_loop(self) -> None:
        while not self._stop.is_set():
            try:
                report = self.scheduler.tick()
            except Exception:  # the loop must outlive a metastore outage
                log.warning("maintenance scheduler tick failed", exc_info=True)
            else:
                if report.queued:
                    with self._wake:
                        self._wake.notify_all()
            self._stop.wait(self.settings.tick_seconds)

    def _work_loop(self) -> None:
        owner = new_owner(self.where)
        while not self._stop.is_set():
            try:
                ran = self.run_one(owner)
            except Exception:
                log.warning("maintenance worker failed to take a job", exc_info=True)
                ran = False
            if not ran and not self._stop.is_set():
                with self._wake:
                    self._wake.wait(self.settings.poll_seconds)

    def drain(self, *, max_jobs: int = 1000) -> int:
        """Run the scheduler once and then due jobs until none is left (``paimon-meta maintain --once``,
        tests); the number of jobs run."""
        self.scheduler.tick(sweep=True)
        owner = new_owner(self.where)
        ran = 0
        while ran < max_jobs and self.run_one(owner):
            ran += 1
        return ran

    # ---- one job -----------------------------------------------------------------------------------

    def run_one(self, owner: str, *, kinds: tuple[MaintenanceKind, ...] | None = None) -> bool:
        """Claim one due job and run it; False if none was due."""
        job = self.queue.claim(owner, kinds=kinds)
        if job is None:
            return False
        self.run_claimed(job, owner)
        return True

    def run_claimed(self, job: Job, owner: str) -> None:
        """Run a job ``owner`` claimed: the action under a renewed lease, recorded, then finished,
        retried or dead-lettered."""
        lost = threading.Event()
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self.settings.lease_seconds / 3):
                try:
                    if not self.queue.renew(job.job_id, owner):
                        lost.set()
                        return
                except Exception:
                    log.warning("could not renew the lease of maintenance job %s", job.job_id, exc_info=True)

        renewer = threading.Thread(target=renew, name=f"maintenance-lease-{job.job_id}", daemon=True)
        renewer.start()
        started = time.monotonic()
        run = MaintenanceRun(
            self.catalog, self._row(job), MaintenanceOperation.MAINTAIN, dry_run=False, principal=PRINCIPAL
        )
        run.record(
            MaintenanceEventType.STARTED,
            {
                "kind": job.kind.value,
                "job_id": job.job_id,
                "attempt": job.attempts,
                "reason": job.reason,
                "debt": job.debt,
            },
        )
        try:
            outcome = run_action(
                self.catalog, job.kind, job.table_identifier, table_id=job.table_id, spark=self.settings.spark
            )
        except NotFoundError as e:
            # The table went away (dropped, renamed): nothing is owed any more.
            self._ended(
                job,
                run=run,
                started=started,
                outcome="gone",
                payload={"error": str(e)},
                event=MaintenanceEventType.FINISHED,
            )
            self.queue.finish(job.job_id, owner)
            return
        except Exception as e:
            retry = not isinstance(e, (UnsupportedError, ValidationError))
            state = self.queue.fail(job.job_id, owner, f"{type(e).__name__}: {e}", retry=retry)
            outcome_name = "dead" if state is MaintenanceJobState.DEAD else "retry"
            log.warning(
                "maintenance %s of %s failed (%s): %s", job.kind, job.table_identifier, outcome_name, e
            )
            self._ended(
                job,
                run=run,
                started=started,
                outcome=outcome_name,
                payload={"error": type(e).__name__, "message": str(e)},
                event=MaintenanceEventType.FAILED,
            )
            return
        finally:
            done.set()
        if lost.is_set():
            log.warning("maintenance job %s lost its lease while it ran", job.job_id)
        record_success(self.catalog, job.table_id, job.table_identifier, job.kind)
        self.queue.finish(job.job_id, owner)
        self._ended(
            job,
            run=run,
            started=started,
            outcome="done" if outcome.acted else "nothing_due",
            payload=outcome.to_dict(),
            event=MaintenanceEventType.FINISHED,
        )

    def _row(self, job: Job) -> TableRow:
        """The row the run is recorded under (a dropped table's from the recycle bin)."""
        try:
            return self.catalog.registry.get_table_row_by_id(job.table_id)
        except NotFoundError:
            database, _, name = job.table_identifier.partition(".")
            now = datetime.now(UTC)
            return TableRow(
                table_id=job.table_id,
                catalog_key=self.catalog.registry.catalog_key,
                database=database,
                name=name,
                location=None,
                table_uuid=None,
                schema_id=None,
                latest_snapshot_id=None,
                created_at=now,
                updated_at=now,
            )

    def _ended(
        self,
        job: Job,
        *,
        run: MaintenanceRun,
        started: float,
        outcome: str,
        payload: dict[str, Any],
        event: MaintenanceEventType,
    ) -> None:
        seconds = time.monotonic() - started
        body = {
            "kind": job.kind.value,
            "job_id": job.job_id,
            "outcome": outcome,
            "duration_ms": round(seconds * 1000, 1),
            **payload,
        }
        run.record(event, body)
        with self._stats_lock:
            self.stats.add(job.kind.value, outcome, seconds)
        if self.on_run is not None:
            self.on_run(job, outcome, body)
