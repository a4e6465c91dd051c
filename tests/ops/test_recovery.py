"""Recovery after a writer dies at each step of the commit protocol, with real Postgres and real files."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import insert

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import CommitEventRecord, LockEventRecord
from paimon_meta.metastore.events import CommitRef, ConflictChecked, Prepared
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement, DataIncrement
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.ops.orphans import remove_orphan_files
from paimon_meta.ops.recovery import recover_table
from paimon_meta.serde.commit_message import (
    CURRENT_VERSION,
    serialize_commit_messages,
)
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec
from tests.ops.helpers import (
    TABLE,
    Crash,
    all_files,
    assert_consistent,
    crash_at,
    create,
    events,
    make_old,
    prepare,
    read_keys,
    unreferenced_manifest_files,
    write,
)

pytestmark = pytest.mark.postgres

CHILD = str(Path(__file__).with_name("_crash_child.py"))
CRASH_ENV = "PAIMON_META_TEST_CRASH_AT"
USER = "crashing-writer"
IDENTIFIER = 7


def _real_crash_point(point: str) -> bool:
    """True once the commit engineer's crash points exist and know ``point`` (then they are used)."""
    if importlib.util.find_spec("paimon_meta.commit.crashpoints") is None:
        return False
    module = importlib.import_module("paimon_meta.commit.crashpoints")
    return point in {p.value for p in getattr(module, "CrashPoint", ())}


