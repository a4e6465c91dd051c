"""Java Paimon 0.9 and 1.0, pypaimon 2.1.0 and paimon-rust 0.4.0 read tables after the service's
maintenance compacted them and expired their snapshots, exactly as we do."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.maintenance.debt import bucket_files
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.table.compact import compact
from tests.interop.arrow_reader import assert_reads_as_we_do
from tests.interop.canonical import assert_java_reads_as_we_do
from tests.interop.java_env import JavaHarness
from tests.interop.pypaimon_reader import assert_pypaimon_reads_as_we_do, pypaimon_read_tables
from tests.interop.rust_reader import rust_read_tables
from tests.ops.helpers import FAST_LOCK

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("p", pa.string()), ("v", pa.string())])
RETENTION = {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"}


def _commit(catalog: MetastoreCatalog, name: str, data: pa.Table) -> None:
    table = catalog.get_table(name)
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(data)
    builder.new_commit().commit(write.prepare_commit())


def _maintained_tables(clean_db: str, warehouse: str) -> list[str]:
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        catalog.create_table(
            "db.pk",
            SCHEMA,
            primary_keys=["k", "p"],
            partition_keys=["p"],
            options={"bucket": "2", "num-sorted-run.compaction-trigger": "3", **RETENTION},
        )
        catalog.create_table(
            "db.append",
            SCHEMA,
            options={"bucket": "1", "bucket-key": "k", "compaction.min.file-num": "3", **RETENTION},
        )
        for i in range(8):
            for name in ("db.pk", "db.append"):
                table = catalog.get_table(name)
                builder = table.new_batch_write_builder()
                write = builder.new_write()
                # updates of earlier keys too: the merge must keep the newest
                write.write_arrow(
                    pa.table(
                        {"k": pa.array([i, i // 2], pa.int64()), "p": ["a", "b"], "v": [f"v{i}", f"u{i}"]}
                    )
                )
                builder.new_commit().commit(write.prepare_commit())
        # a table the universal pick leaves on two levels: a large run at the max level (4) and the
        # newer runs merged above it (3), updates and a delete of keys below included
        catalog.create_table(
            "db.levels",
            SCHEMA,
            primary_keys=["k", "p"],
            options={"bucket": "1", "num-sorted-run.compaction-trigger": "3"},
        )
        base = {"k": list(range(3000)), "p": ["a"] * 3000, "v": [f"base{k}" for k in range(3000)]}
        _commit(catalog, "db.levels", pa.table(base, schema=SCHEMA))
        compact(catalog.get_table("db.levels"))  # one run at the max level, as an operator's compaction
        maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
        _commit(
            catalog, "db.levels", pa.table({"k": [1, 2], "p": ["a", "a"], "v": ["x1", "x2"]}, schema=SCHEMA)
        )
        _commit(
            catalog, "db.levels", pa.table({"k": [3, 3], "p": ["a", "b"], "v": ["x3", "n3"]}, schema=SCHEMA)
        )
        _commit(
            catalog,
            "db.levels",
            pa.table(
                {
                    "k": pa.array([5, 2], pa.int64()),
                    "p": ["a", "a"],
                    "v": pa.array([None, "y2"], pa.string()),
                    "_row_kind": ["-D", "+U"],
                }
            ),
        )
        maintainer.drain()
        with catalog.engine.connect() as conn:
            done = set(
                conn.execute(
                    text(
                        "SELECT table_identifier || ':' || (payload ->> 'kind') "
                        "FROM paimon_maintenance_events WHERE operation = 'maintain' "
                        "AND payload ->> 'outcome' = 'done'"
                    )
                ).scalars()
            )
        assert {
            "db.pk:compact",
            "db.pk:expire_snapshots",
            "db.append:compact",
            "db.append:expire_snapshots",
        } <= done
        splits = catalog.get_table("db.levels").new_read_builder().new_scan().plan().splits()
        assert {f.level for s in splits for f in s.files} == {3, 4}
        paths = []
        for name in ("db.pk", "db.append", "db.levels"):
            table = catalog.get_table(name)
            assert max(b.sorted_runs for b in bucket_files(table)) < 3 or name == "db.append"
            if name == "db.levels":
                continue  # not expired: too few snapshots
            assert table.snapshot_manager.earliest_snapshot_id() not in (None, 1)
            paths.append(table.path)
        return paths
    finally:
        catalog.close()


def test_java_pypaimon_and_rust_read_compacted_and_expired_tables(
    clean_db: str,
    tmp_path: Path,
    pypaimon_python: Path,
    rust_python: Path,
    java_harnesses: dict[str, JavaHarness],
) -> None:
    paths = _maintained_tables(clean_db, str(tmp_path / "warehouse"))
    for version, harness in java_harnesses.items():
        for java_read, path in zip(harness.read_tables(paths), paths):
            assert_java_reads_as_we_do(java_read, path, version)
    for read, path in zip(pypaimon_read_tables(pypaimon_python, paths, tmp_path / "py"), paths):
        assert_pypaimon_reads_as_we_do(read, path)
    for read, path in zip(rust_read_tables(rust_python, paths, tmp_path / "rust"), paths):
        assert_reads_as_we_do(read, path, "paimon-rust 0.4.0")
