"""A publisher frozen inside the publish step while its metastore session dies.

Writer A has validated its lease (the publishing transaction holds the lock row FOR KEY SHARE) and is
about to create ``snapshot-N``; then its process freezes (heartbeat included) and its Postgres session
is ended (``pg_terminate_backend`` here; in production an ``idle_in_transaction_session_timeout``, a
failover, a restart or a dropped TCP connection do the same). Writer B takes the lock over once A's
lease has expired and publishes ``snapshot-N``. Then A resumes and completes its create.

With conditional writes A's ``PUT If-None-Match: *`` fails (412), A retries on top of B, and both
commits are present once. Without them ``create_if_absent`` is HEAD-then-PUT; A did its HEAD before
freezing, so its PUT replaces B's acknowledged snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit import crashpoints
from paimon_meta.commit.coordinator import CommitCoordinator, CommitResult
from paimon_meta.io import S3FileIO
from paimon_meta.metastore.lock import LockLease
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.ops.recovery import recover_table
from tests.torture import workload
from tests.torture.checker import check_exactly_once, check_table
from tests.torture.pg import terminate_backends

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

LEASE = "2"


def _committer(catalog: MetastoreCatalog, user: str) -> CommitCoordinator:
    table = catalog.get_table(workload.TABLE)
    assert table.committer_factory is not None
    return cast(CommitCoordinator, table.committer_factory(table, user))


@pytest.fixture
def frozen_owners(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Lease owners whose heartbeat is frozen: every renewal fails as if the process did not run."""
    owners: set[str] = set()
    renew = LockLease.renew

    def frozen_renew(self: LockLease) -> None:
        if self.owner in owners:
            raise ConnectionError("the process is frozen (test)")
        renew(self)

    monkeypatch.setattr(LockLease, "renew", frozen_renew)
    yield owners


def _pause_snapshot_put(file_io: S3FileIO, conditional: bool, gate: threading.Event) -> threading.Event:
    """Block A's snapshot PUT (after its HEAD, for the non-conditional create) until ``gate``."""
    reached = threading.Event()
    name = "_conditional_put" if conditional else "write"
    original: Callable[..., Any] = getattr(file_io, name)

    def paused(path: str, *args: Any) -> Any:
        if "/snapshot/snapshot-" in path:
            reached.set()
            assert gate.wait(60), "never released"
        return original(path, *args)

    setattr(file_io, name, paused)
    return reached


@pytest.mark.parametrize(
    "conditional",
    [
        True,
        pytest.param(
            False,
            marks=pytest.mark.xfail(
                strict=True,
                reason="BUG: without conditional writes a publisher frozen between its HEAD and PUT of "
                "snapshot-N, whose publishing transaction died, overwrites the snapshot-N of the writer "
                "that took over: an acknowledged commit is lost",
            ),
        ),
    ],
    ids=["conditional-writes", "no-conditional-writes"],
)
def test_frozen_publisher_whose_session_died(
    conditional: bool, clean_db: str, request: pytest.FixtureRequest, frozen_owners: set[str]
) -> None:
    uri, options = request.getfixturevalue(
        "s3_warehouse" if conditional else "s3_warehouse_without_conditions"
    )
    options = {**options, "s3.conditional-writes": str(conditional).lower(), "lock.lease-seconds": LEASE}
    with (
        paimon_meta.connect(clean_db, uri, **options) as cat_a,
        paimon_meta.connect(clean_db, uri, **options) as cat_b,
    ):
        cat_a.create_table(
            workload.TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS
        )
        a, b = _committer(cat_a, "zombie-a"), _committer(cat_b, "zombie-b")
        assert isinstance(cat_a.file_io, S3FileIO)
        a.commit(workload.messages(0, 0), 0)  # snapshot 1
        gate = threading.Event()
        reached = _pause_snapshot_put(cat_a.file_io, conditional, gate)
        results: dict[str, CommitResult | BaseException] = {}

        def commit_a() -> None:
            try:
                results["a"] = a.commit(workload.messages(0, 1), 1)
            except BaseException as e:
                results["a"] = e

        thread = threading.Thread(target=commit_a)
        thread.start()
        try:
            assert reached.wait(30), "A never reached its snapshot PUT"
            frozen_owners.add(a.guard.owner)  # type: ignore[attr-defined]
            # A's session dies while it is frozen: its publishing transaction (and row lock) with it.
            terminate_backends(clean_db, application_name=None)
            results["b"] = b.commit(workload.messages(1, 0), 0)  # takes over once A's lease is over
        finally:
            gate.set()
            thread.join(120)
        frozen_owners.clear()
        outcome_a, outcome_b = results["a"], results["b"]
        assert isinstance(outcome_b, CommitResult), outcome_b
        # Whatever A was told, a retry of its identifier must end with exactly one snapshot.
        if not isinstance(outcome_a, CommitResult):
            a.commit(workload.messages(0, 1), 1)
        result = check_table(cat_b, workload.TABLE)
        check_exactly_once(result, "zombie-b", 0, workload.kinds(0))
        check_exactly_once(result, "zombie-a", 1, workload.kinds(1))
        check_exactly_once(result, "zombie-a", 0, workload.kinds(0))
        assert not result.violations, f"A: {outcome_a!r}\nB: {outcome_b!r}\n" + "\n".join(result.violations)


