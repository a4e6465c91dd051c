"""A REST commit cut off at any step leaves states recovery resolves: one whose snapshot reached storage
is recorded ``recovered`` (matched by the snapshot's uuid, not by its (user, identifier, kind), which a
REST client reuses), one that never did is aborted; neither is re-committed by the server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit import crashpoints
from paimon_meta.commit.crashpoints import CrashPoint
from paimon_meta.commit.metastore.snapshot_commit import SnapshotCommitRequest
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops.recovery import recover_table
from paimon_meta.serde.json import snapshot_from_json
from tests.service.helpers import commit_body, seed

pytestmark = pytest.mark.postgres


class _Killed(BaseException):
    """Stands for the process dying: not an Exception, so no handler of the commit path records it."""


def _request(base: Snapshot) -> SnapshotCommitRequest:
    body = commit_body(base)
    return SnapshotCommitRequest(body["baseSnapshotUuid"], snapshot_from_json(json.dumps(body["snapshot"])))


def _commit(
    catalog: MetastoreCatalog, request: SnapshotCommitRequest, *, die_at: CrashPoint | None = None
) -> Any:
    row = catalog.table_row("db.t")
    table = catalog.get_table("db.t")
    committer = catalog.snapshot_committer(row, table, principal="p")
    if die_at is None:
        return committer.commit(request)
    original = crashpoints.reached

    def reached(point: CrashPoint) -> None:
        if point is die_at:
            raise _Killed(point.value)
        original(point)

    crashpoints.reached = reached
    try:
        with pytest.raises(_Killed):
            committer.commit(request)
    finally:
        crashpoints.reached = original
    return None


def _events(catalog: MetastoreCatalog) -> list[tuple[str, str, int | None, str | None]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT commit_id::text, event_type, snapshot_id, payload->>'resolution' AS resolution"
                " FROM paimon_commit_events WHERE commit_user = 'rest-user'"
                # conflict_checked is an audit note the in-process "kill" still flushes at the lock release
                " AND event_type <> 'conflict_checked' ORDER BY event_id"
            )
        ).all()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def test_snapshot_on_storage_is_recorded_recovered(service_catalog: MetastoreCatalog) -> None:
    base = seed(service_catalog)
    request = _request(base)
    _commit(service_catalog, request, die_at=CrashPoint.AFTER_SNAPSHOT)
    table = service_catalog.get_table("db.t")
    assert table.snapshot_manager.latest_snapshot_id() == 2  # on storage, not in the log
    assert [e[1] for e in _events(service_catalog)] == ["prepared"]

    # The client retries (its base is stale now): a conflict answer, then it finds snapshot 2 itself.
    retry = _commit(service_catalog, _request(base))
    assert retry.success is False
    events = _events(service_catalog)
    first = events[0][0]
    recorded = [e for e in events if e[0] == first]
    # the retry's own reconcile recorded the crashed commit's snapshot, matched by its uuid
    assert [(e[1], e[2], e[3]) for e in recorded] == [("prepared", None, None), ("recovered", 2, "published")]
    assert recover_table(service_catalog, "db.t", older_than_seconds=0).commits == []
    assert table.snapshot_manager.latest_snapshot_id() == 2


def test_unpublished_rest_commit_is_aborted_not_recommitted(service_catalog: MetastoreCatalog) -> None:
    base = seed(service_catalog)
    _commit(service_catalog, _request(base), die_at=CrashPoint.AFTER_LOCK)
    # Another commit of the same client (same user, identifier and kind) lands meanwhile.
    assert _commit(service_catalog, _request(base)).success
    report = recover_table(service_catalog, "db.t", older_than_seconds=0)
    assert [(c.action, c.snapshot_id) for c in report.commits] == [("aborted", None)]
    assert "never reached storage" in (report.commits[0].reason or "")
    assert service_catalog.get_table("db.t").snapshot_manager.latest_snapshot_id() == 2


def test_recovery_leaves_a_young_rest_commit_alone(service_catalog: MetastoreCatalog) -> None:
    base = seed(service_catalog)
    _commit(service_catalog, _request(base), die_at=CrashPoint.AFTER_LOCK)
    report = recover_table(service_catalog, "db.t", older_than_seconds=3600)
    assert [c.action for c in report.commits] == ["skipped"]
