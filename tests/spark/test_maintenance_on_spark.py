"""Large compactions run by the maintenance workers as the Spark compaction job (maintenance/spark.py):
the run is recorded like an in-process one (engine ``spark``), the table's files are merged and every row
reads back. (A job that fails: tests/maintenance/test_actions.py, without starting Spark.)"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.maintenance.options import COMPACTION_SPARK_MIN_BYTES
from paimon_meta.maintenance.spark import SparkCompaction
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from tests.ops.helpers import FAST_LOCK

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
#: The child job's Spark: one local executor thread, no UI (the machine has 2 cores).
SPARK = SparkCompaction(
    "local[1]",
    python=sys.executable,
    timeout_seconds=900,
    env={"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable), "SPARK_LOCAL_IP": "127.0.0.1"},
)


def _runs(catalog: MetastoreCatalog) -> list[dict[str, Any]]:
    with catalog.engine.connect() as conn:
        return [
            dict(r)
            for r in conn.execute(
                text(
                    "SELECT payload FROM paimon_maintenance_events WHERE operation = 'maintain' "
                    "AND event_type <> 'started' AND payload ->> 'kind' = 'compact' ORDER BY event_id"
                )
            ).scalars()
        ]


def _files(catalog: MetastoreCatalog, identifier: str) -> list[str]:
    splits = catalog.get_table(identifier).new_read_builder().new_scan().plan().splits()
    return sorted(f.file_name for s in splits for f in s.files)


def _keys(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    builder = catalog.get_table(identifier).new_read_builder()
    return sorted(builder.new_read().to_arrow(builder.new_scan().plan().splits()).column("k").to_pylist())


def _small_files(catalog: MetastoreCatalog, identifier: str, commits: int) -> None:
    catalog.create_table(
        identifier,
        SCHEMA,
        options={
            "bucket": "1",
            "bucket-key": "k",
            "compaction.min.file-num": "3",
            COMPACTION_SPARK_MIN_BYTES: "1 b",
        },
    )
    for i in range(commits):
        builder = catalog.get_table(identifier).new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(
            pa.table({"k": pa.array([i * 10, i * 10 + 1], pa.int64()), "v": [f"r{i}", "x"]}, SCHEMA)
        )
        builder.new_commit().commit(write.prepare_commit())
        write.close()


@pytest.fixture
def catalog(clean_db: str, tmp_path: Any) -> Any:
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **FAST_LOCK)
    try:
        yield cat
    finally:
        cat.close()


def test_a_large_compaction_runs_as_the_spark_job(catalog: MetastoreCatalog) -> None:
    _small_files(catalog, "db.t", 4)
    before = _files(catalog, "db.t")
    assert len(before) == 4
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0, spark=SPARK))
    maintainer.scheduler.tick(sweep=True)
    assert maintainer.drain() >= 1
    [done] = [r for r in _runs(catalog) if r["outcome"] == "done"]
    assert done["engine"] == "spark" and done["master"] == "local[1]", done
    assert done["compacted_files"] == 4 and done["written_files"] == 1 and done["snapshot_ids"]
    after = _files(catalog, "db.t")
    assert len(after) == 1 and not set(after) & set(before)
    assert _keys(catalog, "db.t") == sorted([i * 10 for i in range(4)] + [i * 10 + 1 for i in range(4)])
    # the COMPACT snapshot is the job's, committed through the metastore like any writer's
    latest = catalog.get_table("db.t").latest_snapshot()
    assert latest is not None and latest.commit_kind.value == "COMPACT"
