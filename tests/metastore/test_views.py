"""The audit views over the event log, on a database of their own."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from paimon_meta.metastore.events import (
    CommitRef,
    ConflictChecked,
    EventLog,
    External,
    Failed,
    Prepared,
    Retried,
    SnapshotPublished,
)
from paimon_meta.metastore.lock import MetastoreLock
from paimon_meta.model.snapshot import CommitKind

pytestmark = pytest.mark.postgres


def _ref(identifier: int, kind: CommitKind = CommitKind.APPEND) -> CommitRef:
    return CommitRef.new(
        table_id=1,
        table_identifier="db.t",
        commit_user="writer",
        commit_identifier=identifier,
        commit_kind=kind,
    )


def test_commit_views(clean_engine: Engine) -> None:
    published, failed, pending = _ref(1), _ref(2, CommitKind.COMPACT), _ref(3)
    external = _ref(4)
    with clean_engine.begin() as conn:
        append = EventLog.append
        append(conn, Prepared(ref=published, messages=b"m", messages_version=14, duration_ms=2.0))
        append(conn, ConflictChecked(ref=published, conflict=True, base_snapshot_id=1, reason="LSM overlap"))
        append(conn, Retried(ref=published, reason="conflict", wait_ms=12.5))
        append(conn, ConflictChecked(ref=published, attempt=2, conflict=False, duration_ms=3.0))
        append(conn, SnapshotPublished(ref=published, attempt=2, snapshot_id=2, duration_ms=4.0))
        append(conn, Prepared(ref=failed, messages=b"m", messages_version=14))
        append(conn, Failed(ref=failed, reason="retries exhausted"))
        append(conn, Prepared(ref=pending, messages=b"m", messages_version=14))
        append(conn, External(ref=external, snapshot_id=3))

    with clean_engine.connect() as conn:
        history = {
            r.commit_identifier: r
            for r in conn.execute(text("SELECT * FROM paimon_commit_history ORDER BY first_event_at"))
        }
        conflicts = conn.execute(text("SELECT * FROM paimon_commit_conflicts")).all()
        retries = conn.execute(text("SELECT * FROM paimon_commit_retries")).all()

    assert {k: v.outcome for k, v in history.items()} == {
        1: "published",
        2: "failed",
        3: "pending",
        4: "external",
    }
    row = history[1]
    assert (row.snapshot_id, row.attempts, row.retries, row.conflicts) == (2, 2, 1, 1)
    assert (row.prepare_ms, row.conflict_check_ms, row.publish_ms, row.retry_wait_ms) == (2.0, 3.0, 4.0, 12.5)
    assert row.commit_kind == "APPEND" and row.table_identifier == "db.t" and row.event_count == 5
    assert row.last_event_at >= row.first_event_at and row.elapsed_ms >= 0
    assert history[2].commit_kind == "COMPACT" and history[2].final_reason == "retries exhausted"
    assert history[3].snapshot_id is None and history[4].snapshot_id == 3

    assert len(conflicts) == 1
    assert (conflicts[0].commit_id, conflicts[0].base_snapshot_id, conflicts[0].reason) == (
        published.commit_id,
        1,
        "LSM overlap",
    )
    assert [(r.commit_id, r.attempt, r.reason, r.wait_ms) for r in retries] == [
        (published.commit_id, 1, "conflict", 12.5)
    ]


def test_lock_activity_view(clean_engine: Engine) -> None:
    with MetastoreLock(clean_engine) as lock:
        first = lock.acquire("jdbc.db.v", owner="a", lease_seconds=5)
        first.release()
        second = lock.acquire("jdbc.db.v", owner="b", lease_seconds=5)
        lock.force_release("jdbc.db.v", operator="ops", reason="stuck")
        third = lock.acquire("jdbc.db.v", owner="c", lease_seconds=5, heartbeat=False)
        with clean_engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT * FROM paimon_lock_activity WHERE lock_id = 'jdbc.db.v' ORDER BY acquire_event_id"
                )
            ).all()
        third.release()
        second.release()  # its row is gone: no effect
    assert [(r.owner, r.fencing_token, r.ended_by, r.still_open) for r in rows] == [
        ("a", first.fencing_token, "released", False),
        ("b", second.fencing_token, "force_released", False),
        ("c", third.fencing_token, None, True),
    ]
    assert rows[1].ended_by_operator == "ops" and rows[1].end_reason == "stuck"
    assert rows[0].held_ms >= 0
