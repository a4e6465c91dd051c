"""``serve`` runs the archiver over the real partitioned log in the background, counts its passes on
/metrics, and a drain stops it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.archive.helpers import make_catalog, seed

pytestmark = pytest.mark.postgres


def test_serve_archives_in_the_background(clean_db: str, tmp_path: Path) -> None:
    catalog = make_catalog(clean_db, str(tmp_path / "wh"), "main", retention="1 d")
    seed(catalog, "db.t", 0)
    state = ServiceState(ServiceSettings(archive_interval_seconds=0.2), catalog)
    try:
        archiver = state.archiver
        assert archiver is not None
        deadline = time.monotonic() + 60
        while archiver.last_report is None:
            assert time.monotonic() < deadline, "no archiver pass within 60 s"
            time.sleep(0.05)
        report = archiver.last_report
        # the current partition holds this test's events: not due, kept, nothing archived or dropped
        assert report.archived == [] and report.dropped == [] and report.errors == {}
        assert any("catalog main not due" in why for why in report.kept.values())
        ok = state.metrics.registry.get_sample_value("paimon_meta_archive_runs_total", {"outcome": "ok"})
        assert ok is not None and ok >= 1
        state.begin_drain()
        assert archiver._thread is not None
        archiver._thread.join(30)
        assert not archiver._thread.is_alive()
    finally:
        state.close()
        catalog.close()
