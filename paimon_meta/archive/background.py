"""The archiver in ``serve``'s background: one replica at a time, every ``interval`` seconds.

A replica runs a pass only while it holds the metastore lock :data:`ARCHIVER_LOCK` (the lock table's
lease, heartbeat-renewed, as background recovery's): the others skip their turn. A pass that fails (the
metastore or a warehouse down, a refused drop) is logged and counted, and the next one tries again;
nothing is dropped that was not archived (the archiver's invariant, and the event log's drop refuses
otherwise). Should a holder lose the lease mid-pass and another replica start one, both stay exactly
once (``archive.archiver``): the lease saves work, it does not carry correctness.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge

from paimon_meta.archive.archiver import Archiver, ArchiveReport
from paimon_meta.archive.store import EventPartitionStore
from paimon_meta.errors import ValidationError
from paimon_meta.metastore.catalogs import Catalogs, events_retention
from paimon_meta.metastore.lock import MetastoreLock

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.metastore.catalogs import CatalogInfo

log = logging.getLogger(__name__)

#: The lock (in the metastore's lock table) a replica holds while it archives.
ARCHIVER_LOCK = "paimon_meta:archiver"
#: How often ``serve`` archives unless told otherwise (``--archive-interval-seconds``).
DEFAULT_INTERVAL_SECONDS = 3600.0
_LEASE_SECONDS = 60


class ArchiveMetrics:
    """The archiver's series in a process's registry (``/metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter(
            "paimon_meta_archive_runs_total",
            "Archiver passes by outcome: ok, errors (a catalog or a drop failed: retried next pass), failed "
            "(the pass stopped), skipped (another replica holds the archiver's lease), idle (no catalog has "
            "a retention).",
            ("outcome",),
            registry=registry,
        )
        self.rows = Counter(
            "paimon_meta_archive_rows_total",
            "Commit events archived into a catalog's system.commit_log, by catalog.",
            ("catalog",),
            registry=registry,
        )
        self.dropped = Counter(
            "paimon_meta_archive_partitions_dropped_total",
            "Partitions of the commit log dropped after every catalog with rows in them was archived.",
            registry=registry,
        )
        self.last_success = Gauge(
            "paimon_meta_archive_last_success_timestamp_seconds",
            "When this replica's last archiver pass ended without an error (Unix time; 0: never).",
            registry=registry,
        )
        for outcome in ("ok", "errors", "failed", "skipped", "idle"):
            self.runs.labels(outcome=outcome)

    def observe(self, report: ArchiveReport) -> None:
        for done in report.archived:
            if not done.already_committed:
                self.rows.labels(catalog=done.catalog).inc(done.rows)
        self.dropped.inc(len(report.dropped))
        self.runs.labels(outcome="errors" if report.errors else "ok").inc()
        if not report.errors:
            self.last_success.set(datetime.now(UTC).timestamp())


class BackgroundArchiver:
    """Runs :class:`Archiver` passes on a daemon thread (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        *,
        holder: str,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        first_delay_seconds: float | None = None,
        store: Callable[[], EventPartitionStore],
        open_catalog: Callable[[CatalogInfo], MetastoreCatalog] | None = None,
        metrics: ArchiveMetrics | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``clock``: the archiver's (default: the system's UTC time)."""
        self.engine = engine
        self._clock = clock
        self.holder = holder
        self.interval = interval_seconds
        self.first_delay = min(60.0, interval_seconds) if first_delay_seconds is None else first_delay_seconds
        self._store = store
        self._open = open_catalog
        self.metrics = metrics
        self._lock = MetastoreLock(engine)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The last pass's report (None: none ran here yet).
        self.last_report: ArchiveReport | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="archiver", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run_once(self) -> ArchiveReport | None:
        """One pass if some catalog has a retention and this replica gets the lease (None: neither).

        Raises:
            PaimonMetaError and the database's errors: the pass stopped (nothing half-done is dropped).
        """
        if not self._any_retention():
            # No catalog archives (today's default): no lease taken, no lock event written.
            if self.metrics is not None:
                self.metrics.runs.labels(outcome="idle").inc()
            return None
        lease = self._lock.try_acquire(ARCHIVER_LOCK, owner=self.holder, lease_seconds=_LEASE_SECONDS)
        if lease is None:
            if self.metrics is not None:
                self.metrics.runs.labels(outcome="skipped").inc()
            return None
        try:
            archiver = Archiver(
                self.engine,
                self._store(),
                operator=self.holder,
                open_catalog=self._open,
                clock=self._clock,
            )
            report = archiver.run()
        finally:
            lease.release()
        self.last_report = report
        if self.metrics is not None:
            self.metrics.observe(report)
        if report.archived or report.dropped or report.errors:
            log.info(
                "archiver: %d event(s) archived, partitions dropped %s, errors %s",
                report.rows,
                report.dropped,
                report.errors,
            )
        return report

    def _any_retention(self) -> bool:
        for info in Catalogs(self.engine).list_all():
            try:
                if events_retention(info.options) is not None:
                    return True
            except ValidationError:
                return True  # the pass reports it
        return False

    def _loop(self) -> None:
        delay = self.first_delay
        while not self._stop.wait(delay):
            delay = self.interval
            try:
                self.run_once()
            except Exception:  # an outage: logged, retried at the next pass, never the end of serve
                if self.metrics is not None:
                    self.metrics.runs.labels(outcome="failed").inc()
                log.warning("archiver pass failed; next try in %gs", self.interval, exc_info=True)
