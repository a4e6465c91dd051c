"""Batch commit (``paimon_meta.commit.metastore.batch``) against real Postgres: commits queued
behind a lock hold made
durable together (one round of fsyncs, links in order, one transaction), each still its own snapshot,
events and outcome; and what a batch does when a commit conflicts, repeats an identifier, finds its
snapshot name taken, finds storage ahead of the pointer or cannot read its base when it opens, or cannot
be recorded."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.metastore.group import GroupCommitter, GroupReport
from paimon_meta.commit.metastore.guard import LockHold, MetastoreGuard
from paimon_meta.errors import CommitConflictError, CommitFailedError, FileIOError, LockLostError
from paimon_meta.io import CreatedAll, FaultInjectingFileIO, LocalFileIO
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.serde.json import snapshot_from_json, snapshot_to_json
from tests.commit.helpers import append_msg, compact_msg, data_file
from tests.commit.metastore.test_group_commit import _events, _queued_behind_a_held_first
from tests.integration.history import History, check_exactly_once, check_no_orphan_manifests, read_history

pytestmark = pytest.mark.postgres


def _appends(
    catalog: MetastoreCatalog, n: int, user: str = "u"
) -> tuple[list[Any], dict[tuple[str, int], str]]:
    files = [data_file(rows=1) for _ in range(n)]
    prepared = [
        catalog.message_committer("db.t", user).prepare([append_msg(0, 0, f)], i) for i, f in enumerate(files)
    ]
    return prepared, {(user, i): f.file_name for i, f in enumerate(files)}


def _written(catalog: MetastoreCatalog, keys: Sequence[int], user: str = "u") -> list[Any]:
    """One prepared commit per key (identifier = its index): a real data file holding the row ``k``,
    so the table can be read back."""
    prepared = []
    for i, k in enumerate(keys):
        w = catalog.get_table("db.t").new_batch_write_builder().new_write()
        w.write_arrow(
            pa.table({"k": pa.array([k], pa.int32()), "p": pa.array([0], pa.int32()), "v": [f"{k}"]})
        )
        prepared.append(catalog.message_committer("db.t", user).prepare(w.prepare_commit(), i))
    return prepared


def _check_readable(catalog: MetastoreCatalog, h: History, rows: Sequence[int]) -> None:
    """Every manifest list and manifest a snapshot names is on storage (I3: nothing named was deleted),
    and the table, opened afresh (no cache of what the writers wrote), reads back exactly ``rows``."""
    table = paimon_meta.open_table(catalog.get_table("db.t").path)
    on_storage = {
        s.path.rsplit("/", 1)[-1] for s in table.file_io.list(table.file_io.join(table.path, "manifest"))
    }
    for sid, snap in h.snapshots.items():
        for listed in (snap.base_manifest_list, snap.delta_manifest_list):
            assert listed in on_storage, f"snapshot {sid} ({snap.commit_user}) names missing {listed}"
    assert not h.referenced - on_storage
    rb = table.new_read_builder()
    assert sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist()) == sorted(
        rows
    )


def _batches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, set[str]]]:
    """Records every create_all_if_absent (one per batch that got to publishing): how many snapshots,
    and the names of the files it was to make durable before them."""
    calls: list[tuple[int, set[str]]] = []
    original = LocalFileIO.create_all_if_absent

    def spy(
        self: LocalFileIO, entries: Sequence[tuple[str, bytes]], *, sync_first: Sequence[str] = ()
    ) -> CreatedAll:
        calls.append((len(entries), {p.rsplit("/", 1)[-1] for p in sync_first}))
        return original(self, entries, sync_first=sync_first)

    monkeypatch.setattr(LocalFileIO, "create_all_if_absent", spy)
    return calls


def test_commits_queued_behind_a_hold_are_made_durable_and_recorded_together(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit takes the lock; the five queued behind it go as one batch: one publish of five
    snapshots, their prepared events in one transaction and their records in one more; each commit has
    exactly its own events and result, in arrival order."""
    reports: list[GroupReport] = []
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings, observer=reports.append)
    calls = _batches(monkeypatch)
    prepared, acked = _appends(catalog, 6)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert [r.snapshot_ids for r in results] == [(i,) for i in range(1, 7)]
    assert not any(r.deduplicated for r in results)
    assert [n for n, _ in calls] == [5]
    assert [(r.commits, r.acquisitions) for r in reports] == [(6, 1)]
    events = _events(catalog)
    by_commit: dict[str, dict[str, Any]] = {}
    for e in events:
        assert e.event_type not in by_commit.setdefault(e.commit_id, {}), f"{e.event_type} twice"
        by_commit[e.commit_id][e.event_type] = e
    batch = [by_commit[r.commit_ids[0]] for r in results[1:]]
    assert len({e["prepared"].tx for e in batch}) == 1
    assert len({e["snapshot_published"].tx for e in batch}) == 1
    assert [e["snapshot_published"].snapshot_id for e in batch] == [2, 3, 4, 5, 6]
    assert batch[0]["prepared"].tx != batch[0]["snapshot_published"].tx  # durable before any link
    h = read_history(catalog, "db.t")
    check_exactly_once(h, acked)
    table = catalog.get_table("db.t")
    assert table.snapshot_manager.latest_snapshot_id() == 6
    # A snapshot is never durable while a list it names is not: the base lists the batch staged under
    # the lock went into the fsync round before any of its snapshots was linked (the delta lists were
    # synced by their queued request threads, or go into the round too).
    (_, synced_first), queued = calls[0], prepared[1:]
    for sid in range(2, 7):
        snap = table.snapshot_manager.snapshot(sid)
        assert snap.base_manifest_list in synced_first, sid
        assert snap.delta_manifest_list in synced_first or not queued[sid - 2].pendings[0].writer.unsynced


