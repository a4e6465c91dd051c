"""The console's admin actions: each works with a reason and records it with the principal; each is
refused (403 without or with a wrong CSRF token, from another Origin, without the grant; 400 without a
reason) with nothing written to the logs or to storage."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.service.console import session
from tests.fixtures.service import make_principal
from tests.service.console.test_console_pages import count_testid, sign_in
from tests.service.helpers import seed, state_of_storage

pytestmark = pytest.mark.postgres

T = "/ui/tables/db/t"


@pytest.fixture
def tokens(service_catalog: MetastoreCatalog) -> dict[str, str]:
    seed(service_catalog)
    table = service_catalog.get_table("db.t")
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([4], pa.int64()), "p": ["c"], "v": ["w"]}))
    commit.commit(write.prepare_commit())
    write.close()
    return {
        "admin": make_principal(service_catalog, "ops", [("admin", "db", None)]),
        "writer": make_principal(service_catalog, "writer", [("write", "db", "t")]),
        "reader": make_principal(service_catalog, "reader", [("read", "db", None)]),
    }


def logs(catalog: MetastoreCatalog) -> dict[str, Any]:
    """Everything an action could write: the three logs, the lock rows, the table's files."""
    with catalog.engine.connect() as conn:
        counts = {
            t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()  # noqa: S608 - constants
            for t in (
                "paimon_commit_events",
                "paimon_lock_events",
                "paimon_maintenance_events",
                "paimon_distributed_locks",
            )
        }
    return {**counts, "storage": state_of_storage(catalog)}


def runs(catalog: MetastoreCatalog, operation: str) -> list[Any]:
    with catalog.engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT event_type, principal, payload FROM paimon_maintenance_events"
                    " WHERE operation = :op ORDER BY event_id"
                ),
                {"op": operation},
            )
        )


def dead_holder(catalog: MetastoreCatalog) -> str:
    """A lock row of db.t whose holder died (no heartbeat for a while; its lease not over yet)."""
    lock_id = catalog.registry.lock_id("db", "t")
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, acquired_at, expire_time_seconds, owner,"
                " fencing_token, heartbeat_at, lease_seconds, hostname, pid) VALUES (:id,"
                " CURRENT_TIMESTAMP, 600, 'writer-1:dead', 7, now() - interval '400 seconds', 600,"
                " 'host-a', 4242)"
            ),
            {"id": lock_id},
        )
    return lock_id


def waiting_writer(catalog: MetastoreCatalog) -> None:
    """A commit of db.t that wrote its ``prepared`` event and waits for the lock."""
    row = catalog.registry.get_table_row("db", "t")
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type,"
                " commit_user, commit_identifier, commit_kind, payload, principal) VALUES"
                " (gen_random_uuid(), :id, 'db.t', 'prepared', 'waiting-user', 9, 'APPEND',"
                " '{\"source\": \"rest\"}', 'writer')"
            ),
            {"id": row.table_id},
        )


ACTIONS: list[tuple[str, dict[str, str]]] = [
    (f"{T}/tags", {"tag": "keep-1"}),
    (f"{T}/rollback", {"snapshot_id": "1"}),
    (f"{T}/recover", {}),
    (f"{T}/expire-snapshots", {}),
    (f"{T}/remove-orphan-files", {}),
]


@pytest.mark.parametrize(("path", "fields"), ACTIONS, ids=["tag", "rollback", "recover", "expire", "orphans"])
def test_refused_actions_write_nothing(
    service_client: TestClient,
    service_catalog: MetastoreCatalog,
    tokens: dict[str, str],
    path: str,
    fields: dict[str, str],
) -> None:
    sign_in(service_client, tokens["admin"])
    good = session.csrf_token(tokens["admin"])
    before = logs(service_catalog)
    assert service_client.post(path, data={**fields, "reason": "r"}).status_code == 403  # no CSRF token
    wrong = session.csrf_token(tokens["reader"])  # another session's
    assert service_client.post(path, data={**fields, "reason": "r", "csrf_token": wrong}).status_code == 403
    evil = {"Origin": "https://evil.example"}
    r = service_client.post(path, data={**fields, "reason": "r", "csrf_token": good}, headers=evil)
    assert r.status_code == 403
    r = service_client.post(path, data={**fields, "reason": "  ", "csrf_token": good})
    assert r.status_code == 400 and "reason" in r.text
    # a read-only principal: its own valid CSRF token, no grant
    service_client.cookies.clear()
    sign_in(service_client, tokens["reader"])
    r = service_client.post(
        path, data={**fields, "reason": "r", "csrf_token": session.csrf_token(tokens["reader"])}
    )
    assert r.status_code == 403
    assert logs(service_catalog) == before


