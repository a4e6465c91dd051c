"""What maintenance does by Paimon's table options: snapshot expiration (options as Java writes them),
partition TTL by the partitions' values, orphan cleanup that keeps the files of a commit in flight, and a
worker killed mid-compaction whose job another worker takes over once its lease ran out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.crashpoints import CRASH_AT_ENV, CRASH_EXIT_CODE
from paimon_meta.db.models import MaintenanceKind
from paimon_meta.errors import ValidationError
from paimon_meta.maintenance.debt import bucket_files, last_period_start, period_tag_name
from paimon_meta.maintenance.options import MaintenanceOptions
from paimon_meta.maintenance.queue import new_owner
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.metastore.feed import FeedFilter, read_feed
from paimon_meta.ops.recovery import recover_table
from paimon_meta.ops.references import read_entries  # noqa: F401 - the module the in-flight check uses
from paimon_meta.table.consumers import ConsumerManager
from paimon_meta.table.mergetree.universal import level_sorted_runs
from paimon_meta.table.tags import TagManager
from tests.ops.helpers import (
    TABLE,
    Crash,
    assert_consistent,
    crash_at,
    create,
    make_old,
    prepare,
    read_keys,
    referenced_paths,
    write,
)

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]


def _runs(catalog: MetastoreCatalog, kind: str) -> list[dict[str, object]]:
    with catalog.engine.connect() as conn:
        return [
            dict(r)
            for r in conn.execute(
                text(
                    "SELECT payload FROM paimon_maintenance_events WHERE operation = 'maintain' "
                    "AND event_type <> 'started' AND payload ->> 'kind' = :kind ORDER BY event_id"
                ),
                {"kind": kind},
            ).scalars()
        ]


def test_snapshots_expire_by_the_tables_options(catalog: MetastoreCatalog) -> None:
    # as Java writes them: durations with units and spaces
    create(
        catalog,
        **{
            "snapshot.num-retained.min": "2",
            "snapshot.num-retained.max": "4",
            "snapshot.time-retained": "1 h",
        },
    )
    for k in range(8):
        write(catalog, [k])
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.drain()
    snapshots = catalog.get_table(TABLE).snapshot_manager
    earliest, latest = snapshots.earliest_snapshot_id(), snapshots.latest_snapshot_id()
    assert earliest is not None and latest is not None and latest >= 8
    assert latest - earliest + 1 == 4  # snapshot.num-retained.max
    assert read_keys(catalog) == list(range(8))
    runs = _runs(catalog, "expire_snapshots")
    assert runs and all(r["outcome"] in ("done", "nothing_due") for r in runs)
    assert sum(int(str(r.get("expired", 0))) for r in runs) == earliest - 1
    assert_consistent(catalog)
    # within the bounds and younger than time-retained: nothing more is queued
    maintainer.drain()
    assert snapshots.earliest_snapshot_id() == earliest
    assert len(_runs(catalog, "expire_snapshots")) == len(runs)


def test_partitions_expire_by_their_values(catalog: MetastoreCatalog) -> None:
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("dt", pa.string())])
    catalog.create_table(
        "db.events",
        schema,
        partition_keys=["dt"],
        options={
            "bucket": "1",
            "bucket-key": "k",
            "partition.expiration-time": "7 d",
            "partition.timestamp-formatter": "yyyyMMdd",
        },
    )
    today = date.today().strftime("%Y%m%d")
    old = (date.today() - timedelta(days=30)).strftime("%Y%m%d")
    table = catalog.get_table("db.events")
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(pa.table({"k": pa.array([1, 2, 3], pa.int32()), "dt": [old, old, today]}))
    builder.new_commit().commit(w.prepare_commit())

    Maintainer(catalog, MaintainerSettings(workers=0)).drain()
    reader = catalog.get_table("db.events").new_read_builder()
    got = reader.new_read().to_arrow(reader.new_scan().plan().splits())
    assert sorted(zip(got.column("k").to_pylist(), got.column("dt").to_pylist())) == [(3, today)]
    (run,) = _runs(catalog, "expire_partitions")
    assert run["expired_partitions"] == [{"dt": old}]
    # the run is on the change feed: kind, table, outcome, duration, files before and after
    # (the feed shows a transaction's events once every older transaction of the server ended: wait)
    deadline = time.monotonic() + 120
    while True:
        events, _ = read_feed(
            catalog.engine,
            catalog_key=catalog.registry.catalog_key,
            limit=1000,
            keep=FeedFilter(kinds=("maintain.finished",)),
        )
        found = [e for e in events if e.data["payload"]["kind"] == "expire_partitions"]
        if found:
            break
        assert time.monotonic() < deadline, "the run never reached the change feed"
        time.sleep(0.5)
    (finished,) = found
    assert finished.subject == "db.events" and finished.log == "maintenance"
    payload = finished.data["payload"]
    assert payload["outcome"] == "done" and payload["files_before"] == 2 and payload["files_after"] == 1
    assert payload["duration_ms"] >= 0


def test_orphan_cleanup_keeps_the_files_of_a_commit_in_flight(catalog: MetastoreCatalog) -> None:
    create(catalog, **{"paimon-meta.maintenance.orphan-cleanup.older-than": "1 h"})
    write(catalog, range(5))
    table = catalog.get_table(TABLE)
    messages = prepare(table, range(100, 105))
    with crash_at("after_lock"), pytest.raises(Crash):
        table.committer_factory(table, "paused-writer").commit(messages, 1)  # type: ignore[misc]
    in_flight = [
        table.file_io.join(table.paths.bucket_path((), m.bucket), f.file_name)
        for m in messages
        for f in m.data_increment.new_files
    ]
    orphan = f"{table.paths.bucket_path((), 0)}/data-{uuid.uuid4()}-0.parquet"
    table.file_io.write(orphan, b"garbage")
    make_old([*in_flight, orphan, *referenced_paths(table)])

    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.queue.enqueue(
        catalog.table_row(TABLE).table_id, TABLE, MaintenanceKind.REMOVE_ORPHANS, reason="test"
    )
    assert maintainer.run_one(new_owner("test"))
    (run,) = _runs(catalog, "remove_orphans")
    assert run["outcome"] == "done" and run["deleted"] == 1
    assert not table.file_io.exists(orphan)
    for path in in_flight:
        assert table.file_io.exists(path), path
    # the commit in flight is whole: recovery finishes it
    assert [c.action for c in recover_table(catalog, TABLE, older_than_seconds=0).commits] == ["finished"]
    assert read_keys(catalog) == [*range(5), *range(100, 105)]


def test_automatic_tags_follow_the_period_and_retention() -> None:
    options = MaintenanceOptions.of(
        {
            "tag.automatic-creation": "process-time",
            "tag.creation-period": "hourly",
            "tag.num-retained-max": "2",
        }
    )
    now = int(time.mktime((2026, 3, 1, 10, 30, 0, 0, 0, -1)) * 1000)
    start = last_period_start(options, now)
    assert period_tag_name(start, 3_600_000) == "2026-03-01 09"
    daily = MaintenanceOptions.of({"tag.automatic-creation": "process-time", "tag.creation-delay": "2 h"})
    assert period_tag_name(last_period_start(daily, now), 86_400_000) == "2026-02-28"
    assert period_tag_name(start, 3_600_000, "without_dashes") == "20260301 09"
    assert period_tag_name(start, 3_600_000, "without_dashes_and_spaces") == "2026030109"


def test_a_worker_killed_mid_compaction_is_taken_over_after_its_lease(
    catalog: MetastoreCatalog, clean_db: str, warehouse: str
) -> None:
    catalog.create_table(
        "db.pk",
        pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())]),
        primary_keys=["k"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "3"},
    )
    for k in range(5):
        table = catalog.get_table("db.pk")
        builder = table.new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array([k], pa.int32()), "v": [f"v{k}"]}))
        builder.new_commit().commit(w.prepare_commit())
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0, lease_seconds=3))
    maintainer.scheduler.tick(sweep=True)
    (job,) = maintainer.queue.jobs()
    assert job.kind is MaintenanceKind.COMPACT

    # another worker process takes the job and dies inside the compaction's commit, holding the table's
    # lock and the job's lease
    env = {**os.environ, CRASH_AT_ENV: "before_publish", "PYTHONPATH": str(REPO)}
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "paimon_meta.cli",
            "--metastore",
            clean_db,
            "--warehouse",
            warehouse,
            "-o",
            "lock.lease-seconds=2",
            "maintain",
            "--once",
            "--workers",
            "1",
            "--lease-seconds",
            "3",
        ],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == CRASH_EXIT_CODE, child.stderr.decode()
    (taken,) = maintainer.queue.jobs()
    assert taken.state.value == "running" and taken.attempts == 1
    assert max(b.sorted_runs for b in bucket_files(catalog.get_table("db.pk"))) == 5

    # once the lease ran out, this worker takes the job over and finishes it
    owner = new_owner("successor")
    deadline = time.monotonic() + 120
    while not maintainer.run_one(owner, kinds=(MaintenanceKind.COMPACT,)):
        assert time.monotonic() < deadline, "the job was never taken over"
        time.sleep(0.2)
    assert maintainer.queue.jobs() == []
    (run,) = [r for r in _runs(catalog, "compact") if r["outcome"] == "done"]
    assert run["job_id"] == job.job_id
    assert max(b.sorted_runs for b in bucket_files(catalog.get_table("db.pk"))) == 1
    reader = catalog.get_table("db.pk").new_read_builder()
    got = reader.new_read().to_arrow(reader.new_scan().plan().splits())
    assert sorted(got.column("k").to_pylist()) == list(range(5))
    # the dead worker's commit is resolved by recovery; storage, log and pointer agree
    recover_table(catalog, "db.pk", older_than_seconds=0)
    assert_consistent(catalog, "db.pk")


def test_tags_are_created_per_period_and_the_oldest_beyond_the_maximum_deleted(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(
        catalog,
        **{
            "tag.automatic-creation": "process-time",
            "tag.creation-period": "hourly",
            "tag.num-retained-max": "1",
        },
    )
    write(catalog, [1])
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.drain()
    assert _runs(catalog, "create_tag") == []  # the table has lived through no whole hour yet
    real = time.time
    names = []
    for hours in (2, 3):
        monkeypatch.setattr(time, "time", lambda hours=hours: real() + hours * 3600)
        now = int(time.time() * 1000)
        options = MaintenanceOptions.of(
            {"tag.automatic-creation": "process-time", "tag.creation-period": "hourly"}
        )
        names.append(period_tag_name(last_period_start(options, now), 3_600_000))
        maintainer.drain()
    monkeypatch.undo()
    tags = TagManager(catalog.get_table(TABLE).file_io, catalog.get_table(TABLE).path).names()
    assert tags == [names[1]]  # the newest; the older one deleted by tag.num-retained-max
    outcomes = [(r["created"], r["deleted"]) for r in _runs(catalog, "create_tag")]
    assert outcomes == [(names[0], []), (names[1], [names[0]])]


def test_compaction_merges_only_the_runs_the_universal_pick_chooses(catalog: MetastoreCatalog) -> None:
    catalog.create_table(
        "db.pk",
        pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())]),
        primary_keys=["k"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "3"},
    )

    def commit(keys: list[int]) -> None:
        table = catalog.get_table("db.pk")
        builder = table.new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array(keys, pa.int32()), "v": [f"v{k}" for k in keys]}))
        builder.new_commit().commit(w.prepare_commit())

    commit(list(range(5000)))
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    commit([5000])
    commit([5001])
    maintainer.drain()  # 3 level-0 runs and no higher level: all merged into the max level
    (oldest,) = catalog.get_table("db.pk").new_read_builder().new_scan().plan().splits()[0].files
    assert oldest.level == 4
    commit([1])
    commit([2])
    # 3 runs: two new one-row files above a large level-4 run: the debt calls for the pick
    maintainer.scheduler.tick(sweep=True)
    (job,) = maintainer.queue.jobs()
    assert job.kind is MaintenanceKind.COMPACT
    maintainer.drain()
    files = catalog.get_table("db.pk").new_read_builder().new_scan().plan().splits()[0].files
    # the large run is left alone; the two new runs are merged into level 3
    assert oldest.file_name in {f.file_name for f in files if f.level == 4}
    assert [f.level for f in files if f.file_name != oldest.file_name] == [3]
    last = [r for r in _runs(catalog, "compact") if r["outcome"] == "done"][-1]
    assert last["strategy"] == "universal" and last["files_before"] == 2 and last["rounds"] == 1
    assert read_keys(catalog, identifier="db.pk") == list(range(5002))
    # 2 runs, fewer than the trigger: nothing is due
    maintainer.scheduler.tick(sweep=True)
    assert maintainer.queue.jobs() == []


def test_a_compaction_job_compacts_again_while_writers_add_runs(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paimon_meta.maintenance import actions

    catalog.create_table(
        "db.pk",
        pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())]),
        primary_keys=["k"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "3"},
    )
    keys = iter(range(100))

    def commit() -> None:
        k = next(keys)
        table = catalog.get_table("db.pk")
        builder = table.new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array([k], pa.int32()), "v": [f"v{k}"]}))
        builder.new_commit().commit(w.prepare_commit())

    for _ in range(3):
        commit()
    real = actions.compact  # type: ignore[attr-defined]  # the name the job calls, patched below
    calls = []

    def compact_then_write(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls.append(result)
        if len(calls) == 1:
            for _ in range(3):  # writers add runs while the job runs: the pick chooses again
                commit()
        return result

    monkeypatch.setattr(actions, "compact", compact_then_write)
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.drain()
    (run,) = [r for r in _runs(catalog, "compact") if r["outcome"] == "done"]
    snapshot_ids = run["snapshot_ids"]
    assert isinstance(snapshot_ids, list)
    assert run["rounds"] == 2 and len(set(snapshot_ids)) == 2
    table = catalog.get_table("db.pk")
    assert max(b.sorted_runs for b in bucket_files(table)) < 3
    assert read_keys(catalog, identifier="db.pk") == list(range(6))
    # every data file written is in some snapshot: no round's files were left behind
    on_disk = {str(p) for p in Path(table.path).rglob("data-*")}
    assert on_disk <= referenced_paths(table)


def test_consumers_past_their_expiration_time_are_deleted_before_snapshots_expire(
    catalog: MetastoreCatalog,
) -> None:
    create(
        catalog,
        **{
            "consumer.expiration-time": "1 h",
            "snapshot.num-retained.min": "1",
            "snapshot.time-retained": "1 ms",
        },
    )
    for k in range(5):
        write(catalog, [k])
    table = catalog.get_table(TABLE)
    consumers = ConsumerManager(table.file_io, table.path)
    consumers.reset("stale", 2)
    consumers.reset("reading", 4)
    make_old([consumers.path("stale")], seconds=2 * 3600)
    Maintainer(catalog, MaintainerSettings(workers=0)).drain()
    # the stale consumer no longer holds snapshots 2 and 3; the one still reading holds 4
    assert consumers.consumers() == {"reading": 4}
    assert catalog.get_table(TABLE).snapshot_manager.earliest_snapshot_id() == 4
    (run,) = [r for r in _runs(catalog, "expire_snapshots") if r["outcome"] == "done"]
    assert run["expired_consumers"] == ["stale"]
    assert read_keys(catalog) == list(range(5))


def test_compaction_is_due_when_the_pick_chooses_runs_not_at_a_run_count(catalog: MetastoreCatalog) -> None:
    # first-row writers put files on the levels above the newest (4, then 3, 2, 1): runs of chosen sizes
    catalog.create_table(
        "db.fr",
        pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())]),
        primary_keys=["k"],
        options={"bucket": "1", "merge-engine": "first-row", "num-sorted-run.compaction-trigger": "3"},
    )

    def commit(keys: range) -> None:
        table = catalog.get_table("db.fr")
        builder = table.new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array(keys, pa.int32()), "v": [f"v{k}" for k in keys]}))
        builder.new_commit().commit(w.prepare_commit())

    commit(range(3000))
    commit(range(5000, 5010))
    commit(range(5005, 5015))  # 5 new keys: a run smaller than the one below it
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.scheduler.tick(sweep=True)
    runs = level_sorted_runs(
        catalog.get_table("db.fr").new_read_builder().new_scan().plan().splits()[0].files
    )
    sizes = [r.total_size for r in runs]
    assert [r.level for r in runs] == [2, 3, 4] and sizes[0] * 1.01 < sizes[1] < sizes[2], sizes
    # 3 runs, the trigger, but no rule picks them: the newest is more than 1 % smaller than the next, the
    # newer runs weigh less than twice the oldest, and there are not more runs than the trigger
    assert maintainer.queue.jobs() == []
    commit(range(5020, 5030))  # a 4th run: more runs than the trigger
    maintainer.scheduler.tick(sweep=True)
    assert [j.kind for j in maintainer.queue.jobs()] == [MaintenanceKind.COMPACT]


@pytest.mark.parametrize("linger", ["5 s", "0 s"])
def test_a_compaction_job_lingers_for_the_next_commits_of_a_busy_table(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch, linger: str
) -> None:
    """After the pick chose nothing, a job that compacted waits up to ``compaction.linger`` for the next
    snapshot and picks again: commits that arrive after its last round are compacted by the same job
    (with the linger off, the job ends and they wait for the next one)."""
    import threading

    from paimon_meta.maintenance import actions

    catalog.create_table(
        "db.pk",
        pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())]),
        primary_keys=["k"],
        options={
            "bucket": "1",
            "num-sorted-run.compaction-trigger": "3",
            "paimon-meta.maintenance.compaction.linger": linger,
        },
    )
    keys = iter(range(100))

    def commit() -> None:
        k = next(keys)
        table = catalog.get_table("db.pk")
        builder = table.new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array([k], pa.int32()), "v": [f"v{k}"]}))
        builder.new_commit().commit(w.prepare_commit())

    for _ in range(3):
        commit()
    real = actions.compact  # type: ignore[attr-defined]  # the name the job calls, patched below
    calls = []

    def write_three() -> None:
        for _ in range(3):
            commit()

    writer = threading.Thread(target=write_three)

    def compact_then_write(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls.append(result)
        if len(calls) == 2:
            # the pick found nothing (one run left): writers go on, after the job's last round
            assert not result.snapshot_ids
            writer.start()
            if linger == "0 s":
                writer.join()  # they land before the job looks again: it must not look
        return result

    monkeypatch.setattr(actions, "compact", compact_then_write)
    Maintainer(catalog, MaintainerSettings(workers=0)).drain()
    writer.join()
    (run,) = [r for r in _runs(catalog, "compact") if r["outcome"] == "done"]
    if linger == "0 s":
        assert (run["rounds"], run["lingers"]) == (1, 0)
        assert max(b.sorted_runs for b in bucket_files(catalog.get_table("db.pk"))) == 4
    else:
        assert run["rounds"] == 2 and isinstance(run["lingers"], int) and run["lingers"] >= 1
        assert max(b.sorted_runs for b in bucket_files(catalog.get_table("db.pk"))) < 3
    assert read_keys(catalog, identifier="db.pk") == list(range(6))


def test_a_compaction_below_the_spark_threshold_runs_in_process(catalog: MetastoreCatalog) -> None:
    """With a Spark master configured, a table under ``compaction.spark-min-bytes`` (default 1 gb) is
    compacted by the worker itself: the job's Python here does not exist, so a Spark run would fail."""
    from paimon_meta.maintenance.spark import SparkCompaction

    catalog.create_table(
        "db.small",
        pa.schema([pa.field("k", pa.int32(), nullable=False)]),
        options={"bucket": "1", "bucket-key": "k", "compaction.min.file-num": "3"},
    )
    for i in range(3):
        builder = catalog.get_table("db.small").new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array([i], pa.int32())}))
        builder.new_commit().commit(w.prepare_commit())
    spark = SparkCompaction("local[1]", python="/nonexistent/python")
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0, spark=spark))
    maintainer.scheduler.tick(sweep=True)
    maintainer.drain()
    [done] = [r for r in _runs(catalog, "compact") if r["outcome"] == "done"]
    assert "engine" not in done and done["compacted_files"] == 3 and done["written_files"] == 1
    key = "paimon-meta.maintenance.compaction.spark-min-bytes"
    assert MaintenanceOptions.of({key: "2 mb"}).compaction_spark_min_bytes == 2 << 20
    assert MaintenanceOptions.of({}, {key: "5 gb"}).compaction_spark_min_bytes == 5 << 30  # the catalog's
    with pytest.raises(ValidationError, match="spark-min-bytes"):
        MaintenanceOptions.of({key: "lots"})


