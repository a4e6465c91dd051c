"""Prometheus metrics of a :class:`~paimon_meta.metastore.lock.MetastoreLock`'s deferred releases.

Counted in the process that does the work (the holder), so they go to that process's registry: the
service registers them on its own (``register(catalog.lock, metrics.registry)``). ``prometheus_client``
is the service extra's, imported only when :func:`register` is called.

* ``paimon_meta_lock_released_after_reconnect_total``: lock rows whose release failed with the metastore
  unreachable and that their holder released itself once it answered again (the ``released`` lock
  events whose payload says ``"after_reconnect": true``);
* ``paimon_meta_lock_deferred_releases_total{outcome}``: every deferred release by how it ended
  (``released``, ``gone``, ``expired``, ``closed``: :class:`~paimon_meta.metastore.deferred.ReleaseOutcome`);
* ``paimon_meta_lock_deferred_releases_pending``: deferred releases being retried now;
* ``paimon_meta_commit_deferred_recordings_total{outcome}``: snapshots' records deferred because the
  connection died while publishing, by what became of them (``recorded`` under the lease after
  reconnecting, ``already_recorded``, ``reconciled`` by the holder's immediate recovery,
  ``left_to_holder``, ``left_to_recovery``, ``error``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimon_meta.metastore.deferred import DeferredRelease, ReleaseOutcome
from paimon_meta.metastore.lock import MetastoreLock

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge

RELEASED_AFTER_RECONNECT = "paimon_meta_lock_released_after_reconnect"
DEFERRED_RELEASES = "paimon_meta_lock_deferred_releases"
DEFERRED_RELEASES_PENDING = "paimon_meta_lock_deferred_releases_pending"
DEFERRED_RECORDINGS = "paimon_meta_commit_deferred_recordings"


@dataclass(frozen=True, slots=True)
class LockMetrics:
    """The metrics :func:`register` created (``_total`` is appended to the counters' names)."""

    released_after_reconnect: Counter
    deferred_releases: Counter
    deferred_pending: Gauge
    deferred_recordings: Counter

    def observe(self, report: DeferredRelease) -> None:
        """Count one ended deferred release."""
        self.deferred_releases.labels(outcome=report.outcome.value).inc()
        if report.outcome is ReleaseOutcome.RELEASED:
            self.released_after_reconnect.inc()
        if report.settlement is not None:
            self.deferred_recordings.labels(outcome=report.settlement).inc()


def register(lock: MetastoreLock, registry: CollectorRegistry) -> LockMetrics:
    """Create the module's metrics in ``registry`` and count ``lock``'s deferred releases in them."""
    from prometheus_client import Counter, Gauge

    metrics = LockMetrics(
        released_after_reconnect=Counter(
            RELEASED_AFTER_RECONNECT,
            "Lock rows whose release failed (metastore unreachable) and that their holder released "
            "itself once the metastore answered again.",
            registry=registry,
        ),
        deferred_releases=Counter(
            DEFERRED_RELEASES,
            "Deferred lock releases by how they ended (released, gone, expired, closed).",
            ["outcome"],
            registry=registry,
        ),
        deferred_pending=Gauge(
            DEFERRED_RELEASES_PENDING,
            "Lock releases that failed and are being retried in the background now.",
            registry=registry,
        ),
        deferred_recordings=Counter(
            DEFERRED_RECORDINGS,
            "Snapshot records deferred because the metastore connection died while publishing, by what "
            "became of them (recorded, already_recorded, reconciled, left_to_holder, left_to_recovery).",
            ["outcome"],
            registry=registry,
        ),
    )
    metrics.deferred_pending.set_function(lambda: float(lock.deferred_pending))
    lock.observe_deferred(metrics.observe)
    return metrics