def test_a_conflict_in_a_batch_fails_only_its_commit(catalog: MetastoreCatalog) -> None:
    """Two compactions of one file queued in one batch: the second is checked against the snapshot the
    first staged (in memory), conflicts, publishes nothing and deletes its manifests; the commits around
    it land on one another."""
    seed = data_file(rows=3)
    catalog.message_committer("db.t", "seed").commit([append_msg(0, 0, seed)], 1)
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    first, last = data_file(rows=1), data_file(rows=1)
    a_out, b_out = data_file(rows=3, level=1), data_file(rows=3, level=1)
    prepared = [
        catalog.message_committer("db.t", "first").prepare([append_msg(1, 0, first)], 1),
        catalog.message_committer("db.t", "a").prepare([compact_msg(0, 0, [seed], [a_out])], 1),
        catalog.message_committer("db.t", "b").prepare([compact_msg(0, 0, [seed], [b_out])], 1),
        catalog.message_committer("db.t", "last").prepare([append_msg(1, 1, last)], 1),
    ]
    b_files = list(prepared[2].pendings[0].writer.written)
    futures = _queued_behind_a_held_first(catalog, groups, prepared)
    assert futures[0].result(60).snapshot_ids == (2,)
    assert futures[1].result(60).snapshot_ids == (3,)
    with pytest.raises(CommitConflictError):
        futures[2].result(60)
    assert futures[3].result(60).snapshot_ids == (4,)
    assert groups.join(30)
    h = read_history(catalog, "db.t")
    assert h.live_files == {first.file_name, a_out.file_name, last.file_name}
    assert [s.commit_kind for s in h.snapshots.values()] == [
        CommitKind.APPEND,
        CommitKind.APPEND,
        CommitKind.COMPACT,
        CommitKind.APPEND,
    ]
    assert not set(b_files) & h.manifest_files  # the conflicting commit's manifests are gone
    check_no_orphan_manifests(h)
    failed = h.events_of("failed")
    assert [(e["commit_user"], e["commit_identifier"]) for e in failed] == [("b", 1)]
    assert h.pointer == 4