def test_tags_are_created_and_deleted_with_reason_and_principal(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    sign_in(service_client, tokens["writer"])
    csrf = session.csrf_token(tokens["writer"])
    page = service_client.get(T).text
    assert count_testid(page, "admin-actions") == 1
    assert "rollback-form" not in page and "recover-form" not in page  # write, not admin
    r = service_client.post(
        f"{T}/tags", data={"tag": "keep-1", "snapshot_id": "1", "reason": "audit", "csrf_token": csrf}
    )
    assert r.status_code == 200 and "Tag created on snapshot 1." in r.text
    assert count_testid(r.text, "tag-row") == 1
    started = runs(service_catalog, "create_tag")[0]
    assert started.principal == "writer" and started.payload["reason"] == "audit"
    r = service_client.post(f"{T}/tags/keep-1/delete", data={"reason": "done", "csrf_token": csrf})
    assert r.status_code == 200 and count_testid(r.text, "tag-row") == 0
    deleted = runs(service_catalog, "delete_tag")
    assert [e.event_type for e in deleted] == ["started", "finished"]
    assert deleted[0].principal == "writer" and deleted[0].payload["reason"] == "done"
    # the writer may not roll back
    r = service_client.post(f"{T}/rollback", data={"snapshot_id": "1", "reason": "x", "csrf_token": csrf})
    assert r.status_code == 403


def test_rollback_and_recovery_record_reason_and_principal(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    sign_in(service_client, tokens["admin"])
    csrf = session.csrf_token(tokens["admin"])
    r = service_client.post(
        f"{T}/rollback", data={"snapshot_id": "1", "reason": "bad load", "csrf_token": csrf}
    )
    assert r.status_code == 200 and "Rolled back to snapshot 1." in r.text, r.text
    assert service_catalog.get_table("db.t").snapshot_manager.latest_snapshot_id() == 1
    started, finished = runs(service_catalog, "rollback")
    assert started.principal == "ops" and started.payload["reason"] == "bad load"
    assert finished.event_type == "finished"
    r = service_client.post(f"{T}/recover", data={"reason": "after the crash", "csrf_token": csrf})
    assert r.status_code == 200, r.text
    started, finished = runs(service_catalog, "recover")
    assert started.principal == "ops" and started.payload["reason"] == "after the crash"
    assert finished.event_type == "finished"
    maintenance = service_client.get("/ui/maintenance").text
    assert count_testid(maintenance, "maintenance-row") == 2
    assert "bad load" in maintenance and "after the crash" in maintenance


def test_locks_page_and_force_release(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    lock_id = dead_holder(service_catalog)
    sign_in(service_client, tokens["reader"])
    page = service_client.get("/ui/locks").text
    assert count_testid(page, "lock-row") == 1
    assert count_testid(page, "waiting-writer") == 0  # every commit of db.t finished
    waiting_writer(service_catalog)
    page = service_client.get("/ui/locks").text
    assert count_testid(page, "waiting-writer") == 1 and "waiting-user" in page
    assert "writer-1:dead" in page and "heartbeat overdue" in page
    assert count_testid(page, "release-lock") == 0  # read only
    before = logs(service_catalog)
    csrf = session.csrf_token(tokens["reader"])
    r = service_client.post("/ui/locks/release", data={"lock_id": lock_id, "reason": "x", "csrf_token": csrf})
    assert r.status_code == 403 and logs(service_catalog) == before

    service_client.cookies.clear()
    sign_in(service_client, tokens["admin"])
    csrf = session.csrf_token(tokens["admin"])
    page = service_client.get("/ui/locks").text
    assert count_testid(page, "release-lock") == 1
    r = service_client.post("/ui/locks/release", data={"lock_id": lock_id, "reason": "", "csrf_token": csrf})
    assert r.status_code == 400 and logs(service_catalog) == before
    r = service_client.post(
        "/ui/locks/release", data={"lock_id": lock_id, "reason": "holder died", "csrf_token": csrf}
    )
    assert r.status_code == 200 and count_testid(r.text, "lock-row") == 0
    with service_catalog.engine.connect() as conn:
        event = conn.execute(
            text(
                "SELECT operator, reason, previous_owner FROM paimon_lock_events"
                " WHERE event_type = 'force_released'"
            )
        ).one()
    assert event.operator == "ops (console)" and event.reason == "holder died"
    assert event.previous_owner == "writer-1:dead"


def test_live_view_streams_the_feed(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    sign_in(service_client, tokens["reader"])
    page = service_client.get("/ui/live").text
    assert count_testid(page, "live-events") == 1
    with service_client.stream(
        "GET", "/ui/live/events?from=start", headers={"Accept": "text/event-stream"}
    ) as s:
        assert s.status_code == 200
        data = []
        for line in s.iter_lines():
            assert not line.startswith("event:")  # unnamed: EventSource.onmessage gets them all
            if line.startswith("data: "):
                data.append(json.loads(line[6:]))
            if len(data) == 2:
                break
    assert data[0]["subject"] == "db.t" and data[0]["type"].startswith("org.paimon.commit.")
    # without a session the stream is refused, not redirected
    service_client.cookies.clear()
    r = service_client.get("/ui/live/events", headers={"Accept": "text/event-stream"}, follow_redirects=False)
    assert r.status_code == 401


def test_what_writers_and_operators_wrote_is_escaped(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    """A commit user, a reason, a tag are written by clients: the pages show them as text."""
    row = service_catalog.registry.get_table_row("db", "t")
    evil = "<script>alert(1)</script>"
    with service_catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type,"
                " commit_user, commit_identifier, commit_kind, payload) VALUES"
                " (gen_random_uuid(), :id, 'db.t', 'prepared', :evil, 9, 'APPEND',"
                " jsonb_build_object('source', 'rest', 'reason', CAST(:evil AS text)))"
            ),
            {"id": row.table_id, "evil": evil},
        )
    sign_in(service_client, tokens["admin"])
    csrf = session.csrf_token(tokens["admin"])
    r = service_client.post(f"{T}/tags", data={"tag": "t1", "reason": evil, "csrf_token": csrf})
    assert r.status_code == 200
    for page in (r.text, service_client.get("/ui/maintenance").text):
        assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    r = service_client.get(f"{T}?done={evil}")
    assert evil not in r.text


def test_expiration_and_orphan_cleanup_from_the_console_record_reason_and_principal(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    sign_in(service_client, tokens["admin"])
    page = service_client.get(T).text
    assert count_testid(page, "expire-form") == 1 and count_testid(page, "orphans-form") == 1
    csrf = session.csrf_token(tokens["admin"])
    r = service_client.post(f"{T}/expire-snapshots", data={"reason": "disk full", "csrf_token": csrf})
    assert r.status_code == 200 and "Expiration ran:" in r.text, r.text
    r = service_client.post(
        f"{T}/remove-orphan-files", data={"reason": "after the crash", "csrf_token": csrf}
    )
    assert r.status_code == 200 and "Orphan cleanup ran: 0 files deleted." in r.text, r.text
    for operation, reason in (("expire_snapshots", "disk full"), ("remove_orphan_files", "after the crash")):
        started, finished = runs(service_catalog, operation)
        assert started.principal == "ops" and started.payload["reason"] == reason
        assert finished.event_type == "finished"
    sign_in(service_client, tokens["reader"])
    page = service_client.get(T).text
    assert "expire-form" not in page and "orphans-form" not in page


def test_recycle_bin_page_lists_what_the_principal_administers_and_undrops_with_reason(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    """The bin lists a database's dropped tables to its administrators only, dropped databases to the
    catalog's; an undrop is refused before anything is restored (grant, CSRF, reason), else restores the
    table and records the principal and the reason with its ``undrop_table`` run."""
    from paimon_meta.ops import tables as table_ops

    boss = make_principal(service_catalog, "boss", [("admin", None, None)])
    service_catalog.create_table("db2.u", pa.schema([pa.field("k", pa.int64(), nullable=False)]))
    table_ops.drop_table(service_catalog, "db.t", principal="ops")
    table_ops.drop_database(service_catalog, "db2", principal="boss")
    [dropped] = service_catalog.recycle_bin.entries(database="db")
    assert "t" not in service_catalog.list_tables("db")

    sign_in(service_client, tokens["reader"])
    page = service_client.get("/ui/recycle-bin").text
    assert count_testid(page, "dropped-table") == 0 and count_testid(page, "dropped-database") == 0
    r = service_client.post(
        "/ui/recycle-bin/tables/db/t/undrop",
        data={
            "drop_id": str(dropped.drop_id),
            "reason": "x",
            "csrf_token": session.csrf_token(tokens["reader"]),
        },
    )
    assert r.status_code == 403 and "t" not in service_catalog.list_tables("db")

    sign_in(service_client, tokens["admin"])  # admin on db only
    csrf = session.csrf_token(tokens["admin"])
    page = service_client.get("/ui/recycle-bin").text
    assert count_testid(page, "dropped-table") == 1 and "db.t" in page and "db2.u" not in page
    assert "Dropped databases" not in page
    url = "/ui/recycle-bin/tables/db/t/undrop"
    assert (
        service_client.post(url, data={"drop_id": str(dropped.drop_id), "csrf_token": csrf}).status_code
        == 400
    )
    assert service_client.post(url, data={"drop_id": str(dropped.drop_id), "reason": "x"}).status_code == 403
    r = service_client.post(url, data={"drop_id": "1; drop", "reason": "x", "csrf_token": csrf})
    assert r.status_code == 400
    assert "t" not in service_catalog.list_tables("db") and not runs(service_catalog, "undrop_table")
    r = service_client.post(
        url, data={"drop_id": str(dropped.drop_id), "reason": "dropped by mistake", "csrf_token": csrf}
    )
    assert r.status_code == 200 and "Table restored from the recycle bin." in r.text, r.text
    assert count_testid(r.text, "dropped-table") == 0
    restored = service_catalog.get_table("db.t").new_read_builder()
    assert restored.new_read().to_arrow(restored.new_scan().plan().splits()).num_rows == 4
    [started, finished] = runs(service_catalog, "undrop_table")
    assert started.principal == "ops"  # the "admin" token is principal "ops" (admin on db)
    assert started.payload["reason"] == "dropped by mistake" and finished.event_type == "finished"
    # admin on db may not restore a database (admin on the catalog)
    r = service_client.post(
        "/ui/recycle-bin/databases/db2/undrop", data={"drop_id": "1", "reason": "x", "csrf_token": csrf}
    )
    assert r.status_code == 403 and "db2" not in service_catalog.list_databases()

    sign_in(service_client, boss)
    csrf = session.csrf_token(boss)
    page = service_client.get("/ui/recycle-bin").text
    assert count_testid(page, "dropped-database") == 1 and count_testid(page, "dropped-table") == 1  # db2.u
    [db2] = service_catalog.recycle_bin.databases()
    r = service_client.post(
        "/ui/recycle-bin/databases/db2/undrop",
        data={"drop_id": str(db2.drop_id), "reason": "restore drill", "csrf_token": csrf},
    )
    assert r.status_code == 200 and "Database restored from the recycle bin with 1 tables." in r.text, r.text
    assert "u" in service_catalog.list_tables("db2")
    by_database = [e for e in runs(service_catalog, "undrop_table") if e.payload.get("database_undrop")]
    assert by_database[0].principal == "boss" and by_database[0].payload["reason"] == "restore drill"
