"""Snapshot expiration and orphan cleanup: what they delete, what they must never delete, and both
running while writers commit."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import CorruptMetadataError
from paimon_meta.io.local import LocalFileIO
from paimon_meta.ops.common import operator_identity
from paimon_meta.ops.expire import ExpireConfig, expire_snapshots, plan_end
from paimon_meta.ops.orphans import remove_orphan_files
from paimon_meta.ops.recovery import recover_table
from paimon_meta.ops.references import FilePaths, live_entries, read_metadata
from paimon_meta.table.table import FileStoreTable
from tests.ops.helpers import (
    FAST_LOCK,
    TABLE,
    Crash,
    assert_consistent,
    crash_at,
    create,
    make_old,
    prepare,
    read_keys,
    referenced_paths,
    unreferenced_manifest_files,
    write,
)

pytestmark = pytest.mark.postgres


def data_paths(table: FileStoreTable, snapshot_id: int) -> set[str]:
    md = read_metadata(table, table.snapshot_manager.snapshot(snapshot_id), missing_ok=False)
    paths = FilePaths(table)
    return {p for e in live_entries(table, md) for p in paths.data_file(e)}


def test_expire_deletes_exactly_the_files_only_expired_snapshots_used(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(5):  # each snapshot replaces the whole table: its delta deletes the previous files
        write(catalog, range(i * 10, i * 10 + 10), overwrite=True)
    table = catalog.get_table(TABLE)
    old_data = set().union(*(data_paths(table, s) for s in (1, 2, 3)))
    kept_data = data_paths(table, 4) | data_paths(table, 5)
    assert not old_data & kept_data

    dry = expire_snapshots(catalog, TABLE, retain_min=2, time_retained_ms=0, dry_run=True)
    assert dry.expired == [1, 2, 3] and set(dry.deleted_data_files) == old_data
    assert table.snapshot_manager.list_snapshot_ids() == [1, 2, 3, 4, 5]
    assert all(table.file_io.exists(p) for p in old_data)

    report = expire_snapshots(catalog, TABLE, retain_min=2, time_retained_ms=0)
    assert (report.expired, report.earliest_after) == ([1, 2, 3], 4)
    assert set(report.deleted_data_files) == old_data
    table = catalog.get_table(TABLE)
    assert table.snapshot_manager.list_snapshot_ids() == [4, 5]
    assert table.snapshot_manager.earliest_snapshot_id() == 4
    assert table.file_io.read(table.paths.earliest_hint_path) == b"4"
    assert not any(table.file_io.exists(p) for p in old_data)
    assert all(table.file_io.exists(p) for p in kept_data)
    assert unreferenced_manifest_files(table) == set()  # every list/manifest of 1..3 went too
    assert read_keys(catalog) == list(range(40, 50))
    assert read_keys(catalog, snapshot=4) == list(range(30, 40))  # time travel to the earliest kept
    assert_consistent(catalog)

    again = expire_snapshots(catalog, TABLE, retain_min=2, time_retained_ms=0)
    assert again.expired == [] and again.deleted_data_files == []


def test_expire_honours_time_retained_max_and_the_per_run_limit(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(6):
        write(catalog, [i])
    table = catalog.get_table(TABLE)
    now = table.snapshot_manager.snapshot(6).time_millis
    young = ExpireConfig(retain_min=1, time_retained_ms=3_600_000)
    assert plan_end(table, young, now_ms=now) == (1, 1, 6)  # every successor is younger than 1 h
    # retain-max forces expiry regardless of age; the limit caps one run.
    assert plan_end(
        table, ExpireConfig(retain_min=1, retain_max=2, time_retained_ms=3_600_000), now_ms=now
    ) == (
        1,
        5,
        6,
    )
    assert plan_end(table, ExpireConfig(retain_min=1, time_retained_ms=0, max_deletes=2), now_ms=now) == (
        1,
        3,
        6,
    )
    report = expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0, max_deletes=2)
    assert report.expired == [1, 2]
    assert read_keys(catalog) == list(range(6))  # appends: every row is still live
    assert_consistent(catalog)


def test_orphan_cleanup_keeps_referenced_young_and_in_flight_files(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(10))
    table = catalog.get_table(TABLE)
    # A commit in flight: its data files were written long ago, its writer is (say) paused.
    messages = prepare(table, range(100, 110))

    with crash_at("after_lock"), pytest.raises(Crash):
        table.committer_factory(table, "paused-writer").commit(messages, 1)  # type: ignore[misc]
    bucket0 = table.paths.bucket_path((), 0)
    in_flight = [
        table.file_io.join(table.paths.bucket_path((), m.bucket), f.file_name)
        for m in messages
        for f in m.data_increment.new_files
    ]
    in_flight_manifests = unreferenced_manifest_files(table)
    assert in_flight_manifests  # young: the age threshold is what protects them

    def plant(path: str, *, old: bool) -> str:
        table.file_io.write(path, b"garbage")
        if old:
            make_old([path])
        return path

    old_data = plant(f"{bucket0}/data-{uuid.uuid4()}-0.parquet", old=True)
    old_manifest = plant(f"{table.paths.manifest_dir}/manifest-{uuid.uuid4()}-0", old=True)
    old_tmp = plant(f"{table.paths.snapshot_dir}/.snapshot-9.{uuid.uuid4().hex}.tmp", old=True)
    young = plant(f"{bucket0}/data-{uuid.uuid4()}-0.parquet", old=False)
    foreign = plant(f"{table.path}/README", old=True)
    make_old(
        [*in_flight, table.paths.schema_path(0), table.paths.snapshot_path(1), table.paths.latest_hint_path]
    )
    make_old(sorted(referenced_paths(table)))

    dry = remove_orphan_files(catalog, TABLE, older_than_seconds=3600, dry_run=True)
    assert {o.path for o in dry.orphans} == {old_data, old_manifest, old_tmp}
    assert dry.deleted == [] and table.file_io.exists(old_data)

    report = remove_orphan_files(catalog, TABLE, older_than_seconds=3600)
    assert set(report.deleted) == {old_data, old_manifest, old_tmp}
    assert report.too_young >= 1 + len(in_flight_manifests)
    for path in [*in_flight, *in_flight_manifests, young, foreign, table.paths.schema_path(0)]:
        assert table.file_io.exists(path), path
    assert read_keys(catalog) == list(range(10))
    # The in-flight commit is still whole: recovery finishes it from its kept data files.
    assert [c.action for c in recover_table(catalog, TABLE, older_than_seconds=0).commits] == ["finished"]
    assert read_keys(catalog) == [*range(10), *range(100, 110)]
    assert_consistent(catalog)


def test_expire_and_orphan_cleanup_while_two_writers_commit(catalog: MetastoreCatalog) -> None:
    create(catalog, **{"snapshot.num-retained.min": "3", "snapshot.time-retained": "1 ms"})
    write(catalog, range(5))
    table = catalog.get_table(TABLE)
    bucket0 = table.paths.bucket_path((), 0)
    planted = [
        f"{bucket0}/data-{uuid.uuid4()}-0.parquet",
        f"{table.paths.manifest_dir}/manifest-{uuid.uuid4()}-0",
    ]
    for path in planted:
        table.file_io.write(path, b"garbage")
    make_old(planted)

    committed: list[int] = list(range(5))
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(5):
                keys = range(1000 * (n + 1) + 10 * i, 1000 * (n + 1) + 10 * i + 10)
                write(catalog, keys)
                committed.extend(keys)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    runs = 0
    while any(t.is_alive() for t in threads) or runs < 2:
        expire_snapshots(catalog, TABLE)
        # In-flight manifests are seconds old: the threshold (not 0) is what keeps them safe.
        remove_orphan_files(catalog, TABLE, older_than_seconds=600)
        runs += 1
        time.sleep(0.05)
    for t in threads:
        t.join(120)
    assert errors == []
    expire_snapshots(catalog, TABLE)

    assert read_keys(catalog) == sorted(committed)  # no committed row lost
    assert_consistent(catalog)  # no referenced file deleted, log == storage
    table = catalog.get_table(TABLE)
    ids = table.snapshot_manager.list_snapshot_ids()
    assert len(ids) == 3 and ids[-1] == 11  # 1 + 2 x 5 commits, 3 retained
    assert not any(table.file_io.exists(p) for p in planted)


@pytest.mark.s3
def test_expire_and_orphans_on_s3(clean_db: str, s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    catalog = paimon_meta.connect(clean_db, uri, **options, **FAST_LOCK)
    try:
        create(catalog)
        for i in range(3):
            write(catalog, range(i * 10, i * 10 + 10), overwrite=True)
        table = catalog.get_table(TABLE)
        planted = f"{table.paths.bucket_path((), 1)}/data-{uuid.uuid4()}-0.parquet"
        table.file_io.write(planted, b"garbage")
        report = expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0)
        assert report.expired == [1, 2] and report.deleted_data_files
        orphans = remove_orphan_files(catalog, TABLE, older_than_seconds=0)  # no writer is running
        assert orphans.deleted == [planted]
        assert read_keys(catalog) == list(range(20, 30))
        assert_consistent(catalog)
    finally:
        catalog.close()


def _history(catalog: MetastoreCatalog) -> list[dict[str, object]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT operation, outcome, dry_run, operator, settings, result, elapsed_ms "
                "FROM paimon_maintenance_history WHERE table_identifier = :t ORDER BY started_at"
            ),
            {"t": TABLE},
        )
        return [dict(r._mapping) for r in rows]


def test_maintenance_runs_are_recorded(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(4):
        write(catalog, range(i * 10, i * 10 + 10), overwrite=True)
    expire_snapshots(catalog, TABLE, retain_min=2, time_retained_ms=0, dry_run=True)
    report = expire_snapshots(catalog, TABLE, retain_min=2, time_retained_ms=0)
    orphans = remove_orphan_files(catalog, TABLE, older_than_seconds=0, dry_run=True)

    dry, real, orphan_run = _history(catalog)
    assert (dry["operation"], dry["outcome"], dry["dry_run"]) == ("expire_snapshots", "finished", True)
    assert (real["operation"], real["outcome"], real["dry_run"]) == ("expire_snapshots", "finished", False)
    assert real["operator"] == operator_identity()
    settings, result = real["settings"], real["result"]
    assert isinstance(settings, dict) and settings["retain_min"] == 2
    assert isinstance(result, dict)
    assert (result["expired"], result["expired_first"], result["expired_last"]) == (2, 1, 2)
    assert result["earliest_after"] == 3
    assert result["deleted_data_files"] == len(report.deleted_data_files) > 0
    assert isinstance(real["elapsed_ms"], float) and real["elapsed_ms"] >= 0
    assert (orphan_run["operation"], orphan_run["outcome"]) == ("remove_orphan_files", "finished")
    assert isinstance(orphan_run["result"], dict)
    assert orphan_run["result"]["orphans"] == len(orphans.orphans)


def test_a_failed_maintenance_run_is_recorded_with_its_error(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(3):
        write(catalog, range(i * 10, i * 10 + 10))
    table = catalog.get_table(TABLE)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    (Path(table.path) / "manifest" / latest.base_manifest_list).write_bytes(b"not avro")

    with pytest.raises(CorruptMetadataError):
        expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0)

    [run] = _history(catalog)
    assert (run["outcome"], run["dry_run"]) == ("failed", False)
    assert isinstance(run["result"], dict) and run["result"]["error"] == "CorruptMetadataError"
    with pytest.raises(DBAPIError, match="append-only"), catalog.engine.begin() as conn:
        conn.execute(text("DELETE FROM paimon_maintenance_events"))


def test_expire_keeps_what_a_branch_reads(catalog: MetastoreCatalog) -> None:
    """A branch made from a snapshot (as Java copies it) reads that snapshot's manifest lists, which main's
    expiration would otherwise delete with the snapshot: they are kept, and the branch still reads."""
    table = create(catalog)
    for keys in ([1], [2], [3]):
        write(catalog, keys)
    table = catalog.get_table(TABLE)
    branch = table.file_io.join(table.path, "branch", "branch-b1")
    for sub, name in (("schema", "schema-0"), ("snapshot", "snapshot-1")):
        source = table.file_io.join(table.path, sub, name)
        table.file_io.create_if_absent(table.file_io.join(branch, sub, name), table.file_io.read(source))
    report = expire_snapshots(catalog, TABLE, retain_min=1, retain_max=1, time_retained_ms=0)
    assert report.expired == [1, 2]
    assert table.snapshot_manager.list_snapshot_ids() == [3]
    on_branch = catalog.get_table(TABLE).branch("b1").new_read_builder()
    rows = on_branch.new_read().to_arrow(on_branch.new_scan().plan().splits())
    assert rows.column("k").to_pylist() == [1]


class _DeletionWatch:
    """Wraps ``LocalFileIO.delete``: notes for each file deleted whether the table's lock was held, and at
    the first deletion of a data file makes a user commit (through a catalog that waits at most 3 s for
    the lock): it must publish while the maintenance run is still deleting."""

    def __init__(self, catalog: MetastoreCatalog, clean_db: str, warehouse: str) -> None:
        self.catalog = catalog
        self.lock_id = catalog.registry.lock_id("db", "t")
        self.writer = paimon_meta.connect(
            clean_db, warehouse, **{**FAST_LOCK, "lock.acquire-timeout-seconds": "3"}
        )
        self.deleted: list[tuple[str, bool]] = []
        self.user_snapshot: int | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = LocalFileIO.delete

        def delete(io: LocalFileIO, path: str) -> None:
            held = self.catalog.lock.get_lock(self.lock_id) is not None
            self.deleted.append((path, held))
            if "/bucket-" in path and self.user_snapshot is None:
                self.user_snapshot = -1  # (the commit below deletes nothing, but never recurse)
                self.user_snapshot = write(self.writer, [999])
            original(io, path)

        monkeypatch.setattr(LocalFileIO, "delete", delete)

    def held_while_deleting(self, part: str) -> set[bool]:
        return {held for path, held in self.deleted if part in path}


def test_expiration_deletes_files_after_releasing_the_lock_so_a_commit_waits_for_one_publish(
    catalog: MetastoreCatalog, clean_db: str, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(catalog)
    for i in range(5):
        write(catalog, range(i * 10, i * 10 + 10), overwrite=True)
    watch = _DeletionWatch(catalog, clean_db, warehouse)
    watch.install(monkeypatch)
    try:
        report = expire_snapshots(catalog, TABLE, retain_min=2, time_retained_ms=0)
    finally:
        monkeypatch.undo()
        watch.writer.close()
    assert report.expired == [1, 2, 3] and report.deleted_data_files
    # the publish (the expired snapshot files) under the lock; data files and manifests after it
    assert watch.held_while_deleting("/snapshot/snapshot-") == {True}
    assert watch.held_while_deleting("/bucket-") == {False}
    assert watch.held_while_deleting("/manifest/") == {False}
    # the user's commit went through while the expiration was deleting files
    assert watch.user_snapshot == 6
    assert read_keys(catalog) == [*range(40, 50), 999]
    table = catalog.get_table(TABLE)
    assert not any(table.file_io.exists(p) for p in report.deleted_data_files)
    assert unreferenced_manifest_files(table) == set()
    assert_consistent(catalog)


def test_orphan_cleanup_deletes_after_releasing_the_lock(
    catalog: MetastoreCatalog, clean_db: str, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(catalog)
    write(catalog, range(10))
    table = catalog.get_table(TABLE)
    orphan = f"{table.paths.bucket_path((), 0)}/data-{uuid.uuid4()}-0.parquet"
    table.file_io.write(orphan, b"garbage")
    make_old([orphan])
    watch = _DeletionWatch(catalog, clean_db, warehouse)
    watch.install(monkeypatch)
    try:
        report = remove_orphan_files(catalog, TABLE, older_than_seconds=3600)
    finally:
        monkeypatch.undo()
        watch.writer.close()
    assert report.deleted == [orphan]
    assert watch.deleted == [(orphan, False)]
    assert watch.user_snapshot == 2
    assert read_keys(catalog) == [*range(10), 999]
    assert_consistent(catalog)
