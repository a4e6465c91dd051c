"""Issue 4: exactly-once across a crash between publish and acknowledgement, frozen and killed lock
holders. Writers are real processes stopped at named protocol points (``commit/crashpoints.py``)."""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.crashpoints import CRASH_AT_ENV, CRASH_MODE_ENV, PAUSE_AT_ENV, CrashPoint
from tests.commit.helpers import append_msg, data_file
from tests.integration._workers import Target
from tests.integration.history import check_no_orphan_manifests, read_history
from tests.integration.procs import collect, ctx, resume, start_writer, wait_until_stopped

pytestmark = pytest.mark.postgres

LEASE = 2
# Every wait below is bounded by the lease: a writer that needed longer would fail with LockTimeoutError.
# The catalog options of the ``target``/``catalog`` fixtures (conftest.py) and of every writer.
OPTIONS = {"lock.lease-seconds": str(LEASE), "lock.acquire-timeout-seconds": str(LEASE + 20)}


def commit(catalog: MetastoreCatalog, user: str, identifier: int, file_name: str) -> Any:
    table = catalog.get_table("db.t")
    assert table.committer_factory is not None
    msg = append_msg(identifier % 2, identifier % 2, data_file(rows=1, name=file_name))
    return table.committer_factory(table, user).commit([msg], identifier)


def snapshot_etags(catalog: MetastoreCatalog) -> dict[int, str | None]:
    table = catalog.get_table("db.t")
    manager = table.snapshot_manager
    return {sid: table.file_io.status(manager.snapshot_path(sid)).etag for sid in manager.list_snapshot_ids()}


def test_same_identifier_twice_gives_one_snapshot(catalog: MetastoreCatalog) -> None:
    first = commit(catalog, "job", 3, "data-a.parquet")
    again = commit(catalog, "job", 3, "data-a.parquet")
    assert (first.snapshot_ids, again.snapshot_ids, again.deduplicated) == ((1,), (1,), True)
    h = read_history(catalog, "db.t")
    assert sorted(h.snapshots) == [1] and h.pointer == 1
    assert [e["snapshot_id"] for e in h.events_of("snapshot_published")] == [1]
    assert len(h.events_of("aborted")) == 1  # the re-run, deduplicated
    check_no_orphan_manifests(h)


def test_killed_between_publish_and_acknowledgement_then_recommitted(
    target: Target, catalog: MetastoreCatalog
) -> None:
    out = ctx.Queue()
    env = {CRASH_AT_ENV: CrashPoint.AFTER_SNAPSHOT.value, CRASH_MODE_ENV: "kill"}
    child = start_writer(target, "job", [7], out, env=env, file_names=["data-job-7.parquet"])
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    assert out.empty()  # never acknowledged
    # snapshot-1 is durable on storage; the metastore does not know it, the dead writer's row holds the lock
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]
    assert read_history(catalog, "db.t").pointer is None

    # the restarted job commits the same (user, identifier) again
    again = commit(catalog, "job", 7, "data-job-7.parquet")
    assert again.deduplicated and again.snapshot_ids == (1,)

    h = read_history(catalog, "db.t")
    assert sorted(h.snapshots) == [1] and h.pointer == 1
    assert h.live_files == {"data-job-7.parquet"}
    recovered = h.events_of("recovered")
    assert [(e["commit_user"], e["commit_identifier"], e["snapshot_id"]) for e in recovered] == [
        ("job", 7, 1)
    ]
    assert not h.events_of("snapshot_published")
    dead_owner = h.lock_events[0]["owner"]
    takeovers = [e for e in h.lock_events if e["event_type"] == "expiry_takeover"]
    assert [e["previous_owner"] for e in takeovers] == [dead_owner]
    check_no_orphan_manifests(h)


