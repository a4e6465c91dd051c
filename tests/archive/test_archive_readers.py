"""Another engine reads the archive: paimon-rust 0.4.0 (its own venv) reads ``system.commit_log`` after an
archive, with our columns and exactly our rows (the one interop test of the archive)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from paimon_meta.archive.archiver import Archiver
from paimon_meta.archive.table import IDENTIFIER
from tests.archive.helpers import archived_rows, db_now, live_events, make_catalog, seed
from tests.archive.window_store import WindowStore
from tests.interop.rust_reader import assert_rust_reads_as_we_do, rust_read_tables

pytestmark = [pytest.mark.postgres, pytest.mark.interop]


def test_paimon_rust_reads_the_archive(clean_db: str, tmp_path: Path, rust_python: Path) -> None:
    catalog = make_catalog(clean_db, str(tmp_path / "wh"), "main", retention="1 d")
    try:
        seed(catalog, "db.t", 0)
        boundary = db_now(catalog.engine)
        archived = [e["event_id"] for e in live_events(catalog.engine)]
        seed(catalog, "db.t", 100)
        store = WindowStore(catalog.engine, [boundary])
        Archiver(catalog.engine, store, operator="t", clock=lambda: boundary + timedelta(days=2)).run()
        assert [r["event_id"] for r in archived_rows(catalog)] == archived
        path = catalog.get_table(IDENTIFIER).path.removeprefix("file://")
        (read,) = rust_read_tables(rust_python, [path], tmp_path / "rust")
        assert_rust_reads_as_we_do(read, path)
    finally:
        catalog.close()