def test_recovery_spares_the_compaction_of_a_restarted_writers_call(
    clean_db: str, s3_warehouse: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer process prepared a commit that appends and compacts (two snapshots) and died once its
    APPEND's ``prepared`` event was recorded. Restarted, it commits the same identifier again: the
    APPEND is published, then, before its COMPACT is announced, recovery runs. Recovery ends the dead
    APPEND as a duplicate and deletes the dead attempt's files; the restarted writer's COMPACT delta
    manifests (written when its call was prepared, by their own manifest writer) must survive, since it
    publishes them next. (Recovery once matched them to the dead APPEND, whose stored messages carry the
    compaction too: the table's latest snapshot named a deleted manifest list. Found by the S3 torture
    run in CI.)"""
    uri, options = s3_warehouse
    identifier = workload.COMPACT_EVERY - 1
    assert workload.kinds(identifier) == (CommitKind.APPEND, CommitKind.COMPACT)
    with (
        paimon_meta.connect(clean_db, uri, **options) as cat_dead,
        paimon_meta.connect(clean_db, uri, **options) as cat_w,
    ):
        cat_dead.create_table(
            workload.TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS
        )
        writer = _committer(cat_w, "zombie-a")
        for i in range(identifier):
            writer.commit(workload.messages(0, i), i)
        # The process that died: its APPEND's prepared event is recorded (with the lock), nothing else.
        dead = _committer(cat_dead, "zombie-a")
        dead_call = dead.prepare(workload.messages(0, identifier), identifier)
        dead_commit = dead.announce(dead_call)
        assert dead_commit is not None
        with dead.guard.session(dead_commit, 1):
            pass
        # The restarted writer: stop it right after its APPEND is recorded, before its COMPACT.
        gate, between = threading.Event(), threading.Event()
        reached = crashpoints.reached

        def pause_between(point: crashpoints.CrashPoint) -> None:
            reached(point)
            if point is crashpoints.CrashPoint.AFTER_EVENT and not between.is_set():
                between.set()
                assert gate.wait(60), "never released"

        monkeypatch.setattr(crashpoints, "reached", pause_between)
        results: dict[str, CommitResult | BaseException] = {}

        def commit_again() -> None:
            try:
                results["w"] = writer.commit(workload.messages(0, identifier), identifier)
            except BaseException as e:
                results["w"] = e

        thread = threading.Thread(target=commit_again)
        thread.start()
        try:
            assert between.wait(30), "the APPEND was never published"
            report = recover_table(cat_dead, workload.TABLE, older_than_seconds=0)
        finally:
            gate.set()
            thread.join(60)
        assert [(c.commit_id, c.action) for c in report.commits] == [(dead_commit, "aborted")], report
        assert isinstance(results["w"], CommitResult), results["w"]
        result = check_table(cat_w, workload.TABLE)
        for i in range(identifier + 1):
            check_exactly_once(result, "zombie-a", i, workload.kinds(i))
        assert not result.violations, "\n".join(result.violations)