@pytest.mark.parametrize(
    "point", [CrashPoint.AFTER_LOCK, CrashPoint.BEFORE_PUBLISH, CrashPoint.AFTER_SNAPSHOT]
)
def test_a_frozen_holder_cannot_overwrite_or_duplicate_after_a_takeover(
    target: Target, catalog: MetastoreCatalog, point: CrashPoint
) -> None:
    out = ctx.Queue()
    child = start_writer(
        target, "frozen", [1], out, env={PAUSE_AT_ENV: point.value}, file_names=["data-frozen.parquet"]
    )
    try:
        wait_until_stopped(child)  # holding the lock (and at BEFORE_PUBLISH/AFTER_SNAPSHOT, its row lock)
        live = commit(catalog, "live", 1, "data-live.parquet")  # waits out the frozen holder's lease
        frozen_published_first = point is CrashPoint.AFTER_SNAPSHOT
        assert live.snapshot_ids == ((2,) if frozen_published_first else (1,))
        etags = snapshot_etags(catalog)
    finally:
        resume(child)
    messages = collect(out, [child], timeout=120)
    (ack,) = [m for m in messages if m[0] == "acked"]
    assert ack[4] == ((1,) if frozen_published_first else (2,)) and not ack[5]

    h = read_history(catalog, "db.t")
    assert sorted(h.snapshots) == [1, 2] and h.pointer == 2
    assert h.live_files == {"data-frozen.parquet", "data-live.parquet"}
    assert {(s.commit_user, s.commit_identifier) for s in h.snapshots.values()} == {
        ("frozen", 1),
        ("live", 1),
    }
    assert {sid: etags[sid] for sid in etags} == {sid: snapshot_etags(catalog)[sid] for sid in etags}
    if frozen_published_first:
        # its snapshot was found on storage by the next holder and recorded for it
        assert [(e["commit_user"], e["snapshot_id"]) for e in h.events_of("recovered")] == [("frozen", 1)]
        assert [(e["commit_user"], e["snapshot_id"]) for e in h.events_of("snapshot_published")] == [
            ("live", 2)
        ]
    else:
        # its publish was refused (lost lease / lost race): it retried on top of the new snapshot
        assert ack[6] == 2
        assert sorted((e["commit_user"], e["snapshot_id"]) for e in h.events_of("snapshot_published")) == [
            ("frozen", 2),
            ("live", 1),
        ]
        (retried,) = h.events_of("retried")
        assert retried["commit_user"] == "frozen"
        # frozen before the fencing check: the fence refuses; after it: the atomic create does
        refused_by = "lost" if point is CrashPoint.AFTER_LOCK else "was published by another writer"
        assert refused_by in retried["payload"]["reason"]
    frozen_owner = next(e["owner"] for e in h.lock_events if e["event_type"] == "acquired")
    takeovers = [e for e in h.lock_events if e["event_type"] == "expiry_takeover"]
    assert [e["previous_owner"] for e in takeovers] == [frozen_owner]
    check_no_orphan_manifests(h)


def test_a_killed_holder_is_taken_over_within_the_lease(target: Target, catalog: MetastoreCatalog) -> None:
    out = ctx.Queue()
    child = start_writer(target, "doomed", [1], out, env={PAUSE_AT_ENV: CrashPoint.AFTER_LOCK.value})
    wait_until_stopped(child)
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(30)
    # lock.acquire-timeout-seconds (lease + 20 s) bounds this; Java's lock would hold it 8 minutes
    result = commit(catalog, "next", 1, f"data-{uuid.uuid4()}.parquet")
    assert result.snapshot_ids == (1,)
    h = read_history(catalog, "db.t")
    doomed = h.lock_events[0]["owner"]
    assert [e["event_type"] for e in h.lock_events] == ["acquired", "expiry_takeover", "acquired", "released"]
    assert h.lock_events[1]["previous_owner"] == doomed and h.lock_events[1]["owner"] != doomed
    assert [s.commit_user for s in h.snapshots.values()] == ["next"]
    # the killed writer's commit stays pending (prepared, never published): recovery's business
    pending = catalog.events.pending_commits(catalog.registry.get_table_row("db", "t").table_id)
    assert [p.prepared.ref.commit_user for p in pending] == ["doomed"]
