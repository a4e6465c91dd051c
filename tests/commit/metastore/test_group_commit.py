"""Group commit (``paimon_meta.commit.metastore.group``) against real Postgres: many commits of
one table under one
lock hold, each its own snapshot and events, exactly once, in arrival order, bounded holds."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator, CommitResult
from paimon_meta.commit.metastore.group import GroupCommitter, GroupReport, GroupSettings
from paimon_meta.commit.metastore.guard import LockHold, MetastoreGuard
from paimon_meta.errors import (
    CommitConflictError,
    CommitFailedError,
    TableNotFoundError,
    TableRowChangedError,
)
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import CommitKind
from tests.commit.helpers import append_msg, compact_msg, data_file
from tests.integration.history import check_exactly_once, read_history

pytestmark = pytest.mark.postgres

# The one-at-a-time path inside a hold (each queued commit opened with the publish before it), which a
# batch (several queued commits made durable together) otherwise takes over.
ONE_AT_A_TIME = GroupSettings(max_batch=1)


def lock_events(cat: MetastoreCatalog) -> list[str]:
    with cat.engine.connect() as conn:
        return [
            r.event_type
            for r in conn.execute(
                text("SELECT event_type FROM paimon_lock_events WHERE lock_id = :l ORDER BY event_id"),
                {"l": cat.registry.lock_id("db", "t")},
            )
        ]


def test_concurrent_commits_share_lock_holds_and_land_exactly_once(catalog: MetastoreCatalog) -> None:
    reports: list[GroupReport] = []
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings, observer=reports.append)
    users, per_user = 6, 8
    acked: dict[tuple[str, int], str] = {}
    mutex = threading.Lock()
    start = threading.Barrier(users)

    def writer(u: int) -> None:
        user = f"writer-{u}"
        start.wait()
        for i in range(per_user):
            f = data_file(rows=1)
            coordinator = catalog.message_committer("db.t", user)
            result = groups.commit(coordinator.prepare([append_msg(i % 2, i % 2, f)], i))
            assert not result.deduplicated and len(result.snapshot_ids) == 1
            with mutex:
                acked[(user, i)] = f.file_name

    with ThreadPoolExecutor(users) as pool:
        for f in [pool.submit(writer, u) for u in range(users)]:
            f.result()
    assert groups.join(30)

    h = read_history(catalog, "db.t")
    check_exactly_once(h, acked)
    # Each user's identifiers in snapshot order are its commit order (first come, first served).
    for u in range(users):
        mine = [s.commit_identifier for _, s in sorted(h.snapshots.items()) if s.commit_user == f"writer-{u}"]
        assert mine == list(range(per_user))
    # Each commit has its own prepared, conflict_checked and snapshot_published events.
    for event_type in ("prepared", "conflict_checked", "snapshot_published"):
        assert len(h.events_of(event_type)) == users * per_user, event_type
    # Grouped: fewer lock holds than commits (6 threads keep the queue non-empty), all reported.
    acquired = lock_events(catalog).count("acquired")
    assert sum(r.commits for r in reports) == users * per_user
    assert acquired == sum(r.acquisitions for r in reports) < users * per_user
    assert max(r.commits for r in reports) > 1
    assert lock_events(catalog).count("released") == acquired
    # Within a hold only the last commit moves LATEST (a reader meanwhile lists): it ends at the latest.
    snapshots = catalog.get_table("db.t").snapshot_manager
    assert snapshots.file_io.read(snapshots.paths.latest_hint_path).decode().strip() == str(users * per_user)
    assert snapshots.file_io.read(snapshots.paths.earliest_hint_path).decode().strip() == "1"


def test_bounds_end_a_hold(catalog: MetastoreCatalog) -> None:
    reports: list[GroupReport] = []
    groups = GroupCommitter(
        catalog.lock,
        settings=GroupSettings(max_commits=2, pause_seconds=0),
        lock_settings=catalog.lock_settings,
        observer=reports.append,
    )
    prepared = [
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, data_file(rows=1))], i)
        for i in range(7)
    ]
    futures = [groups.group(catalog.registry.lock_id("db", "t")).submit(p) for p in prepared]
    assert [f.result().snapshot_ids for f in futures] == [(i,) for i in range(1, 8)]
    assert groups.join(30)
    assert all(r.commits <= 2 for r in reports) and sum(r.commits for r in reports) == 7
    assert lock_events(catalog).count("acquired") >= 4


def test_an_uncontended_commit_runs_on_its_callers_thread_and_later_arrivals_on_a_worker(
    catalog: MetastoreCatalog,
) -> None:
    reports: list[GroupReport] = []
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings, observer=reports.append)
    threads: list[str] = []
    original = CommitCoordinator.commit_prepared
    inside, release = threading.Event(), threading.Event()

    def recording(self: CommitCoordinator, prepared: Any) -> CommitResult:
        threads.append(threading.current_thread().name)
        if len(threads) == 2:  # the second lone commit: hold it while two more arrive
            inside.set()
            assert release.wait(30)
        return original(self, prepared)

    acked: dict[tuple[str, int], str] = {}

    def commit(i: int) -> CommitResult:
        f = data_file(rows=1)
        coordinator = catalog.message_committer("db.t", "u")
        result = groups.commit(coordinator.prepare([append_msg(0, 0, f)], i))
        acked[("u", i)] = f.file_name
        return result

    CommitCoordinator.commit_prepared = recording  # type: ignore[method-assign]
    try:
        assert commit(1).snapshot_ids == (1,)  # nobody committing: on this thread, no worker started
        assert threads == [threading.current_thread().name]
        with ThreadPoolExecutor(3) as pool:
            second = pool.submit(commit, 2)
            assert inside.wait(30)
            later = [pool.submit(commit, i) for i in (3, 4)]
            while len(groups.group(catalog.registry.lock_id("db", "t"))._queue) < 2:
                threading.Event().wait(0.01)
            release.set()
            assert second.result().snapshot_ids == (2,)
            assert sorted(f.result().snapshot_ids for f in later) == [(3,), (4,)]
        assert groups.join(30)
    finally:
        CommitCoordinator.commit_prepared = original  # type: ignore[method-assign]
    # The two that queued behind the inline commit were committed by the table's worker, in one hold.
    assert len(threads) == 4 and threads[1].startswith("ThreadPoolExecutor")
    assert all(t.startswith("group-commit") for t in threads[2:]), threads
    assert [r.commits for r in reports] == [1, 1, 2]
    assert lock_events(catalog).count("acquired") == 3
    check_exactly_once(read_history(catalog, "db.t"), acked)


def test_a_conflict_fails_only_its_commit_and_keeps_the_hold(catalog: MetastoreCatalog) -> None:
    file_io_table = catalog.get_table("db.t")
    base = data_file(rows=3)
    catalog.message_committer("db.t", "seed").commit([append_msg(0, 0, base)], 1)
    lock_id = catalog.registry.lock_id("db", "t")
    hold = LockHold(catalog.lock, lock_id, owner="test-group", settings=catalog.lock_settings)

    def run(user: str, messages: list[CommitMessage], identifier: int) -> CommitResult:
        coordinator = catalog.message_committer("db.t", user)
        assert isinstance(coordinator.guard, MetastoreGuard)
        coordinator.guard.hold = hold
        try:
            return coordinator.commit(messages, identifier)
        finally:
            coordinator.guard.hold = None

    try:
        first = run("a", [append_msg(1, 0, data_file(rows=1))], 1)
        # Compacting a file that is not live: a conflict, nothing lands.
        ghost = data_file(rows=3)
        with pytest.raises(CommitConflictError):
            run("b", [compact_msg(0, 0, [ghost], [data_file(rows=3, level=1)])], 1)
        second = run("c", [append_msg(1, 1, data_file(rows=1))], 1)
        again = run("a", [append_msg(1, 0, data_file(rows=1))], 1)  # same identifier: deduplicated
    finally:
        hold.release()
    assert first.snapshot_ids == (2,) and second.snapshot_ids == (3,)
    assert again.deduplicated and again.snapshot_ids == (2,)
    assert hold.acquisitions == 1 and hold.sessions == 4
    assert lock_events(catalog).count("acquired") == 2  # the seed's own, then the hold's
    assert file_io_table.snapshot_manager.latest_snapshot_id() == 3


def test_a_lease_lost_between_commits_is_taken_again(catalog: MetastoreCatalog) -> None:
    lock_id = catalog.registry.lock_id("db", "t")
    hold = LockHold(catalog.lock, lock_id, owner="test-group", settings=catalog.lock_settings)

    def run(identifier: int) -> tuple[int, ...]:
        coordinator: CommitCoordinator = catalog.message_committer("db.t", "u")
        assert isinstance(coordinator.guard, MetastoreGuard)
        coordinator.guard.hold = hold
        try:
            return coordinator.commit([append_msg(0, 0, data_file(rows=1))], identifier).snapshot_ids
        finally:
            coordinator.guard.hold = None

    try:
        assert run(1) == (1,)
        # An operator steals the lock while the group holds it: the next commit's fencing check fails
        # (a definite failure), its retry acquires again and commits.
        catalog.lock.force_release(lock_id, reason="test", operator="pytest")
        assert run(2) == (2,)
        assert run(3) == (3,)
    finally:
        hold.release()
    assert hold.acquisitions == 2
    h = read_history(catalog, "db.t")
    assert len(h.events_of("retried")) == 1
    assert [s.commit_kind for s in h.snapshots.values()] == [CommitKind.APPEND] * 3
    assert h.pointer == 3


def test_prepare_writes_nothing_that_a_discard_leaves_behind(catalog: MetastoreCatalog) -> None:
    coordinator = catalog.message_committer("db.t", "u")
    table = catalog.get_table("db.t")
    manifest_dir = table.file_io.join(table.path, "manifest")
    prepared = coordinator.prepare([append_msg(0, 0, data_file(rows=1))], 1)
    assert prepared.kinds == (CommitKind.APPEND,)
    assert list(table.file_io.list(manifest_dir))
    prepared.discard()
    assert not list(table.file_io.list(manifest_dir))
    assert table.snapshot_manager.latest_snapshot_id() is None
    with pytest.raises(ValueError, match="already committed"):
        coordinator.commit_prepared(prepared)


@pytest.mark.parametrize("change", ["rename", "drop"])
def test_a_row_changed_after_prepare_fails_the_commit_and_deletes_its_manifests(
    catalog: MetastoreCatalog, change: str
) -> None:
    """The committer's row is checked under the lock: renamed (TableRowChangedError) or dropped
    (TableNotFoundError) after ``prepare``, the commit fails definitely, publishes nothing and deletes the
    delta manifests it wrote."""
    coordinator = catalog.message_committer("db.t", "u")
    table = catalog.get_table("db.t")
    manifest_dir = table.file_io.join(table.path, "manifest")
    prepared = coordinator.prepare([append_msg(0, 0, data_file(rows=1))], 1)
    assert list(table.file_io.list(manifest_dir))
    if change == "rename":
        catalog.rename_table("db.t", "db.t2")
    else:
        catalog.drop_table("db.t", purge=False)
    with pytest.raises(TableRowChangedError if change == "rename" else TableNotFoundError):
        coordinator.commit_prepared(prepared)
    assert not list(table.file_io.list(manifest_dir))
    assert table.snapshot_manager.latest_snapshot_id() is None


def test_a_commit_recovery_resolved_is_never_published_inside_a_hold(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I5 inside a hold: a later commit's fencing and resolution check run with its session start (not in
    before_publish); one that recovery already aborted must not publish."""
    from paimon_meta.metastore.events import Aborted, EventLog

    lock_id = catalog.registry.lock_id("db", "t")
    hold = LockHold(catalog.lock, lock_id, owner="test-group", settings=catalog.lock_settings)

    def run(identifier: int) -> CommitResult:
        coordinator = catalog.message_committer("db.t", "u")
        assert isinstance(coordinator.guard, MetastoreGuard)
        coordinator.guard.hold = hold
        try:
            return coordinator.commit([append_msg(0, 0, data_file(rows=1))], identifier)
        finally:
            coordinator.guard.hold = None

    try:
        assert run(1).snapshot_ids == (1,)
        original = MetastoreGuard.prepared

        def aborted_meanwhile(self: MetastoreGuard, record: Any) -> None:
            original(self, record)
            with catalog.engine.begin() as conn:
                ref = self._refs[record.commit_id]
                EventLog.append(conn, Aborted(ref=ref, reason="writer presumed dead"))

        monkeypatch.setattr(MetastoreGuard, "prepared", aborted_meanwhile)
        with pytest.raises(CommitFailedError, match="will not be published"):
            run(2)
    finally:
        hold.release()
    assert hold.acquisitions == 1  # the refused commit ran inside the hold
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]