def test_a_file_added_earlier_in_the_batch_cannot_be_added_again(catalog: MetastoreCatalog) -> None:
    """A commit that re-adds a file the commit staged before it in the same batch added (not yet on
    storage: only in the batch's staged chain) conflicts and publishes nothing; the commits around it
    land."""
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    shared, last = data_file(rows=1), data_file(rows=1)
    prepared = [
        catalog.message_committer("db.t", "first").prepare([append_msg(1, 0, data_file(rows=1))], 1),
        catalog.message_committer("db.t", "a").prepare([append_msg(0, 0, shared)], 1),
        catalog.message_committer("db.t", "again").prepare([append_msg(0, 0, shared)], 1),
        catalog.message_committer("db.t", "last").prepare([append_msg(1, 1, last)], 1),
    ]
    futures = _queued_behind_a_held_first(catalog, groups, prepared)
    assert futures[0].result(60).snapshot_ids == (1,)
    assert futures[1].result(60).snapshot_ids == (2,)
    with pytest.raises(CommitConflictError, match="already added"):
        futures[2].result(60)
    assert futures[3].result(60).snapshot_ids == (3,)
    assert groups.join(30)
    h = read_history(catalog, "db.t")
    assert shared.file_name in h.live_files and last.file_name in h.live_files
    assert [(e["commit_user"], e["commit_identifier"]) for e in h.events_of("failed")] == [("again", 1)]
    assert h.pointer == 3


def test_a_batch_deduplicates_identifiers_committed_before_it_and_inside_it(
    catalog: MetastoreCatalog,
) -> None:
    """A re-sent identifier that an earlier hold committed is deduplicated in the batch; the same
    identifier twice in the queue ends a batch before the second, which then finds the first's record."""
    done = data_file(rows=1)
    earlier = catalog.message_committer("db.t", "u").commit([append_msg(0, 0, done)], 7)
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    f1, f2, again, v = (data_file(rows=1) for _ in range(4))
    prepared = [
        catalog.message_committer("db.t", "w").prepare([append_msg(0, 0, f1)], 1),
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, data_file(rows=1))], 7),  # re-sent
        catalog.message_committer("db.t", "w").prepare([append_msg(0, 0, f2)], 2),
        catalog.message_committer("db.t", "w").prepare([append_msg(0, 0, again)], 2),  # same again
        catalog.message_committer("db.t", "v").prepare([append_msg(0, 0, v)], 1),
    ]
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert [(r.snapshot_ids, r.deduplicated) for r in results] == [
        ((2,), False),
        (earlier.snapshot_ids, True),
        ((3,), False),
        ((3,), True),
        ((4,), False),
    ]
    h = read_history(catalog, "db.t")
    assert h.live_files == {done.file_name, f1.file_name, f2.file_name, v.file_name}
    check_no_orphan_manifests(h)


def test_a_snapshot_name_taken_outside_the_lock_stops_the_batch_there(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that ignores our lock creates the second snapshot a batch meant to link: the commit
    before it is published, the ones after it were never named (their staged lists are deleted) and
    commit one at a time on top of the outsider's snapshot, which is recorded as external."""
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    prepared, acked = _appends(catalog, 5)
    original = LocalFileIO.create_all_if_absent
    outsider: list[int] = []

    def taken_meanwhile(self: LocalFileIO, entries: Sequence[tuple[str, bytes]], **kwargs: Any) -> CreatedAll:
        if not outsider:
            # The outsider's snapshot holds what the batch's first one holds (its lists), one id on.
            path = entries[1][0]
            first = snapshot_from_json(entries[0][1].decode())
            theirs = dataclasses.replace(
                first, id=first.id + 1, commit_user="outsider", uuid=str(uuid.uuid4())
            )
            LocalFileIO().create_if_absent(path, snapshot_to_json(theirs).encode())
            outsider.append(theirs.id)
        return original(self, entries, **kwargs)

    monkeypatch.setattr(LocalFileIO, "create_all_if_absent", taken_meanwhile)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert outsider == [3]
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (4,), (5,), (6,)]
    h = read_history(catalog, "db.t")
    assert [(e["commit_user"], e["snapshot_id"]) for e in h.events_of("external")] == [("outsider", 3)]
    assert sorted(e["commit_identifier"] for e in h.events_of("retried")) == [2, 3, 4]
    ours = {sid: s for sid, s in h.snapshots.items() if s.commit_user == "u"}
    assert sorted((s.commit_user, s.commit_identifier) for s in ours.values()) == sorted(acked)
    assert h.pointer == 6
    assert h.live_files == set(acked.values())  # the outsider's snapshot changed nothing
    check_no_orphan_manifests(h)  # what the batch staged for the commits it did not publish is gone