def crash_writer(url: str, warehouse: str, point: str, first_key: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if _real_crash_point(point):
        env[CRASH_ENV] = point
    proc = subprocess.run(
        [sys.executable, CHILD, url, warehouse, TABLE, point, str(first_key), USER, str(IDENTIFIER)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode != 0 and "committed without crashing" not in proc.stdout, (
        proc.returncode,
        proc.stdout,
        proc.stderr[-2000:],
    )


def committer(table: FileStoreTable, user: str) -> Any:
    assert table.committer_factory is not None
    return table.committer_factory(table, user)


# What recovery must find after a death at each step. ``lost``: the ``prepared`` event was not durable
# yet (the commit path may send it with the first lock attempt), so there is nothing to resolve and the
# dead attempt's files are orphans.
OUTCOMES = {
    "after_prepared": {"finished", "lost"},
    "after_manifests": {"finished", "lost"},
    "after_lock": {"finished"},
    "before_publish": {"finished"},
    "after_snapshot": {"reconciled"},
    "after_event": {"nothing"},
}


@pytest.mark.parametrize("point", list(OUTCOMES))
def test_recovery_after_a_crash_at_each_protocol_step(
    catalog: MetastoreCatalog, clean_db: str, warehouse: str, point: str
) -> None:
    create(catalog)
    write(catalog, range(10))
    crash_writer(clean_db, warehouse, point, first_key=100)
    table = catalog.get_table(TABLE)
    left_over = unreferenced_manifest_files(table)
    was_pending = bool(catalog.events.pending_commits(catalog.registry.get_table_row("db", "t").table_id))

    report = recover_table(catalog, TABLE, older_than_seconds=0)

    if report.reconciled:
        outcome = "reconciled"
        assert report.reconciled == [(2, "recovered")] and report.commits == []
    elif report.commits:
        outcome = "finished"
        assert [(c.action, c.commit_user, c.snapshot_id) for c in report.commits] == [("finished", USER, 2)]
        assert report.commits[0].finished_by_commit_id is not None
        assert sorted(report.deleted_files) == sorted(left_over)  # the dead attempt's manifests
        resolved = [e for e in events(catalog) if e["event_type"] == "recovered"]
        assert [(e["payload"]["resolution"], e["snapshot_id"]) for e in resolved] == [("finished", 2)]
    else:
        outcome = "nothing" if table.snapshot_manager.snapshot_exists(2) else "lost"
        assert not was_pending and report.deleted_files == []
    assert outcome in OUTCOMES[point], (point, outcome)
    committed = outcome != "lost"
    assert read_keys(catalog) == [*range(10), *(range(100, 110) if committed else [])]
    assert_consistent(catalog)
    if committed:
        snap = catalog.get_table(TABLE).snapshot_manager.snapshot(2)
        assert (snap.commit_user, snap.commit_identifier) == (USER, IDENTIFIER)  # the ORIGINAL user and id

    again = recover_table(catalog, TABLE, older_than_seconds=0)  # idempotent
    assert (again.reconciled, again.commits, again.deleted_files) == ([], [], [])

    # The restarted writer writes its batch again and commits the same identifier: exactly once.
    table = catalog.get_table(TABLE)
    redo = committer(table, USER).commit(prepare(table, range(100, 110), user=USER), IDENTIFIER)
    assert redo.deduplicated is committed and redo.snapshot_ids == (2,)
    assert read_keys(catalog) == [*range(10), *range(100, 110)]
    # Whatever the dead attempt (or the deduplicated redo) left unreferenced is an orphan by now.
    make_old(all_files(table))
    remove_orphan_files(catalog, TABLE, older_than_seconds=3600)
    assert unreferenced_manifest_files(catalog.get_table(TABLE)) == set()
    assert write(catalog, range(200, 205)) == 3  # and the next commit succeeds
    assert read_keys(catalog) == [*range(10), *range(100, 110), *range(200, 205)]
    assert_consistent(catalog)


def _copy_as_compacted(table: FileStoreTable, msg: CommitMessage) -> CommitMessage:
    """A compaction of ``msg``'s files whose outputs are byte copies (so the table stays readable)."""
    after = []
    for f in msg.data_increment.new_files:
        bucket_dir = table.paths.bucket_path((), msg.bucket)
        name = f"data-{uuid.uuid4()}-0.parquet"
        table.file_io.write(
            table.file_io.join(bucket_dir, name),
            table.file_io.read(table.file_io.join(bucket_dir, f.file_name)),
        )
        after.append(dataclasses.replace(f, file_name=name))
    return CommitMessage(
        msg.partition,
        msg.bucket,
        msg.total_buckets,
        DataIncrement(),
        CompactIncrement(compact_before=msg.data_increment.new_files, compact_after=tuple(after)),
    )


def test_a_pending_commit_that_conflicts_now_is_aborted_and_its_manifests_deleted(
    catalog: MetastoreCatalog,
) -> None:
    table = create(catalog)
    messages = prepare(table, range(10))
    committer(table, "writer").commit(messages, 1)
    table = catalog.get_table(TABLE)

    with crash_at("after_lock"), pytest.raises(Crash):
        committer(table, "compactor-a").commit([_copy_as_compacted(table, x) for x in messages], 1)
    dead_files = unreferenced_manifest_files(catalog.get_table(TABLE))
    assert dead_files
    # Another compaction of the same files lands first: compactor-a can no longer be finished.
    table = catalog.get_table(TABLE)
    committer(table, "compactor-b").commit([_copy_as_compacted(table, x) for x in messages], 1)

    report = recover_table(catalog, TABLE, older_than_seconds=0)

    [resolution] = report.commits
    assert (resolution.commit_user, resolution.action, resolution.snapshot_id) == (
        "compactor-a",
        "aborted",
        None,
    )
    assert "conflict" in (resolution.reason or "")
    assert set(report.deleted_files) == dead_files
    assert read_keys(catalog) == list(range(10))
    assert_consistent(catalog)
    kinds = [catalog.get_table(TABLE).snapshot_manager.snapshot(s).commit_kind for s in (1, 2)]
    assert kinds == [CommitKind.APPEND, CommitKind.COMPACT]
    aborted = [e for e in events(catalog) if e["event_type"] == "recovered"]
    assert [e["payload"]["resolution"] for e in aborted] == ["aborted"]


def test_a_commit_whose_writer_is_waiting_for_the_lock_is_left_alone(catalog: MetastoreCatalog) -> None:
    table = create(catalog)
    messages = prepare(table, range(10))
    row = catalog.registry.get_table_row("db", "t")
    blocker = catalog.lock.acquire(catalog.registry.lock_id("db", "t"), owner="blocker", lease_seconds=30)
    results: list[Any] = []
    writer = threading.Thread(target=lambda: results.append(committer(table, "waiting").commit(messages, 1)))
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while not catalog.events.pending_commits(row.table_id):  # prepared, now waiting for the lock
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Its last event is recent: even a zero grace would not do, the default grace protects it.
        dry = recover_table(catalog, TABLE, dry_run=True)
        assert [(c.action, c.commit_user) for c in dry.commits] == [("skipped", "waiting")]
        assert "in flight" in (dry.commits[0].reason or "")
    finally:
        blocker.release()
    # The writer and a recovery now race for the lock: either order must leave the commit to its writer.
    recovery = recover_table(catalog, TABLE)
    writer.join(60)
    assert all(c.action == "skipped" for c in recovery.commits) and recovery.deleted_files == []
    assert results and results[0].snapshot_ids == (1,) and not results[0].deduplicated
    assert read_keys(catalog) == list(range(10))
    assert_consistent(catalog)
    assert [e["event_type"] for e in events(catalog) if e["event_type"] == "recovered"] == []


def _append_ref(table_id: int, user: str, identifier: int) -> CommitRef:
    """A new APPEND commit of :data:`TABLE` (its events written by the test itself)."""
    return CommitRef.new(
        table_id=table_id,
        table_identifier=TABLE,
        commit_user=user,
        commit_identifier=identifier,
        commit_kind=CommitKind.APPEND,
    )


def test_a_commit_whose_lock_owner_is_still_active_is_left_alone(catalog: MetastoreCatalog) -> None:
    table = create(catalog)
    messages = prepare(table, range(3))
    row = catalog.registry.get_table_row("db", "t")
    lock_id = catalog.registry.lock_id("db", "t")
    ref = _append_ref(row.table_id, "u", 1)
    long_ago = datetime.now(UTC) - timedelta(minutes=10)
    prepared = Prepared(
        ref=ref, messages=serialize_commit_messages(messages), messages_version=CURRENT_VERSION
    )
    checked = ConflictChecked(ref=ref, conflict=False)
    with catalog.engine.begin() as conn:
        conn.execute(insert(CommitEventRecord).values(**prepared.to_row(), created_at=long_ago))
        conn.execute(
            insert(LockEventRecord).values(
                lock_id=lock_id,
                event_type="acquired",
                owner="w-live",
                created_at=long_ago + timedelta(seconds=1),
            )
        )
        conn.execute(
            insert(CommitEventRecord).values(**checked.to_row(), created_at=long_ago + timedelta(seconds=2))
        )
        # ... and the same owner took a lock a moment ago: the process is alive (e.g. paused mid-commit).
        conn.execute(
            insert(LockEventRecord).values(lock_id="jdbc.db.other", event_type="acquired", owner="w-live")
        )

    report = recover_table(catalog, TABLE, older_than_seconds=60)
    [resolution] = report.commits
    assert resolution.action == "skipped" and "w-live" in (resolution.reason or "")
    assert catalog.events.pending_commits(row.table_id) != []

    dry = recover_table(catalog, TABLE, older_than_seconds=0, dry_run=True)  # no owner window at 0 s
    assert [c.action for c in dry.commits] == ["finished"]
    assert catalog.events.pending_commits(row.table_id) != []  # a dry run writes nothing


def test_reconcile_never_credits_the_session_it_runs_in_even_when_it_is_the_oldest(
    catalog: MetastoreCatalog,
) -> None:
    """Commit A of (w, 7) is prepared and stalls (its lease may expire); a re-send B of (w, 7) publishes
    ``snapshot-1`` and dies before recording it. When A's next attempt reconciles under the lock, A is
    the oldest pending commit of that key, but it has published nothing: ``snapshot-1`` is B's. (Credited
    to A, A would then be deduplicated onto it and B resolved onto it again by recovery: one snapshot,
    two commits.)"""
    from paimon_meta.commit.metastore.guard import reconcile

    table = create(catalog)
    messages = prepare(table, range(4), user="w")
    row = catalog.registry.get_table_row("db", "t")
    stalled = _append_ref(row.table_id, "w", 7)
    with catalog.engine.begin() as conn:
        catalog.events.append(
            conn,
            Prepared(
                ref=stalled, messages=serialize_commit_messages(messages), messages_version=CURRENT_VERSION
            ),
        )
    with crash_at("after_snapshot"), pytest.raises(Crash):
        committer(table, "w").commit(messages, 7)
    oldest, resend = (p.prepared.ref.commit_id for p in catalog.events.pending_commits(row.table_id))
    assert oldest == stalled.commit_id

    recorded = reconcile(
        catalog.registry, catalog.events, row, table.snapshot_manager, exclude=stalled.commit_id
    )
    assert recorded == [(1, "recovered")]
    credited = [
        e["commit_id"] for e in events(catalog) if e["event_type"] == "recovered" and e["snapshot_id"] == 1
    ]
    assert credited == [resend]
    assert [p.prepared.ref.commit_id for p in catalog.events.pending_commits(row.table_id)] == [
        stalled.commit_id
    ]


PARTITIONED = "db.parts"


def _partitioned(catalog: MetastoreCatalog) -> FileStoreTable:
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string()), ("p", pa.string())])
    table = catalog.create_table(PARTITIONED, schema, partition_keys=["p"], options={"bucket": "-1"})
    return table


