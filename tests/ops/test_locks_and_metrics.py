"""Lock tooling (list, stale detection, release with operator and reason) and metrics from the log."""

from __future__ import annotations

import contextlib
import re
import urllib.error
import urllib.request
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import MaintenanceKind
from paimon_meta.errors import CommitConflictError, LockLostError, NotFoundError
from paimon_meta.ops import metrics
from paimon_meta.ops.common import RefusedError
from paimon_meta.ops.locks import list_locks, release_lock
from tests.commit.helpers import append_msg, compact_msg, data_file
from tests.fixtures.horizon import wait_for_horizon
from tests.ops.helpers import FAST_LOCK

pytestmark = pytest.mark.postgres


def lock_events(catalog: MetastoreCatalog, lock_id: str) -> list[dict[str, Any]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT * FROM paimon_lock_events WHERE lock_id = :l ORDER BY event_id"), {"l": lock_id}
        )
        return [dict(r._mapping) for r in rows]


def test_a_live_java_lock_is_only_released_by_force_and_the_release_is_recorded(
    catalog: MetastoreCatalog,
) -> None:
    with catalog.engine.begin() as conn:  # exactly what Java's JdbcCatalogLock inserts
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) "
                "VALUES ('jdbc.db.t', 480)"
            )
        )
    [row] = list_locks(catalog.lock)
    assert (row.lock_id, row.kind, row.owner, row.stale) == ("jdbc.db.t", "java", None, False)
    assert 470 < row.lease_left_seconds <= 480 and row.heartbeat_at is None

    with pytest.raises(RefusedError, match="live"):
        release_lock(catalog.lock, "jdbc.db.t", reason="looks stuck")
    assert len(list_locks(catalog.lock)) == 1 and lock_events(catalog, "jdbc.db.t") == []

    result = release_lock(
        catalog.lock, "jdbc.db.t", reason="java job was killed", force=True, operator="ops@box"
    )
    assert result.forced and result.lock.kind == "java"
    assert list_locks(catalog.lock) == []
    [event] = lock_events(catalog, "jdbc.db.t")
    assert (event["event_type"], event["operator"], event["reason"], event["previous_owner"]) == (
        "force_released",
        "ops@box",
        "java job was killed",
        None,
    )
    assert event["payload"]["java"] is True
    with pytest.raises(NotFoundError):
        release_lock(catalog.lock, "jdbc.db.t", reason="again", force=True)


def test_stale_rows_are_flagged_and_released_without_force_live_leases_are_refused(
    catalog: MetastoreCatalog,
) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, acquired_at, expire_time_seconds) "
                "VALUES ('jdbc.db.old', now() - interval '10 minutes', 60)"
            )
        )
    lease = catalog.lock.acquire("jdbc.db.live", owner="writer-1", lease_seconds=30)
    try:
        rows = {r.lock_id: r for r in list_locks(catalog.lock)}
        assert rows["jdbc.db.old"].stale and rows["jdbc.db.old"].lease_left_seconds < -500
        assert not rows["jdbc.db.live"].stale and rows["jdbc.db.live"].kind == "paimon_meta"
        assert rows["jdbc.db.live"].fencing_token == lease.fencing_token
        assert rows["jdbc.db.live"].heartbeat_age_seconds is not None
        assert [r.lock_id for r in list_locks(catalog.lock, stale_only=True)] == ["jdbc.db.old"]

        stale = release_lock(catalog.lock, "jdbc.db.old", reason="expired holder", operator="ops@box")
        assert not stale.forced
        [event] = lock_events(catalog, "jdbc.db.old")
        assert (event["operator"], event["reason"], event["payload"]["forced"]) == (
            "ops@box",
            "expired holder",
            False,
        )

        with pytest.raises(RefusedError):
            release_lock(catalog.lock, "jdbc.db.live", reason="no")
        forced = release_lock(catalog.lock, "jdbc.db.live", reason="operator override", force=True)
        assert forced.lock.owner == "writer-1"
        with pytest.raises(LockLostError):
            lease.renew()  # the former holder finds out at its next heartbeat (and cannot publish)
    finally:
        lease.release()


