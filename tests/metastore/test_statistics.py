"""Partition statistics kept by the commit path equal what the manifests say, through appends,
overwrites and compaction; a snapshot published outside the metastore marks them incomplete."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.metastore.statistics import list_partitions, table_statistics
from paimon_meta.table.compact import compact
from paimon_meta.table.table import FileStoreTable

pytestmark = pytest.mark.postgres


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    with paimon_meta.connect(clean_db, str(tmp_path / "warehouse")) as cat:
        yield cat


SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("p", pa.string(), nullable=False),
        ("v", pa.string()),
    ]
)


def _write(table: FileStoreTable, keys: list[int], p: str, *, overwrite: bool = False) -> None:
    wb = table.new_batch_write_builder()
    if overwrite:
        wb = wb.overwrite()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(
        pa.table({"k": pa.array(keys, pa.int64()), "p": [p] * len(keys), "v": ["x"] * len(keys)})
    )
    commit.commit(write.prepare_commit())
    write.close()


def _from_manifests(table: FileStoreTable) -> dict[str, tuple[int, int, int]]:
    latest = table.latest_snapshot()
    assert latest is not None
    out: dict[str, tuple[int, int, int]] = {}
    scan = table.new_read_builder().with_snapshot(latest.id).new_scan().file_store_scan
    for e in scan.plan_files():
        (p,) = scan.partition_values(e.partition)
        rows, size, files = out.get(p, (0, 0, 0))
        out[p] = (rows + e.file.row_count, size + e.file.file_size, files + 1)
    return out


def _kept(catalog: MetastoreCatalog) -> dict[str, tuple[int, int, int]]:
    row = catalog.table_row("db.t")
    return {
        s.spec["p"]: (s.record_count, s.file_size_in_bytes, s.file_count)
        for s in list_partitions(catalog.engine, row.table_id)
    }


def test_statistics_follow_appends_overwrites_and_compaction(catalog: MetastoreCatalog) -> None:
    table = catalog.create_table(
        "db.t", SCHEMA, partition_keys=["p"], primary_keys=["k", "p"], options={"bucket": "1"}
    )
    _write(table, [1, 2, 3], "a")
    _write(table, [4], "b")
    _write(table, [1, 5], "a")  # an update of k=1 and a new key
    assert _kept(catalog) == _from_manifests(catalog.get_table("db.t"))
    _write(catalog.get_table("db.t"), [9], "a", overwrite=True)  # dynamic: replaces partition a only
    assert (
        _kept(catalog)
        == _from_manifests(catalog.get_table("db.t"))
        == {
            "a": _from_manifests(catalog.get_table("db.t"))["a"],
            "b": _from_manifests(catalog.get_table("db.t"))["b"],
        }
    )
    assert _kept(catalog)["a"][0] == 1
    _write(catalog.get_table("db.t"), [9, 10], "a")  # k=9 again: two files, one key twice
    compact(catalog.get_table("db.t"))  # merges the key: the partition loses a record and a file
    assert _kept(catalog) == _from_manifests(catalog.get_table("db.t"))
    assert _kept(catalog)["a"][0] == 2 and _kept(catalog)["a"][2] == 1
    stats = table_statistics(catalog.engine, catalog.table_row("db.t").table_id)
    assert stats.complete and stats.record_count == 3 and stats.file_count == 2


def test_a_snapshot_published_elsewhere_marks_them_incomplete(catalog: MetastoreCatalog) -> None:
    table = catalog.create_table(
        "db.t", SCHEMA, partition_keys=["p"], options={"bucket": "1", "bucket-key": "k"}
    )
    _write(table, [1], "a")
    row = catalog.table_row("db.t")
    assert table_statistics(catalog.engine, row.table_id).complete
    _write(paimon_meta.open_table(table.path), [2], "b")  # storage-guarded: no metastore
    _write(catalog.get_table("db.t"), [3], "a")  # reconciles the other snapshot, then commits
    assert not table_statistics(catalog.engine, row.table_id).complete


def test_deltas_apply_only_when_the_pointer_moved_to_their_snapshot(catalog: MetastoreCatalog) -> None:
    from paimon_meta.metastore.statistics import apply_statements
    from paimon_meta.model.partition_statistics import PartitionDelta

    table = catalog.create_table(
        "db.t", SCHEMA, partition_keys=["p"], options={"bucket": "1", "bucket-key": "k"}
    )
    _write(table, [1], "a")  # pointer at 1, statistics complete up to 1
    row = catalog.table_row("db.t")
    before = _kept(catalog)
    delta = PartitionDelta({"p": "a"}, 100, 100, 1, 1)
    # as in a publishing transaction whose compare-and-set did not move the pointer to snapshot 2
    with catalog.engine.begin() as conn:
        for statement in apply_statements(row.table_id, 2, [delta]):
            assert isinstance(statement, tuple)  # plain (sql, params), no prepared statement
            conn.exec_driver_sql(statement[0], dict(statement[1]))
    assert _kept(catalog) == before
    stats = table_statistics(catalog.engine, row.table_id)
    assert stats.complete and stats.record_count == 1