def _events(cat: MetastoreCatalog) -> list[Any]:
    with cat.engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT commit_id::text AS commit_id, event_type, snapshot_id, xmin::text AS tx "
                    "FROM paimon_commit_events ORDER BY event_id"
                )
            )
        )


def _queued_behind_a_held_first(
    catalog: MetastoreCatalog, groups: GroupCommitter, prepared: list[Any]
) -> list[Future[CommitResult]]:
    """Submit ``prepared`` so that all but the first are queued before the first publishes."""
    original = CommitCoordinator.commit_prepared
    entered, go = threading.Event(), threading.Event()

    def first_waits(self: CommitCoordinator, prepared: Any) -> CommitResult:
        if not entered.is_set():
            entered.set()
            assert go.wait(30)
        return original(self, prepared)

    CommitCoordinator.commit_prepared = first_waits  # type: ignore[method-assign]
    try:
        group = groups.group(catalog.registry.lock_id("db", "t"))
        futures = [group.submit(prepared[0])]
        assert entered.wait(30)
        futures += [group.submit(p) for p in prepared[1:]]
    finally:
        go.set()
        CommitCoordinator.commit_prepared = original  # type: ignore[method-assign]
    return futures


def test_the_next_commits_opening_rides_on_the_publish_before_it(catalog: MetastoreCatalog) -> None:
    """Inside a hold, commit k+1's prepared event commits in commit k's publishing transaction (one
    transaction and one round trip per commit), and each commit still has exactly its own events."""
    reports: list[GroupReport] = []
    groups = GroupCommitter(
        catalog.lock, lock_settings=catalog.lock_settings, observer=reports.append, settings=ONE_AT_A_TIME
    )
    files = [data_file(rows=1) for _ in range(4)]
    prepared = [
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, f)], i) for i, f in enumerate(files)
    ]
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,), (4,)]
    assert [r.commits for r in reports] == [4]
    events = _events(catalog)
    by_commit: dict[str, dict[str, Any]] = {}
    for e in events:
        assert e.event_type not in by_commit.setdefault(e.commit_id, {}), f"{e.event_type} twice"
        by_commit[e.commit_id][e.event_type] = e
    order = [r.commit_ids[0] for r in results]
    assert set(by_commit) == set(order)
    for before, after in itertools.pairwise(order):
        assert by_commit[after]["prepared"].tx == by_commit[before]["snapshot_published"].tx
    check_exactly_once(read_history(catalog, "db.t"), {("u", i): f.file_name for i, f in enumerate(files)})