def test_a_batch_whose_record_fails_is_acknowledged_and_recorded_by_the_next_holder(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metastore fails the batch's recording transaction after its snapshots are durable: the
    commits succeeded (acknowledged), the hold gives the lock up, and the next commit records the
    snapshots it finds beyond the pointer (``recovered``): each commit once, the log equal to storage."""
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    prepared, acked = _appends(catalog, 4)
    failures: list[str] = []

    def metastore_down(self: LockHold, *args: Any) -> None:
        failures.append("record")
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(LockHold, "record_batch", metastore_down)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert failures == ["record"]
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,), (4,)]
    monkeypatch.undo()
    last = data_file(rows=1)
    assert catalog.message_committer("db.t", "u").commit([append_msg(0, 0, last)], 4).snapshot_ids == (5,)
    acked[("u", 4)] = last.file_name
    h = read_history(catalog, "db.t")
    assert sorted(e["snapshot_id"] for e in h.events_of("recovered")) == [2, 3, 4]
    assert sorted(e["snapshot_id"] for e in h.events_of("snapshot_published")) == [1, 5]
    assert h.live_files == set(acked.values())
    assert h.pointer == 5
    with catalog.engine.connect() as conn:  # the lock was given up, not left behind
        assert not conn.execute(text("SELECT 1 FROM paimon_distributed_locks")).first()


def test_a_batch_that_cannot_be_made_durable_commits_one_at_a_time(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's fsync round fails (nothing named yet): its commits go one at a time and all land
    once; the files its attempt staged are deleted."""
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    prepared, acked = _appends(catalog, 4)
    failed: list[int] = []

    def disk_error(self: LocalFileIO, entries: Sequence[tuple[str, bytes]], **kwargs: Any) -> CreatedAll:
        failed.append(len(entries))
        raise FileIOError("sync failed: Input/output error", path=entries[0][0])

    monkeypatch.setattr(LocalFileIO, "create_all_if_absent", disk_error)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert failed == [3]
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,), (4,)]
    check_exactly_once(read_history(catalog, "db.t"), acked)


def test_a_commit_recovery_resolved_before_the_batch_opened_is_never_published(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I5 on the batch path: recovery aborts one queued commit just before its batch opens; the
    resolution read in the batch's opening keeps it out of the batch, its own session then refuses it
    (nothing published), and the commits around it land in the batch."""
    from paimon_meta.metastore.events import Aborted, EventLog

    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    prepared, _ = _appends(catalog, 4)
    victim = prepared[2].pendings[0].commit_id
    original = LockHold.open_batch

    def resolved_meanwhile(self: LockHold, entries: Sequence[tuple[Any, str]]) -> Any:
        for guard, commit_id in entries:
            if commit_id == victim:
                # its prepared event goes out with the opening: record it first, as recovery finds it
                with catalog.engine.begin() as conn:
                    EventLog.append(conn, guard._unsent.pop(commit_id))
                    EventLog.append(conn, Aborted(ref=guard._refs[commit_id], reason="presumed dead"))
        return original(self, entries)

    monkeypatch.setattr(LockHold, "open_batch", resolved_meanwhile)
    futures = _queued_behind_a_held_first(catalog, groups, prepared)
    assert futures[0].result(60).snapshot_ids == (1,)
    assert futures[1].result(60).snapshot_ids == (2,)
    with pytest.raises(CommitFailedError, match="will not be published"):
        futures[2].result(60)
    assert futures[3].result(60).snapshot_ids == (3,)
    assert groups.join(30)
    h = read_history(catalog, "db.t")
    assert sorted((s.commit_user, s.commit_identifier) for s in h.snapshots.values()) == [
        ("u", 0),
        ("u", 1),
        ("u", 3),
    ]
    assert h.pointer == 3


def test_a_lease_found_lapsed_before_the_batch_links_publishes_nothing_of_it(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fencing check before the batch's links fails: nothing is named, the hold gives the lock up,
    and the commits go one at a time (acquiring it again): all land once."""
    reports: list[GroupReport] = []
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings, observer=reports.append)
    prepared, acked = _appends(catalog, 4)
    calls = _batches(monkeypatch)
    checks: list[str] = []

    def lapsed(self: LockHold) -> None:
        checks.append(self.lock_id)
        raise LockLostError(f"lock {self.lock_id!r} lost: lease expired")

    monkeypatch.setattr(LockHold, "lease_check", lapsed)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert len(checks) == 1 and calls == []  # checked once, before anything was linked
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,), (4,)]
    assert sum(r.acquisitions for r in reports) == 2
    check_exactly_once(read_history(catalog, "db.t"), acked)


