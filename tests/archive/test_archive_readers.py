"""Other engines read the archive: Java Paimon 0.9 and 1.0, pypaimon 2.1.0 and paimon-rust 0.4.0 (each in its
own JVM or venv) read ``system.commit_log`` after an archive, with our columns and exactly our rows (the one
interop test of the archive: one archive, every reader)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from paimon_meta.archive.archiver import Archiver
from paimon_meta.archive.table import IDENTIFIER
from tests.archive.helpers import archived_rows, db_now, live_events, make_catalog, seed
from tests.archive.window_store import WindowStore
from tests.interop.canonical import assert_java_reads_as_we_do
from tests.interop.java_env import JavaHarness
from tests.interop.pypaimon_reader import assert_pypaimon_reads_as_we_do, pypaimon_read_tables
from tests.interop.rust_reader import assert_rust_reads_as_we_do, rust_read_tables

pytestmark = [pytest.mark.postgres, pytest.mark.interop]


def test_java_pypaimon_and_rust_read_the_archive(
    clean_db: str,
    tmp_path: Path,
    rust_python: Path,
    pypaimon_python: Path,
    java_harnesses: dict[str, JavaHarness],
) -> None:
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
        (py_read,) = pypaimon_read_tables(pypaimon_python, [path], tmp_path / "py")
        assert_pypaimon_reads_as_we_do(py_read, path)
        for version, harness in java_harnesses.items():
            (java_read,) = harness.read_tables([path])
            assert_java_reads_as_we_do(java_read, path, version)
    finally:
        catalog.close()
