"""The demo end to end on a small scale: Postgres metastore, local warehouse, Spark writers."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimon_meta.catalog.metastore import connect
from paimon_meta.cli.demo import ACCOUNTS, EVENTS, run_demo

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


@pytest.mark.usefixtures("spark")
def test_demo_runs_and_checks_itself(clean_db: str, tmp_path: Path) -> None:
    lines: list[str] = []
    code = run_demo(
        metastore_url=clean_db, warehouse=str(tmp_path), rows_per_writer=4000, progress=lines.append
    )
    assert code == 0, "\n".join(lines)
    text = "\n".join(lines)
    assert "row-count check" in text and "-> OK" in text
    audit = lines[lines.index("commit audit (SELECT ... FROM paimon_commit_history):") + 2 :]
    assert sum("published" in line for line in audit) == 9  # 4 writers x 2 commits + 1 compaction
    with connect(clean_db, str(tmp_path)) as catalog:
        accounts = catalog.get_table(ACCOUNTS)
        latest = accounts.latest_snapshot()
        assert latest is not None and latest.commit_kind.value == "COMPACT"
        assert catalog.get_table(EVENTS).latest_snapshot() is not None
    # a second run replaces the demo tables
    assert (
        run_demo(
            metastore_url=clean_db,
            warehouse=str(tmp_path),
            rows_per_writer=2000,
            writers=2,
            progress=lines.append,
        )
        == 0
    )
