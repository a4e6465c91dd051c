"""Governance changes on the change feed over HTTP (issue 36 item 2): a grant and a revocation made through
the management routes are CloudEvents ``org.paimon.governance.<event type>`` of ``GET /v1/{prefix}/events``
(pages and the live stream), in order with the catalog's commits, resumable, not in another catalog's
feed, and shown only to a caller with ``GRANT`` reaching their resource (metastore.feed's rule)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Assignment, Resource
from paimon_meta.metastore.assignments import Assignments
from paimon_meta.metastore.catalogs import Catalogs
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, seed
from tests.service.test_feed_route import _walk
from tests.service.test_feed_stream import _sse

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

GRANTED = "org.paimon.governance.permission_granted"
REVOKED = "org.paimon.governance.permission_revoked"
PUBLISHED = "org.paimon.commit.snapshot_published"


def _commit(catalog: MetastoreCatalog, identifier: str) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([7], pa.int64()), "p": ["a"], "v": ["w"]}))
    commit.commit(write.prepare_commit())
    write.close()


def _permission(table: str) -> dict[str, Any]:
    return {
        "resource": {"type": "TABLE", "database": "db", "table": table},
        "access": "SELECT",
        "principal": "alice",
    }


def _story(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The snapshot commits and the governance events about alice, in feed order."""
    return [
        (e["type"], e["subject"])
        for e in events
        if e["type"] == PUBLISHED or (e["data"]["log"] == "governance" and e["data"].get("target") == "alice")
    ]


def test_grants_and_revocations_are_on_the_feed_in_order_for_those_who_may_grant(
    service_client: TestClient, service_catalog: MetastoreCatalog, tmp_path: Path
) -> None:
    engine, key = service_catalog.engine, service_catalog.registry.catalog_key
    seed(service_catalog, "db.t")
    seed(service_catalog, "db.u")
    Catalogs(engine).create("b", str(tmp_path / "wh-b"))
    tokens = {
        "root": make_principal(service_catalog, "root", [("admin", None, None)]),
        "owner": make_principal(service_catalog, "owner", [("read", "db", "t")]),
        "reader": make_principal(service_catalog, "reader", [("read", None, None)]),
        "admin": make_principal(service_catalog, "admin", [("admin", None, None)]),
        "alice": make_principal(service_catalog, "alice"),
    }
    store = Assignments(engine, catalog_key=key, default=True)
    store.grant(Assignment("root", Resource.catalog_all(), A.GRANT), granted_by="tests")
    store.grant(Assignment("owner", Resource.table("db", "t"), A.GRANT), granted_by="tests")
    Assignments(engine, catalog_key="b", default=False).grant(
        Assignment("root", Resource.catalog_all(), A.GRANT), granted_by="tests", must_exist=False
    )
    headers = {name: auth(token) for name, token in tokens.items()}
    _, start = _walk(service_client, headers["root"], 1000)

    def post(path: str, body: dict[str, Any]) -> None:
        answer = service_client.post(f"{P}/permissions/{path}", json=body, headers=headers["root"])
        assert answer.status_code == 200, answer.text

    post("grant", _permission("t"))
    _commit(service_catalog, "db.t")
    post("grant", _permission("u"))
    post("revoke", _permission("t"))

    # the root (GRANT on the catalog) sees the three changes, in order with db.t's commit
    seen, _ = _walk(service_client, headers["root"], 2, pageToken=start)
    assert _story(seen) == [
        (GRANTED, "TABLE db.t"),
        (PUBLISHED, "db.t"),
        (GRANTED, "TABLE db.u"),
        (REVOKED, "TABLE db.t"),
    ]
    granted = next(e for e in seen if e["type"] == GRANTED)
    assert granted["source"] == "/paimon-meta/catalogs/paimon"
    data = granted["data"]
    assert data["principal"] == "root" and data["target"] == "alice" and data["resource"] == "TABLE db.t"
    assert data["eventType"] == "permission_granted" and data["payload"]["access"] == "SELECT"
    assert data["reason"] == f"POST {P}/permissions/grant"
    ids = [e["id"] for e in seen]
    assert len(set(ids)) == len(ids)

    # resuming after the first grant gives the rest, once
    rest, _ = _walk(service_client, headers["root"], 1000, pageToken=granted["id"])
    assert rest == seen[seen.index(granted) + 1 :]
    # kind=governance keeps only governance events
    only, _ = _walk(service_client, headers["root"], 1000, pageToken=start, kind="governance")
    assert {e["data"]["log"] for e in only} == {"governance"}
    assert _story(only) == [s for s in _story(seen) if s[0] != PUBLISHED]

    # GRANT on db.t only: db.t's changes (and its commit), not db.u's
    mine, _ = _walk(service_client, headers["owner"], 1000, pageToken=start)
    assert _story(mine) == [(GRANTED, "TABLE db.t"), (PUBLISHED, "db.t"), (REVOKED, "TABLE db.t")]
    # reading every table is not governing it, nor is ALTER on every table (a policy's event would
    # show: not a grant's); being the target is not either
    for name in ("reader", "admin", "alice"):
        theirs, _ = _walk(service_client, headers[name], 1000, pageToken=start)
        assert not [e for e in theirs if e["data"]["log"] == "governance"], name
    # catalog b's feed has none of the default catalog's changes (its root may grant there)
    other = service_client.get("/v1/b/events", params={"maxResults": 1000}, headers=headers["root"])
    assert other.status_code == 200, other.text
    assert other.json()["events"] and not [
        e for e in other.json()["events"] if e["data"].get("target") == "alice"
    ]

    # the live stream from the same position delivers the same events with their ids
    stream_headers = {**headers["root"], "Accept": "text/event-stream", "Last-Event-ID": start}
    streamed: list[dict[str, Any]] = []
    with service_client.stream("GET", f"{P}/events", headers=stream_headers) as answer:
        assert answer.status_code == 200
        for event_id, event in _sse(answer.iter_lines()):
            if event_id is None or event is None:
                continue
            assert event_id == event["id"]
            streamed.append(event)
            if event["id"] == seen[-1]["id"] or len(streamed) > len(seen):
                break
    assert [json.dumps(e, sort_keys=True) for e in streamed] == [json.dumps(e, sort_keys=True) for e in seen]
