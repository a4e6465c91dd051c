"""The archive twins in Spark SQL (``spark_jobs/audit_archive.py``) answer as the Python twins do over the
same archive, which answer as the live views did (tests/archive/test_archiver.py): the one Spark test of
the archive."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from paimon_meta.archive.archiver import Archiver
from paimon_meta.archive.table import IDENTIFIER
from paimon_meta.archive.twins import (
    CONFLICT_COLUMNS,
    HISTORY_COLUMNS,
    RETRY_COLUMNS,
    commit_conflicts,
    commit_history,
    commit_retries,
)
from spark_jobs.audit_archive import register_archive_views
from tests.archive.helpers import archived_rows, assert_same_rows, db_now, make_catalog, seed
from tests.archive.window_store import WindowStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


def _spark_rows(spark: SparkSession, view: str, key: str) -> dict[Any, dict[str, Any]]:
    rows = [r.asDict() for r in spark.sql(f"SELECT * FROM {view}").collect()]  # noqa: S608 (a known view)
    for r in rows:
        if "details" in r:
            r["details"] = json.loads(r["details"])  # the JSON text the archive keeps
    return {r[key]: r for r in rows}


def test_spark_twins_answer_as_the_python_twins(spark: SparkSession, clean_db: str, tmp_path: Path) -> None:
    catalog = make_catalog(clean_db, str(tmp_path / "wh"), "main", retention="1 d")
    try:
        seed(catalog, "db.t", 0)
        boundary = db_now(catalog.engine)
        seed(catalog, "db.t", 100)
        store = WindowStore(catalog.engine, [boundary])
        Archiver(catalog.engine, store, operator="t", clock=lambda: boundary + timedelta(days=2)).run()
        archived = archived_rows(catalog)
        views = register_archive_views(
            spark, catalog.get_table(IDENTIFIER), io_options=catalog.file_io_options
        )
        assert views[1:] == [
            "paimon_commit_history_archive",
            "paimon_commit_conflicts_archive",
            "paimon_commit_retries_archive",
        ]
        for view, twin, key, columns in (
            ("paimon_commit_history_archive", commit_history, "commit_id", HISTORY_COLUMNS),
            ("paimon_commit_conflicts_archive", commit_conflicts, "event_id", CONFLICT_COLUMNS),
            ("paimon_commit_retries_archive", commit_retries, "event_id", RETRY_COLUMNS),
        ):
            expected = {r[key]: r for r in twin(archived)}
            assert expected, view
            got = _spark_rows(spark, view, key)
            assert list(got[next(iter(got))]) == list(columns)
            assert_same_rows(expected, got, columns)
    finally:
        catalog.close()