def test_a_batch_that_finds_storage_ahead_when_it_opens_keeps_the_prepared_manifests(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another engine publishes a snapshot straight to storage after the commits queued and before their
    batch opens. The batch's sessions answer the pointer without checking storage (a real
    create-if-absent: the guard's "S3 floor" invariant), so the batch stages on it and its first link
    finds the name taken: nothing of it is named, and its commits go one at a time, storage checked
    first (the outsider recorded ``external``), on top of the outsider's snapshot. Going back
    drops only the batch attempt's files (I3), never the delta manifests and lists each commit wrote
    before the lock, which the snapshots it then publishes name: every acknowledged commit once, every
    list and manifest there, every row readable."""
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    prepared = _written(catalog, range(4))
    calls = _batches(monkeypatch)
    path = catalog.get_table("db.t").path
    original = LockHold.open_batch
    outsider: list[int] = []

    def published_directly_meanwhile(self: LockHold, entries: Sequence[tuple[Any, str]]) -> Any:
        if not outsider:
            foreign = paimon_meta.open_table(path)  # storage-guarded: knows nothing of our lock
            w = foreign.new_batch_write_builder().new_write()
            w.write_arrow(
                pa.table({"k": pa.array([99], pa.int32()), "p": pa.array([1], pa.int32()), "v": ["x"]})
            )
            assert foreign.committer_factory is not None
            outsider.extend(
                foreign.committer_factory(foreign, "outsider").commit(w.prepare_commit(), 1).snapshot_ids
            )
        return original(self, entries)

    monkeypatch.setattr(LockHold, "open_batch", published_directly_meanwhile)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert outsider == [2]
    assert [n for n, _ in calls] == [3]  # one link of the batch, stopped at its first name: none made
    assert [r.snapshot_ids for r in results] == [(1,), (3,), (4,), (5,)]
    h = read_history(catalog, "db.t")
    assert [(e["commit_user"], e["snapshot_id"]) for e in h.events_of("external")] == [("outsider", 2)]
    ours = sorted((s.commit_user, s.commit_identifier) for s in h.snapshots.values() if s.commit_user == "u")
    assert ours == [("u", i) for i in range(4)]  # each acknowledged commit exactly once
    assert h.pointer == 5
    _check_readable(catalog, h, [0, 1, 2, 3, 99])
    check_no_orphan_manifests(h)  # what the batch attempt staged is gone, nothing else


def test_a_batch_whose_base_read_fails_commits_one_at_a_time_with_its_prepared_manifests(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transient storage error while the batch reads its base under the lock (the existence check of
    the snapshot after the pointer): nothing was named, the hold gives the lock up and the commits go
    one at a time, each publishing the delta manifests it prepared before the lock (I3: the fallback
    deleted only the batch attempt's files); all land once and read back."""
    fio = FaultInjectingFileIO(catalog.file_io)
    catalog.file_io = fio  # every table the catalog opens from now on goes through it
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    prepared = _written(catalog, range(4))
    acked = {("u", i): p.pendings[0].changes.table_files[0].file.file_name for i, p in enumerate(prepared)}
    calls = _batches(monkeypatch)
    original = CommitCoordinator.base
    raised: list[BaseException] = []

    def base(self: CommitCoordinator, session: Any) -> Any:
        try:
            return original(self, session)
        except BaseException as e:
            raised.append(e)
            raise

    monkeypatch.setattr(CommitCoordinator, "base", base)
    # Where create-if-absent is real the pointer is not checked against storage (the guard's "S3 floor"
    # invariant): the check (and its fault) is what a store without one still does.
    monkeypatch.setattr(MetastoreGuard, "trusts_create", lambda self: False)
    # The first commit publishes snapshot 1 alone; the batch's base() is the first to look for 2.
    rule = fio.fail_nth("exists", 1, path_contains="snapshot/snapshot-2")
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert rule.fired == 1 and calls == []  # the batch failed before it linked anything ...
    assert [type(e) for e in raised] == [FileIOError]  # ... in its base()
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,), (4,)]
    h = read_history(catalog, "db.t")
    check_exactly_once(h, acked)
    _check_readable(catalog, h, range(4))
