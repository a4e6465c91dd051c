"""Early full compaction through the maintenance service: a primary-key table whose bucket weighs less than
``compaction.total-size-threshold`` (written as Java writes the option: ``MemorySize.toString``, ``1 mb``) is
fully compacted by the worker when Java's writer would, two runs below the sorted-run trigger; the same
runs without the option, or above the threshold, owe nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import MaintenanceKind
from paimon_meta.maintenance.debt import bucket_files
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.table.mergetree.universal import level_sorted_runs
from tests.ops.helpers import read_keys

pytestmark = pytest.mark.postgres

#: no lingering for a next commit after a job compacted (the tests commit nothing meanwhile)
NO_LINGER = {"bucket": "1", "paimon-meta.maintenance.compaction.linger": "0 s"}


def _create(catalog: MetastoreCatalog, identifier: str, options: dict[str, str]) -> None:
    catalog.create_table(
        identifier,
        pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())]),
        primary_keys=["k"],
        options={**NO_LINGER, **options},
    )


def _commit(catalog: MetastoreCatalog, identifier: str, keys: range) -> None:
    table = catalog.get_table(identifier)
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(pa.table({"k": pa.array(keys, pa.int32()), "v": [f"v{k}" for k in keys]}))
    builder.new_commit().commit(w.prepare_commit())
    w.close()


def _levels(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    (bucket,) = catalog.get_table(identifier).new_read_builder().new_scan().plan().splits()
    return [r.level for r in level_sorted_runs(bucket.files)]


def test_a_bucket_below_the_total_size_threshold_is_fully_compacted(catalog: MetastoreCatalog) -> None:
    _create(catalog, "db.small", {"compaction.total-size-threshold": "1 mb"})
    _create(catalog, "db.plain", {})
    _create(catalog, "db.large", {"compaction.total-size-threshold": "100 bytes"})
    for identifier in ("db.small", "db.plain", "db.large"):
        _commit(catalog, identifier, range(0, 50))
        _commit(catalog, identifier, range(50, 60))
        assert _levels(catalog, identifier) == [0, 0]  # two runs: below the trigger (5)
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.scheduler.tick(sweep=True)
    # only the table whose bucket weighs less than its threshold owes a compaction
    assert [(j.table_identifier, j.kind) for j in maintainer.queue.jobs()] == [
        ("db.small", MaintenanceKind.COMPACT)
    ]
    (bucket,) = bucket_files(catalog.get_table("db.small"))
    assert bucket.picked and bucket.bytes < 1 << 20
    maintainer.drain()
    # Java's early full compaction: every run into the max level
    assert _levels(catalog, "db.small") == [4]
    assert _levels(catalog, "db.plain") == _levels(catalog, "db.large") == [0, 0]
    assert read_keys(catalog, identifier="db.small") == list(range(60))
    with catalog.engine.connect() as conn:
        (run,) = conn.execute(
            text(
                "SELECT payload FROM paimon_maintenance_events WHERE operation = 'maintain' "
                "AND event_type <> 'started' AND payload ->> 'kind' = 'compact'"
            )
        ).scalars()
    assert run["outcome"] == "done" and run["files_before"] == 2 and run["rounds"] == 1
    # one run: nothing more is due; the next commit makes two runs, fully compacted again
    maintainer.scheduler.tick(sweep=True)
    assert maintainer.queue.jobs() == []
    _commit(catalog, "db.small", range(60, 70))
    maintainer.drain()
    assert _levels(catalog, "db.small") == [4]
    assert read_keys(catalog, identifier="db.small") == list(range(70))
