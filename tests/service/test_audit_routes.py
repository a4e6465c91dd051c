"""The audit trail over HTTP: a table's registry row, commit/lock events, maintenance runs and snapshot
recordings, paged by position, as ``paimon_meta.ops.audit`` reads them from the database."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.ops import audit
from paimon_meta.ops.tags import create_tag
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, seed

pytestmark = pytest.mark.postgres

T = f"{P}/databases/db/tables/t"


def _all(client: TestClient, path: str, key: str, headers: dict[str, str], size: int) -> list[Any]:
    rows: list[Any] = []
    token: str | None = None
    while True:
        params: dict[str, Any] = {"maxResults": size} | ({"pageToken": token} if token else {})
        page = client.get(path, params=params, headers=headers)
        assert page.status_code == 200, page.text
        rows += page.json()[key]
        token = page.json()["nextPageToken"]
        if token is None:
            return rows


def test_audit_listings_page_through_the_log(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog)
    create_tag(service_catalog, "db.t", "v1", None)
    reader = auth(make_principal(service_catalog, "auditor", [("read", "db", "t")]))
    row = service_catalog.table_row("db.t")

    registry = service_client.get(f"{T}/registry", headers=reader).json()
    assert registry["identifier"] == "db.t" and registry["latestSnapshotId"] == row.latest_snapshot_id == 1
    assert registry["location"] == row.location and registry["schemaId"] == row.schema_id

    engine = service_catalog.engine
    events = _all(service_client, f"{T}/events", "events", reader, 2)
    expected = audit.commit_events(engine, table="db.t")[::-1]
    assert [e["eventId"] for e in events] == [e["event_id"] for e in expected] and len(events) == 3
    locks = _all(service_client, f"{T}/lock-events", "events", reader, 1)
    lock_id = service_catalog.registry.lock_id("db", "t")
    assert [e["eventId"] for e in locks] == [
        e["event_id"] for e in audit.lock_events(engine, lock_id=lock_id)
    ][::-1]
    runs = _all(service_client, f"{T}/maintenance-runs", "runs", reader, 1)
    assert [r["operation"] for r in runs] == ["create_tag"]
    recordings = _all(service_client, f"{T}/snapshot-recordings", "recordings", reader, 1)
    assert [(r["snapshotId"], r["eventType"]) for r in recordings] == [(1, "snapshot_published")]
    commit_id = recordings[0]["commitId"]
    one = service_client.get(f"{T}/events", params={"commitId": commit_id}, headers=reader).json()
    assert {e["commitId"] for e in one["events"]} == {commit_id} and len(one["events"]) == 3

    for params in ({"pageToken": "-1"}, {"pageToken": "x"}, {"maxResults": 0}, {"maxResults": 1001}):
        assert service_client.get(f"{T}/events", params=params, headers=reader).status_code == 400, params
    assert service_client.get(f"{T}/events", params={"commitId": "nope"}, headers=reader).status_code == 400
    assert service_client.get(f"{P}/databases/db/tables/nope/registry", headers=reader).status_code == 403
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    missing = service_client.get(f"{P}/databases/db/tables/nope/registry", headers=admin)
    assert missing.status_code == 404 and missing.json()["resourceType"] == "TABLE"


def _commit(catalog: MetastoreCatalog, k: int) -> None:
    table = catalog.get_table("db.t")
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([k], pa.int64()), "p": ["a"], "v": ["x"]}))
    commit.commit(write.prepare_commit())
    write.close()


def test_pages_are_keyset_positions_that_do_not_shift_as_the_log_grows(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    """Issue 39 item 5: a page token is the log position the page ended at (``p<event id>``), so a page
    costs one index range however deep, and commits made while a client pages through the log neither
    repeat nor hide a row of the pages it has not read yet (an offset would shift by the new rows)."""
    seed(service_catalog)
    for k in range(4):
        _commit(service_catalog, 10 + k)
    reader = auth(make_principal(service_catalog, "auditor", [("read", "db", "t")]))
    engine = service_catalog.engine
    table_id = service_catalog.table_row("db.t").table_id

    def events() -> list[Any]:
        return [e["event_id"] for e in audit.commit_events(engine, table="db.t")][::-1]

    def commits() -> list[Any]:
        return [str(c["commit_id"]) for c in audit.commit_history(engine, table_id)]

    assert len(commits()) == 5
    for path, key, id_key, listed in (
        (f"{T}/events", "events", "eventId", events),
        (f"{T}/commits", "commits", "commitId", commits),
    ):
        expected = listed()
        first = service_client.get(path, params={"maxResults": 2}, headers=reader).json()
        token = first["nextPageToken"]
        assert token is not None and token.startswith("p") and token[1:].isdigit(), token
        _commit(service_catalog, 100 + len(token))  # the log grows between two pages
        seen = [r[id_key] for r in first[key]]
        while token is not None:
            page = service_client.get(path, params={"maxResults": 2, "pageToken": token}, headers=reader)
            assert page.status_code == 200, page.text
            seen += [r[id_key] for r in page.json()[key]]
            token = page.json()["nextPageToken"]
        assert seen == expected, path  # newest first, each once, none of the commit made meanwhile

    # an offset of the previous release, or anything else this server did not issue: 400, never a page
    for token in ("100", "p", "p-1", "px", "p" + "9" * 20, "e12"):
        for path in (f"{T}/events", f"{T}/commits", f"{T}/lock-events", f"{T}/maintenance-runs"):
            answer = service_client.get(path, params={"pageToken": token}, headers=reader)
            assert answer.status_code == 400 and "pageToken" in answer.text, (path, token, answer.text)