def test_an_opening_sent_for_a_commit_that_does_not_come_next_is_rolled_back(
    catalog: MetastoreCatalog,
) -> None:
    """A commit of two snapshots (APPEND then COMPACT) publishing its APPEND part sends the opening of
    the queued commit after it, but its own COMPACT part comes first: that opening's transaction is
    rolled back (the prepared event it committed stays, sent once), and everything lands once."""
    seed = data_file(rows=3)
    catalog.message_committer("db.t", "seed").commit([append_msg(0, 0, seed)], 1)
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    fresh, compacted, later = data_file(rows=1), data_file(rows=3, level=1), data_file(rows=1)
    both = catalog.message_committer("db.t", "a").prepare(
        [append_msg(1, 0, fresh), compact_msg(0, 0, [seed], [compacted])], 1
    )
    assert both.kinds == (CommitKind.APPEND, CommitKind.COMPACT)
    nxt = catalog.message_committer("db.t", "b").prepare([append_msg(1, 1, later)], 1)
    first, second = (f.result(60) for f in _queued_behind_a_held_first(catalog, groups, [both, nxt]))
    assert groups.join(30)
    assert first.snapshot_ids == (2, 3) and second.snapshot_ids == (4,)
    events = _events(catalog)
    prepared = [e.commit_id for e in events if e.event_type == "prepared"]
    assert len(prepared) == len(set(prepared)) == 4  # the seed's, APPEND, COMPACT, the next one
    h = read_history(catalog, "db.t")
    assert [s.commit_kind for s in h.snapshots.values()] == [
        CommitKind.APPEND,
        CommitKind.APPEND,
        CommitKind.COMPACT,
        CommitKind.APPEND,
    ]
    assert h.pointer == 4
    # The lock was released at the end (nothing left open on the hold's connection).
    assert lock_events(catalog)[-1] == "released"