def _prepare_parts(table: FileStoreTable, rows: dict[str, range], user: str) -> list[CommitMessage]:
    write = table.new_stream_write_builder().with_commit_user(user).new_write()
    for p, keys in rows.items():
        ks = list(keys)
        write.write_arrow(
            pa.table({"k": pa.array(ks, pa.int32()), "v": [f"v{k}" for k in ks], "p": [p] * len(ks)})
        )
    return list(write.prepare_commit())


def _rows_by_partition(catalog: MetastoreCatalog) -> dict[str, list[int]]:
    builder = catalog.get_table(PARTITIONED).new_read_builder()
    result = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    out: dict[str, list[int]] = {}
    for r in result:
        out.setdefault(r["p"], []).append(r["k"])
    return {p: sorted(ks) for p, ks in sorted(out.items())}


@pytest.mark.parametrize("mode", ["dynamic", "static", "several"])
def test_a_crashed_overwrite_is_finished_with_its_recorded_scope(
    catalog: MetastoreCatalog, mode: str
) -> None:
    """The prepared event records the resolved overwrite spec, so recovery replaces exactly what the dead
    writer would have: the partitions of its files (dynamic) or everything its spec names (static; several:
    every partition one of its specs names, as a drop of partitions commits)."""
    table = _partitioned(catalog)
    committer(table, "loader").commit(
        _prepare_parts(table, {p: range(i * 10, i * 10 + 10) for i, p in enumerate("abc")}, "loader"), 1
    )
    table = catalog.get_table(PARTITIONED)
    spec: dict[str, str] | OverwriteSpec
    if mode == "dynamic":
        messages, spec = _prepare_parts(table, {"a": range(100, 103), "c": range(200, 201)}, USER), {}
    elif mode == "static":
        messages, spec = [], OverwriteSpec.static({"p": "b"})
    else:
        messages, spec = [], OverwriteSpec.partitions([{"p": "a"}, {"p": "c"}])
    with crash_at("before_publish"), pytest.raises(Crash):
        committer(table, USER).commit(messages, IDENTIFIER, overwrite=spec)
    [prepared] = [
        e for e in events(catalog, PARTITIONED) if e["event_type"] == "prepared" and e["commit_user"] == USER
    ]
    assert prepared["payload"]["overwrite"] == {
        "partition": {"p": "b"} if mode == "static" else {},
        "dynamic": mode == "dynamic",
        **({"anyOf": [{"p": "a"}, {"p": "c"}]} if mode == "several" else {}),
    }

    report = recover_table(catalog, PARTITIONED, older_than_seconds=0)

    [resolution] = report.commits
    assert (resolution.commit_user, resolution.action, resolution.snapshot_id) == (USER, "finished", 2)
    snapshot = catalog.get_table(PARTITIONED).snapshot_manager.snapshot(2)
    assert snapshot.commit_kind is CommitKind.OVERWRITE and snapshot.commit_user == USER
    if mode == "dynamic":
        assert _rows_by_partition(catalog) == {"a": [100, 101, 102], "b": list(range(10, 20)), "c": [200]}
    elif mode == "static":
        assert _rows_by_partition(catalog) == {"a": list(range(10)), "c": list(range(20, 30))}
    else:
        assert _rows_by_partition(catalog) == {"b": list(range(10, 20))}
    assert_consistent(catalog, PARTITIONED)
    # The dead writer, coming back, deduplicates against the finished commit.
    again = committer(catalog.get_table(PARTITIONED), USER).commit(messages, IDENTIFIER, overwrite=spec)
    assert again.deduplicated and again.snapshot_ids == (2,)


