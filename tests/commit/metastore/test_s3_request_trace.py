"""The S3 requests a commit makes while it holds the table lock, counted from the S3 server's request log.

On S3 every request is a network round trip and the lock serialises what is inside it (issue 39). Under
the lock a lone commit of a table the writer already holds makes exactly one S3 request: ``PUT
snapshot-N`` with ``If-None-Match: *`` (no HEAD of snapshot-N: the conditional PUT detects a snapshot
another writer left; the base manifest list staged before the lock; LATEST written after the release),
and no PUT carries ``Expect: 100-continue`` (a second round trip each). A group of ``k`` commits in one
hold makes ``k`` snapshot PUTs and a base list PUT for each commit staged on a snapshot of the hold.
Ungrouped commits of one table object contending make one request under the lock too: the committer of
snapshot N PUTs N+1's base list together with ``snapshot-N`` and hands it to the next holder.

The window is measured in this process: from the moment the lock's acquiring transaction returned
(``MetastoreLock.acquire_on``) to the moment its release committed (``LockLease.confirm_release``); the
moto server runs in this process too, and logs each request's arrival on the same monotonic clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator, CommitResult
from paimon_meta.commit.metastore.group import GroupCommitter, GroupReport, GroupSettings
from paimon_meta.metastore.lock import LockLease, MetastoreLock
from tests.commit.conftest import SCHEMA
from tests.commit.helpers import append_msg, data_file
from tests.fixtures.s3 import MotoS3, TracedRequest
from tests.integration.history import check_exactly_once, check_no_orphan_manifests, read_history

pytestmark = pytest.mark.postgres


@dataclass
class _Holds:
    """Lock holds of this process: (acquired, released) on the monotonic clock."""

    acquired: list[float] = field(default_factory=list)
    released: list[float] = field(default_factory=list)
    mutex: threading.Lock = field(default_factory=threading.Lock)

    def windows(self) -> list[tuple[float, float]]:
        with self.mutex:
            assert len(self.acquired) == len(self.released), (self.acquired, self.released)
            return list(zip(self.acquired, self.released, strict=True))

    def inside(self, trace: list[TracedRequest]) -> list[TracedRequest]:
        """The requests that arrived while a hold was on (``trace`` in arrival order)."""
        windows = self.windows()
        return [r for r in trace if any(a <= r.at <= b for a, b in windows)]


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> _Holds:
    seen = _Holds()
    acquire_on, confirm_release = MetastoreLock.acquire_on, LockLease.confirm_release

    def acquired(self: MetastoreLock, *args: Any, **kwargs: Any) -> Any:
        out = acquire_on(self, *args, **kwargs)
        with seen.mutex:
            seen.acquired.append(time.monotonic())
        return out

    def released(self: LockLease, deleted: bool) -> None:
        with seen.mutex:
            seen.released.append(time.monotonic())
        confirm_release(self, deleted)

    monkeypatch.setattr(MetastoreLock, "acquire_on", acquired)
    monkeypatch.setattr(LockLease, "confirm_release", released)
    return seen


@pytest.fixture
def s3_catalog(
    clean_db: str, s3_warehouse: tuple[str, dict[str, str]], tmp_path: Path
) -> Iterator[MetastoreCatalog]:
    uri, options = s3_warehouse
    cat = paimon_meta.connect(clean_db, uri, **{**options, "s3.conditional-writes": "true"})
    cat.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"})
    try:
        yield cat
    finally:
        cat.close()


def _key_tail(r: TracedRequest) -> str:
    return r.key.rsplit("/", 2)[-2] + "/" + r.key.rsplit("/", 1)[-1]


def test_a_lone_commit_makes_one_s3_request_under_the_lock(
    s3_catalog: MetastoreCatalog, moto_server: MotoS3, holds: _Holds
) -> None:
    table = s3_catalog.get_table("db.t")
    coordinator = s3_catalog.message_committer("db.t", "u", table=table)
    coordinator.commit([append_msg(0, 0, data_file(rows=1))], 0)  # the table object now holds snapshot 1
    for identifier in (1, 2):
        prepared = coordinator.prepare([append_msg(0, 0, data_file(rows=1))], identifier)
        first = len(holds.acquired)
        with moto_server.trace() as trace:
            result = coordinator.commit_prepared(prepared)
        assert result.snapshot_ids == (identifier + 1,)
        assert len(holds.acquired) == first + 1
        window = holds.windows()[first]
        inside = [r for r in trace if window[0] <= r.at <= window[1]]
        # Exactly one request under the lock: the conditional create of the snapshot.
        assert [(r.method, _key_tail(r), r.if_none_match) for r in inside] == [
            ("PUT", f"snapshot/snapshot-{identifier + 1}", "*")
        ]
        # LATEST after the release; no PUT of the commit waits for 100-continue.
        after = [(r.method, _key_tail(r)) for r in trace if r.at > window[1]]
        assert ("PUT", "snapshot/LATEST") in after
        assert [r for r in trace if r.method == "PUT" and r.expect is not None] == []
    h = read_history(s3_catalog, "db.t")
    assert sorted(s.commit_identifier for s in h.snapshots.values()) == [0, 1, 2]
    assert table.snapshot_manager.latest_snapshot_id() == 3


@pytest.mark.parametrize("k", [3, 5])
def test_a_group_of_k_makes_its_snapshot_puts_and_the_restaged_base_lists_under_the_lock(
    s3_catalog: MetastoreCatalog, moto_server: MotoS3, holds: _Holds, k: int
) -> None:
    """A hold of ``k`` commits (one, then a batch of ``k - 1`` queued behind it): the first's base list
    was staged before the lock; each later one is staged on the snapshot before it in the hold (one
    base list PUT each), then the ``k`` snapshots are created in order, each only if absent. Nothing
    else: no HEAD, no GET, no LATEST under the lock. (Issue 39 item 3, the later base lists PUT
    concurrently, would keep the count and cut the round trips to about k + 1.)"""
    table = s3_catalog.get_table("db.t")
    warm = data_file(rows=1)
    s3_catalog.message_committer("db.t", "u", table=table).commit([append_msg(0, 0, warm)], 0)
    files = [data_file(rows=1) for _ in range(k)]
    prepared = [
        s3_catalog.message_committer("db.t", "u", table=table).prepare([append_msg(0, 0, f)], i + 1)
        for i, f in enumerate(files)
    ]
    reports: list[GroupReport] = []
    groups = GroupCommitter(
        s3_catalog.lock,
        lock_settings=s3_catalog.lock_settings,
        observer=reports.append,
        settings=GroupSettings(max_hold_seconds=30.0),
    )
    first = len(holds.acquired)
    with moto_server.trace() as trace:
        results = [f.result(60) for f in _queued_behind_the_first(s3_catalog, groups, prepared)]
        assert groups.join(30)
    assert [r.snapshot_ids for r in results] == [(i,) for i in range(2, k + 2)]
    assert [r.commits for r in reports] == [k]  # one hold
    assert len(holds.acquired) == first + 1
    inside = holds.inside(trace)
    snapshots = [(r.method, _key_tail(r), r.if_none_match) for r in inside if "/snapshot/" in r.key]
    assert snapshots == [("PUT", f"snapshot/snapshot-{i}", "*") for i in range(2, k + 2)]
    lists = [r for r in inside if "/manifest/manifest-list-" in r.key]
    assert [r.method for r in lists] == ["PUT"] * (k - 1)
    assert len(inside) == 2 * k - 1, [(r.method, r.key) for r in inside]
    assert ("PUT", "snapshot/LATEST") in [
        (r.method, _key_tail(r)) for r in trace if r.at > holds.windows()[-1][1]
    ]
    h = read_history(s3_catalog, "db.t")
    check_exactly_once(
        h, {("u", 0): warm.file_name, **{("u", i + 1): f.file_name for i, f in enumerate(files)}}
    )
    assert table.snapshot_manager.latest_snapshot_id() == k + 1


def test_a_contended_commit_holds_the_lock_for_one_s3_request(
    s3_catalog: MetastoreCatalog, moto_server: MotoS3, holds: _Holds, s3_warehouse: tuple[str, dict[str, str]]
) -> None:
    """Two commits of one table object in flight, ungrouped: the second was prepared while the first
    was in flight, so its base list was not staged before the lock (it would most likely be stale).
    The first, creating snapshot N, stages N+1's base list with it (both PUTs together: one round
    trip) and offers it; the second, finding N under the lock, takes it: its hold is one S3 request,
    ``PUT snapshot-(N+1)``. An offered list fits only the snapshot it was staged on (compared as step 7
    compares a prestaged one: id, uuid and lists)."""
    table = s3_catalog.get_table("db.t")
    warm = data_file(rows=1)
    s3_catalog.message_committer("db.t", "u", table=table).commit([append_msg(0, 0, warm)], 0)
    files = [data_file(rows=1) for _ in range(4)]
    one = s3_catalog.message_committer("db.t", "one", table=table)
    two = s3_catalog.message_committer("db.t", "two", table=table)
    first = one.prepare([append_msg(0, 0, files[0])], 1)  # staged ahead on snapshot 1 before the lock
    second = two.prepare([append_msg(0, 0, files[1])], 1)  # the first in flight: nothing staged ahead
    assert first.pendings[0].base is not None and second.pendings[0].base is None
    start = len(holds.acquired)
    with moto_server.trace() as trace:
        assert one.commit_prepared(first).snapshot_ids == (2,)
        assert two.commit_prepared(second).snapshot_ids == (3,)
    one_hold, two_hold = ([r for r in trace if a <= r.at <= b] for a, b in holds.windows()[start:])
    # The first: its snapshot and the next one's base list, PUT together.
    assert sorted((r.method, _key_tail(r).split("-")[0], r.if_none_match) for r in one_hold) == [
        ("PUT", "manifest/manifest", "*"),
        ("PUT", "snapshot/snapshot", "*"),
    ], [(r.method, r.key) for r in one_hold]
    ahead = next(r for r in one_hold if "/manifest/manifest-list-" in r.key).key.rsplit("/", 1)[-1]
    # The second: one request.
    assert [(r.method, _key_tail(r), r.if_none_match) for r in two_hold] == [
        ("PUT", "snapshot/snapshot-3", "*")
    ]
    snapshot_3 = table.snapshot_manager.snapshot(3)
    assert snapshot_3.base_manifest_list == ahead
    # Stale: the list offered with snapshot 4 fits only 4. Another engine writes snapshot 5 straight to
    # storage; the next commit, on the pointer's 4, takes the offered list, loses the create of
    # snapshot-5 (412), deletes what the attempt wrote (that list too: named by nothing) and commits
    # snapshot 6 on 5, with a base list of its own.
    three = s3_catalog.message_committer("db.t", "three", table=table)
    four = s3_catalog.message_committer("db.t", "four", table=table)
    held_3 = three.prepare([append_msg(0, 0, files[2])], 1)  # staged ahead on 3 (nothing in flight)
    held_4 = four.prepare([append_msg(0, 0, files[3])], 1)  # the third in flight: nothing staged ahead
    start = len(holds.acquired)
    with moto_server.trace() as trace:
        assert three.commit_prepared(held_3).snapshot_ids == (4,)
    (window,) = holds.windows()[start:]
    offered = [r.key for r in trace if window[0] <= r.at <= window[1] and "/manifest/manifest-list-" in r.key]
    assert len(offered) == 1
    _, options = s3_warehouse
    foreign = paimon_meta.open_table(table.path, {**options, "s3.conditional-writes": "true"})
    assert foreign.committer_factory is not None
    outsider = data_file(rows=1)
    assert foreign.committer_factory(foreign, "x").commit([append_msg(0, 0, outsider)], 1).snapshot_ids == (
        5,
    )
    with moto_server.trace() as trace:
        result = four.commit_prepared(held_4)
    assert (result.snapshot_ids, result.attempts) == ((6,), 2)
    creates = [_key_tail(r) for r in trace if r.method == "PUT" and "/snapshot/snap" in r.key]
    assert creates == ["snapshot/snapshot-5", "snapshot/snapshot-6"]
    assert offered[0] in [r.key for r in trace if r.method == "DELETE"]
    assert table.snapshot_manager.snapshot(6).base_manifest_list != offered[0].rsplit("/", 1)[-1]
    h = read_history(s3_catalog, "db.t")
    acked = {
        ("u", 0): warm.file_name,
        ("one", 1): files[0].file_name,
        ("two", 1): files[1].file_name,
        ("three", 1): files[2].file_name,
        ("x", 1): outsider.file_name,
        ("four", 1): files[3].file_name,
    }
    assert sorted(h.snapshots) == [1, 2, 3, 4, 5, 6]
    assert h.live_files == set(acked.values())  # each once
    assert sorted((s.commit_user, s.commit_identifier) for s in h.snapshots.values()) == sorted(acked)
    assert [(e["commit_user"], e["snapshot_id"]) for e in h.events_of("external")] == [("x", 5)]
    assert sorted(e["snapshot_id"] for e in h.events_of("snapshot_published")) == [1, 2, 3, 4, 6]
    check_no_orphan_manifests(h)  # the offered list the failed attempt took is gone
    assert h.pointer == 6


def _queued_behind_the_first(
    catalog: MetastoreCatalog, groups: GroupCommitter, prepared: list[Any]
) -> list[Future[CommitResult]]:
    """Submit ``prepared`` so that all but the first are queued before the first takes the lock."""
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


def test_a_snapshot_left_beyond_the_pointer_costs_one_free_retry_and_is_recorded(
    s3_catalog: MetastoreCatalog, moto_server: MotoS3, holds: _Holds, s3_warehouse: tuple[str, dict[str, str]]
) -> None:
    """Storage ahead of the pointer (another engine wrote snapshot 2 straight to S3): the commit's
    first attempt, built on the unchecked pointer, finds snapshot-2 taken (412: nothing of it named);
    the retry, at once and outside the retry budget (``commit.max-retries`` = 0 here), checks storage,
    records the outsider's snapshot ``external`` and publishes snapshot 3. Every acknowledged commit
    once; the outsider's too."""
    _, options = s3_warehouse
    table = s3_catalog.create_table(
        "db.r",
        SCHEMA,
        partition_keys=["p"],
        options={"bucket": "2", "bucket-key": "k", "commit.max-retries": "0"},
    )
    assert table.options.commit_max_retries == 0
    coordinator = s3_catalog.message_committer("db.r", "u", table=table)
    first = data_file(rows=1)
    coordinator.commit([append_msg(0, 0, first)], 0)
    foreign = paimon_meta.open_table(table.path, {**options, "s3.conditional-writes": "true"})
    assert foreign.committer_factory is not None
    outsider = data_file(rows=1)
    assert foreign.committer_factory(foreign, "outsider").commit(
        [append_msg(0, 0, outsider)], 7
    ).snapshot_ids == (2,)
    mine = data_file(rows=1)
    with moto_server.trace() as trace:
        result = coordinator.commit([append_msg(0, 0, mine)], 1)
    assert result.snapshot_ids == (3,)
    assert result.attempts == 2
    creates = [
        (_key_tail(r), r.if_none_match) for r in trace if r.method == "PUT" and "/snapshot/snap" in r.key
    ]
    assert creates == [("snapshot/snapshot-2", "*"), ("snapshot/snapshot-3", "*")]
    h = read_history(s3_catalog, "db.r")
    assert [(e["commit_user"], e["snapshot_id"]) for e in h.events_of("external")] == [("outsider", 2)]
    retried = h.events_of("retried")
    assert [(e["payload"].get("error"), e["payload"].get("wait_ms")) for e in retried] == [
        ("StorageAhead", 0.0)
    ]
    assert sorted(e["snapshot_id"] for e in h.events_of("snapshot_published")) == [1, 3]
    assert h.live_files == {first.file_name, outsider.file_name, mine.file_name}  # each once
    keys = sorted((s.commit_user, s.commit_identifier) for s in h.snapshots.values())
    assert keys == [("outsider", 7), ("u", 0), ("u", 1)]
    assert h.pointer == 3