def test_a_commit_recovery_resolved_after_its_opening_was_sent_ahead_is_never_published(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I5 on the path where a commit's opening rides on the publish before it: recovery resolves the next
    commit just before that round trip; the resolution read in it refuses the commit (nothing published),
    and the commits around it land."""
    from paimon_meta.metastore.events import Aborted, EventLog

    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings, settings=ONE_AT_A_TIME)
    files = [data_file(rows=1) for _ in range(3)]
    prepared = [
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, f)], i) for i, f in enumerate(files)
    ]
    aborted: list[str] = []
    original = LockHold.ahead

    def resolved_meanwhile(self: LockHold, lease: Any) -> Any:
        ahead = original(self, lease)
        if ahead is not None and not aborted:
            aborted.append(ahead.commit_id)
            with catalog.engine.begin() as conn:
                EventLog.append(conn, Aborted(ref=ahead.guard._refs[ahead.commit_id], reason="presumed dead"))
        return ahead

    monkeypatch.setattr(LockHold, "ahead", resolved_meanwhile)
    futures = _queued_behind_a_held_first(catalog, groups, prepared)
    assert futures[0].result(60).snapshot_ids == (1,)
    with pytest.raises(CommitFailedError, match="will not be published"):
        futures[1].result(60)
    assert futures[2].result(60).snapshot_ids == (2,)
    assert groups.join(30)
    assert aborted == [prepared[1].pendings[0].commit_id]
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1, 2]


def test_a_lock_force_released_while_an_opening_rides_on_a_publish_is_taken_again(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator force-releases the lock while commit 1's publishing transaction (which carries commit
    2's opening) holds the row: the release waits for that transaction, so commit 1 lands; the next
    opening that finds the row gone fails its fencing (nothing is published on the lost lease), and
    that commit's retry acquires the lock again. Everything lands once, in order."""
    reports: list[GroupReport] = []
    groups = GroupCommitter(
        catalog.lock, lock_settings=catalog.lock_settings, observer=reports.append, settings=ONE_AT_A_TIME
    )
    lock_id = catalog.registry.lock_id("db", "t")
    files = [data_file(rows=1) for _ in range(3)]
    prepared = [
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, f)], i) for i, f in enumerate(files)
    ]
    released: list[Any] = []
    releaser: list[threading.Thread] = []
    rode: list[str] = []
    original = LockHold.ahead
    original_session = LockHold.session

    def waiting_for_the_row() -> bool:
        with catalog.engine.connect() as conn:
            return bool(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock' AND query LIKE '%paimon_distributed_locks%'"
                    )
                ).scalar_one()
            )

    def force_released_meanwhile(self: LockHold, lease: Any) -> Any:
        if releaser and releaser[0].is_alive():
            # Only the opening announced with the release rides: a later one sent in the same round trip
            # as a COMMIT can take the row again before the waiting DELETE does, and if every opening
            # won that race the hold would end by releasing the row itself (the operator's release then
            # finds nothing). The race the test is about is the first one.
            return None
        ahead = original(self, lease)
        if ahead is not None and not releaser:
            rode.append(ahead.commit_id)
            # The publishing transaction of the commit asking holds the row (FOR KEY SHARE): the
            # operator's delete blocks on it until the round trip carrying ``ahead`` commits.
            thread = threading.Thread(
                target=lambda: released.append(
                    catalog.lock.force_release(lock_id, operator="pytest", reason="test")
                )
            )
            releaser.append(thread)
            thread.start()
            for _ in range(300):
                if waiting_for_the_row():
                    break
                threading.Event().wait(0.01)
            else:
                raise AssertionError("the force release did not wait for the publishing transaction")
        return ahead

    def after_the_release(self: LockHold, guard: Any, commit_id: str) -> Any:
        if releaser and commit_id not in rode:
            # A session not opened by the round trip that raced the release starts once the release
            # has run (it waited for no transaction of this hold by then), so its fencing finds the
            # row gone whichever way the first race went.
            releaser[0].join(30)
        return original_session(self, guard, commit_id)

    monkeypatch.setattr(LockHold, "ahead", force_released_meanwhile)
    monkeypatch.setattr(LockHold, "session", after_the_release)
    futures = _queued_behind_a_held_first(catalog, groups, prepared)
    results = [f.result(60) for f in futures]
    assert groups.join(30)
    releaser[0].join(30)
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,)]
    assert released and released[0] is not None and released[0].owner == groups.owner
    assert sum(r.acquisitions for r in reports) == 2  # taken again after the release
    h = read_history(catalog, "db.t")
    retried = h.events_of("retried")
    # The release waits behind commit 1's publishing transaction; the opening that goes out right after
    # it either loses the row to the release (commit 2 retries) or locks it first (commit 2 publishes
    # on a valid lease, and commit 3's opening finds the row gone): one retry either way, never a
    # publish on the lost lease.
    assert [str(e["commit_id"]) for e in retried] in ([r.commit_ids[0]] for r in results[1:])
    assert "lock row is gone" in retried[0]["payload"]["reason"]
    check_exactly_once(h, {("u", i): f.file_name for i, f in enumerate(files)})
    assert h.pointer == 3
    assert "force_released" in lock_events(catalog)