@pytest.mark.parametrize(
    ("python", "says"),
    [
        ("/bin/false", "exited with 1: (no output)"),
        ("/nonexistent/python", "could not start /nonexistent/python"),
    ],
)
def test_a_failed_spark_job_leaves_the_table_as_it_was_and_fails_the_run(
    catalog: MetastoreCatalog, python: str, says: str
) -> None:
    """The job exits non-zero (or cannot start): the run fails naming why, the table is untouched and
    readable, and the job is queued again for a retry after its backoff."""
    from paimon_meta.maintenance.spark import SparkCompaction

    catalog.create_table(
        "db.t",
        pa.schema([pa.field("k", pa.int32(), nullable=False)]),
        options={
            "bucket": "1",
            "bucket-key": "k",
            "compaction.min.file-num": "3",
            "paimon-meta.maintenance.compaction.spark-min-bytes": "1 b",
        },
    )
    for i in range(3):
        builder = catalog.get_table("db.t").new_batch_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.table({"k": pa.array([i], pa.int32())}))
        builder.new_commit().commit(w.prepare_commit())
    table = catalog.get_table("db.t")
    snapshot = table.latest_snapshot()
    files = _file_names(table)
    settings = MaintainerSettings(
        workers=0, spark=SparkCompaction("local[1]", python=python), backoff_seconds=3600
    )
    maintainer = Maintainer(catalog, settings)
    maintainer.scheduler.tick(sweep=True)
    maintainer.drain()
    [failed] = [r for r in _runs(catalog, "compact") if r["outcome"] != "done"]
    assert failed["error"] == "SparkCompactionError" and failed["outcome"] == "retry", failed
    assert says in str(failed["message"]), failed
    table = catalog.get_table("db.t")
    latest = table.latest_snapshot()
    assert snapshot is not None and latest is not None and latest.id == snapshot.id
    assert (
        sorted(f.file_name for s in table.new_read_builder().new_scan().plan().splits() for f in s.files)
        == files
    )
    assert read_keys(catalog, identifier="db.t") == [0, 1, 2]
    [job] = maintainer.queue.jobs()
    assert job.attempts == 1 and job.state == "queued"


def _file_names(table: Any) -> list[str]:
    return sorted(f.file_name for s in table.new_read_builder().new_scan().plan().splits() for f in s.files)
