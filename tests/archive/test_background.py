"""``serve``'s archiver: one replica at a time (the lease), outages logged and retried, metrics."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from paimon_meta.archive.background import ARCHIVER_LOCK, ArchiveMetrics, BackgroundArchiver
from paimon_meta.errors import MetastoreUnavailableError
from paimon_meta.metastore.catalogs import EVENTS_RETENTION, Catalogs
from paimon_meta.metastore.lock import MetastoreLock
from tests.archive.helpers import db_now, make_catalog, seed
from tests.archive.window_store import WindowStore

pytestmark = pytest.mark.postgres


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_no_retention_no_lease(clean_engine: object) -> None:
    from sqlalchemy import Engine

    assert isinstance(clean_engine, Engine)
    registry = CollectorRegistry()
    replica = BackgroundArchiver(
        clean_engine,
        holder="r1",
        store=lambda: WindowStore(clean_engine, []),
        metrics=ArchiveMetrics(registry),
    )
    assert replica.run_once() is None
    assert _value(registry, "paimon_meta_archive_runs_total", outcome="idle") == 1
    from sqlalchemy import text

    with clean_engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM paimon_lock_events")).scalar_one() == 0


def test_one_replica_at_a_time_and_its_metrics(clean_db: str, tmp_path: Path) -> None:
    catalog = make_catalog(clean_db, str(tmp_path / "wh"), "main", retention="1 d")
    try:
        engine = catalog.engine
        seed(catalog, "db.t", 0)
        boundary = db_now(engine)
        seed(catalog, "db.t", 100)
        store = WindowStore(engine, [boundary])
        later = boundary + timedelta(days=2)
        registry = CollectorRegistry()
        metrics = ArchiveMetrics(registry)
        replica = BackgroundArchiver(
            engine, holder="r1", store=lambda: store, metrics=metrics, clock=lambda: later
        )
        other = MetastoreLock(engine).try_acquire(ARCHIVER_LOCK, owner="r2", lease_seconds=30)
        assert other is not None
        try:
            assert replica.run_once() is None  # r2 holds the lease: r1 skips its turn
        finally:
            other.release()
        assert _value(registry, "paimon_meta_archive_runs_total", outcome="skipped") == 1
        assert store.drops == []

        report = replica.run_once()
        assert report is not None and report.dropped == ["paimon_commit_events_w0"]
        assert _value(registry, "paimon_meta_archive_rows_total", catalog="main") == report.rows > 0
        assert _value(registry, "paimon_meta_archive_partitions_dropped_total") == 1
        assert _value(registry, "paimon_meta_archive_runs_total", outcome="ok") == 1
        assert _value(registry, "paimon_meta_archive_last_success_timestamp_seconds") > 0
        # the lease was given back: another replica may take it
        lease = MetastoreLock(engine).try_acquire(ARCHIVER_LOCK, owner="r2", lease_seconds=30)
        assert lease is not None
        lease.release()
    finally:
        catalog.close()


def test_an_outage_is_logged_and_retried_never_the_end_of_the_loop(
    clean_engine: object, caplog: pytest.LogCaptureFixture
) -> None:
    from sqlalchemy import Engine

    assert isinstance(clean_engine, Engine)
    Catalogs(clean_engine).create("c", "/tmp/never-written", options={EVENTS_RETENTION: "1 d"})
    calls = []

    def store() -> WindowStore:
        calls.append(1)
        raise MetastoreUnavailableError("the metastore is down")

    registry = CollectorRegistry()
    replica = BackgroundArchiver(
        clean_engine,
        holder="r1",
        interval_seconds=0.05,
        first_delay_seconds=0.0,
        store=store,
        metrics=ArchiveMetrics(registry),
    )
    replica.start()
    try:
        deadline = time.monotonic() + 60
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        replica.stop()
    assert len(calls) >= 3
    assert _value(registry, "paimon_meta_archive_runs_total", outcome="failed") >= 3
    assert "archiver pass failed" in caplog.text