def test_rows_whose_holder_stopped_renewing_are_flagged_overdue_until_it_renews(
    catalog: MetastoreCatalog,
) -> None:
    """A holder that lost its metastore connection stops renewing: its row shows ``heartbeat_overdue``
    (not stale: the lease still runs) once half the lease passed without a renewal, and ``live`` again
    once it renews."""
    lease = catalog.lock.acquire("jdbc.db.cut", owner="writer-1", lease_seconds=30, heartbeat=False)
    fresh = catalog.lock.acquire("jdbc.db.fine", owner="writer-2", lease_seconds=30, heartbeat=False)
    try:
        with catalog.engine.begin() as conn:  # its last renewal 20 s ago, its lease refreshed 1 s ago
            conn.execute(
                text(
                    "UPDATE paimon_distributed_locks SET heartbeat_at = now() - interval '20 seconds' "
                    "WHERE lock_id = 'jdbc.db.cut'"
                )
            )
        rows = {r.lock_id: r for r in list_locks(catalog.lock)}
        cut, fine = rows["jdbc.db.cut"], rows["jdbc.db.fine"]
        assert (cut.state, cut.heartbeat_overdue, cut.stale) == ("heartbeat_overdue", True, False)
        assert (fine.state, fine.heartbeat_overdue) == ("live", False)
        assert [r.lock_id for r in list_locks(catalog.lock, overdue_only=True)] == ["jdbc.db.cut"]
        lease.renew()  # its connection is back
        assert list_locks(catalog.lock, overdue_only=True) == []
    finally:
        lease.release()
        fresh.release()


def test_java_and_stale_rows_are_never_overdue(catalog: MetastoreCatalog) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, acquired_at, expire_time_seconds) VALUES "
                "('jdbc.db.java', now(), 600), ('jdbc.db.gone', now() - interval '10 minutes', 60)"
            )
        )
    rows = {r.lock_id: r for r in list_locks(catalog.lock)}
    assert (rows["jdbc.db.java"].state, rows["jdbc.db.java"].heartbeat_overdue) == ("java", False)
    assert (rows["jdbc.db.gone"].state, rows["jdbc.db.gone"].heartbeat_overdue) == ("stale", False)


def _samples(exposition: str) -> dict[str, float]:
    out = {}
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_from_the_event_log_in_prometheus_format(catalog: MetastoreCatalog) -> None:
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False)])
    table = catalog.create_table("db.m", schema, partition_keys=["p"], options={"bucket": "2"})
    f = data_file()
    assert table.committer_factory is not None
    table.committer_factory(table, "w").commit([append_msg(0, 0, f)], 1)
    for name in ("a", "b"):  # two compactions of the same file: the second conflicts
        t = catalog.get_table("db.m")
        assert t.committer_factory is not None
        with contextlib.suppress(CommitConflictError):
            t.committer_factory(t, name).commit(
                [compact_msg(0, 0, [f], [data_file(name=f"data-{name}.parquet")])], 1
            )

    wait_for_horizon(catalog.engine)
    exposition = metrics.scrape(catalog.engine)
    s = _samples(exposition)
    assert s['paimon_meta_commits_total{catalog="jdbc",table="db.m",kind="APPEND",outcome="published"}'] == 1
    assert s['paimon_meta_commits_total{catalog="jdbc",table="db.m",kind="COMPACT",outcome="published"}'] == 1
    assert s['paimon_meta_commits_total{catalog="jdbc",table="db.m",kind="COMPACT",outcome="failed"}'] == 1
    assert (
        s['paimon_meta_commit_conflicts_total{catalog="jdbc",table="db.m",reason="delete_of_absent_file"}']
        == 1
    )
    assert s['paimon_meta_commit_attempts_total{catalog="jdbc",table="db.m"}'] == 3
    assert s['paimon_meta_commits_pending{catalog="jdbc",table="db.m"}'] == 0
    assert s['paimon_meta_lock_events_total{catalog="jdbc",lock="jdbc.db.m",event="acquired"}'] == 3
    assert s['paimon_meta_locks_held{holder="java"}'] == 0
    for family, label in (
        ("paimon_meta_commit_duration_seconds", 'catalog="jdbc",table="db.m"'),
        ("paimon_meta_lock_wait_seconds", 'catalog="jdbc",lock="jdbc.db.m"'),
    ):
        buckets = [
            (le, v)
            for k, v in s.items()
            if (m := re.fullmatch(rf'{family}_bucket\{{{label},le="([^"]+)"\}}', k))
            for le in [m.group(1)]
        ]
        counts = [v for _, v in buckets]
        assert counts == sorted(counts) and buckets[-1][0] == "+Inf"
        assert buckets[-1][1] == s[f"{family}_count{{{label}}}"] == 3
    assert "# TYPE paimon_meta_commit_duration_seconds histogram" in exposition

    server = metrics.MetricsServer(catalog.engine, 0).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert "paimon_meta_commits_total" in response.read().decode()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/nope", timeout=10)
        assert missing.value.code == 404
    finally:
        server.close()