def test_a_crashed_commit_with_a_compressed_body_is_finished(catalog: MetastoreCatalog) -> None:
    """A commit of many files stores its prepared body zstd-compressed; recovery decodes it."""
    table = create(catalog)
    messages = [m for i in range(12) for m in prepare(table, range(i * 10, i * 10 + 10), user=USER)]
    with crash_at("before_publish"), pytest.raises(Crash):
        committer(table, USER).commit(messages, IDENTIFIER)
    [prepared] = [e for e in events(catalog) if e["event_type"] == "prepared"]
    assert prepared["payload"]["messages_codec"] == "zstd"

    report = recover_table(catalog, TABLE, older_than_seconds=0)

    assert [(r.action, r.snapshot_id) for r in report.commits] == [("finished", 1)]
    assert read_keys(catalog) == list(range(120))
    assert_consistent(catalog)


def test_a_resend_of_a_commit_that_died_after_its_snapshot_is_not_credited_with_it(
    catalog: MetastoreCatalog,
) -> None:
    """A writer dies right after ``snapshot-1`` is durable (nothing in the log), then re-sends the same
    (user, identifier) as a new commit. The re-send's reconcile records ``snapshot-1`` on the original
    (not on itself: it has published nothing), the re-send is deduplicated, and recovery finds nothing
    left to resolve: the snapshot is recorded exactly once."""
    table = create(catalog)
    messages = prepare(table, range(5), user="w")
    with crash_at("after_snapshot"), pytest.raises(Crash):
        committer(table, "w").commit(messages, 7)
    again = committer(catalog.get_table(TABLE), "w").commit(messages, 7)
    assert again.deduplicated and again.snapshot_ids == (1,)
    report = recover_table(catalog, TABLE, older_than_seconds=0)
    assert report.commits == []
    log = events(catalog)
    prepared = [e["commit_id"] for e in log if e["event_type"] == "prepared"]
    assert len(set(prepared)) == 2
    original, resend = dict.fromkeys(prepared)
    recorded = [
        (e["commit_id"], e["snapshot_id"])
        for e in log
        if e["event_type"] in ("snapshot_published", "recovered") and e["snapshot_id"] is not None
    ]
    assert recorded == [(original, 1)]
    assert [e["event_type"] for e in log if e["commit_id"] == resend][-1] == "aborted"
    assert read_keys(catalog) == list(range(5))
    assert_consistent(catalog)