def test_commits_queued_for_a_renamed_table_all_fail_and_leave_nothing(catalog: MetastoreCatalog) -> None:
    """Several commits prepared against the table's row are queued into one hold after a rename (which
    waited for no hold: none was running): each finds the row changed under the lock, fails definitely,
    publishes nothing and deletes its manifests; the lock is released at the end."""
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    table = catalog.get_table("db.t")
    manifest_dir = table.file_io.join(table.path, "manifest")
    prepared = [
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, data_file(rows=1))], i)
        for i in range(3)
    ]
    assert list(table.file_io.list(manifest_dir))
    catalog.rename_table("db.t", "db.t2")
    futures = _queued_behind_a_held_first(catalog, groups, prepared)
    for future in futures:
        with pytest.raises(TableRowChangedError):
            future.result(60)
    assert groups.join(30)
    assert not list(table.file_io.list(manifest_dir))
    assert table.snapshot_manager.latest_snapshot_id() is None
    with catalog.engine.connect() as conn:
        assert not conn.execute(text("SELECT 1 FROM paimon_distributed_locks")).first()


def test_a_commit_queued_behind_a_running_hold_makes_its_manifests_durable_first(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that queues behind a running hold fsyncs its own delta manifests on its caller's thread
    before it is queued (the holder's publish then syncs only what it staged); the commit of an idle
    table does not (its manifests are synced with its snapshot, one fsync round)."""
    from paimon_meta.commit.coordinator import PreparedCommit

    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    files = [data_file(rows=1) for _ in range(3)]
    prepared = [
        catalog.message_committer("db.t", "u").prepare([append_msg(0, 0, f)], i) for i, f in enumerate(files)
    ]
    assert all(p.pendings[0].writer.unsynced for p in prepared)
    synced: list[tuple[int, str, list[str]]] = []
    original = PreparedCommit.sync

    def recorded(self: PreparedCommit) -> None:
        original(self)
        unsynced = list(self.pendings[0].writer.unsynced)
        synced.append((prepared.index(self), threading.current_thread().name, unsynced))

    monkeypatch.setattr(PreparedCommit, "sync", recorded)
    results = [f.result(60) for f in _queued_behind_a_held_first(catalog, groups, prepared)]
    assert groups.join(30)
    assert synced == [(1, threading.current_thread().name, []), (2, threading.current_thread().name, [])]
    assert [r.snapshot_ids for r in results] == [(1,), (2,), (3,)]
    check_exactly_once(read_history(catalog, "db.t"), {("u", i): f.file_name for i, f in enumerate(files)})