def test_lock_age_is_the_time_held_while_heartbeats_keep_renewing_it(catalog: MetastoreCatalog) -> None:
    """A writer hung while holding the lock: its heartbeat renews the row every lease/3, so the time since
    the renewal stays small, but the age ``locks list`` shows is how long it has been held."""
    import time

    lease = catalog.lock.acquire("jdbc.db.hung", owner="hung-writer", lease_seconds=1, timeout_seconds=5)
    with lease:
        deadline = time.monotonic() + 60
        renewed_past_held = None
        while time.monotonic() < deadline:
            [row] = list_locks(catalog.lock)
            assert row.state == "live" and row.held_since is not None
            if row.heartbeat_at is not None and row.heartbeat_at > row.held_since and row.age_seconds > 3:
                renewed_past_held = row
                break
            time.sleep(0.2)
        assert renewed_past_held is not None, "the held age never passed three leases"
        # renewed within the last lease, held for longer than three: what a hung writer looks like
        assert renewed_past_held.heartbeat_age_seconds is not None
        assert renewed_past_held.heartbeat_age_seconds < renewed_past_held.age_seconds
        assert renewed_past_held.lease_left_seconds > 0


def test_the_event_log_metrics_of_two_catalogs_are_apart(catalog: MetastoreCatalog, tmp_path: Any) -> None:
    """``db.t`` of two catalogs are two series (label ``catalog``: the catalog's name, its key when the
    metastore records no catalog for it), for commits, locks and maintenance."""
    import paimon_meta
    from paimon_meta.maintenance.queue import MaintenanceQueue
    from paimon_meta.metastore.catalogs import Catalogs

    Catalogs(catalog.engine).create("b", str(tmp_path / "wh-b"), catalog_key="kb")
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False)])
    with paimon_meta.connect(catalog.info.metastore_url, catalog="b", **FAST_LOCK) as b:
        for cat, commits in ((catalog, 1), (b, 2)):
            cat.create_table("db.t", schema, partition_keys=["p"], options={"bucket": "2"})
            for n in range(commits):
                t = cat.get_table("db.t")
                assert t.committer_factory is not None
                t.committer_factory(t, "w").commit(
                    [append_msg(0, 0, data_file(name=f"data-{n}.parquet"))], n + 1
                )
            MaintenanceQueue(cat.engine, cat.registry.catalog_key).enqueue(
                cat.table_row("db.t").table_id, "db.t", MaintenanceKind.COMPACT, reason="debt"
            )
    wait_for_horizon(catalog.engine)
    s = _samples(metrics.scrape(catalog.engine))
    assert s['paimon_meta_commits_total{catalog="jdbc",table="db.t",kind="APPEND",outcome="published"}'] == 1
    assert s['paimon_meta_commits_total{catalog="b",table="db.t",kind="APPEND",outcome="published"}'] == 2
    assert s['paimon_meta_lock_events_total{catalog="jdbc",lock="jdbc.db.t",event="acquired"}'] == 1
    assert s['paimon_meta_lock_events_total{catalog="b",lock="kb.db.t",event="acquired"}'] == 2
    assert s['paimon_meta_lock_wait_seconds_count{catalog="b",lock="kb.db.t"}'] == 2
    assert s['paimon_meta_commit_duration_seconds_count{catalog="b",table="db.t"}'] == 2
    assert s['paimon_meta_commit_duration_seconds_count{catalog="jdbc",table="db.t"}'] == 1
    assert s['paimon_meta_maintenance_jobs{catalog="b",kind="compact",state="queued"}'] == 1
    assert s['paimon_meta_maintenance_jobs{catalog="jdbc",kind="compact",state="queued"}'] == 1
