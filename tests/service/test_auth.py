"""Bearer tokens and grants: every route requires the right privilege; refusals write nothing."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.errors import DatabaseAlreadyExistsError
from paimon_meta.governance.permissions import Access, ResourceType
from paimon_meta.metastore.access_events import access_events
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.auth import Require
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, commit_body, seed, state_of_storage

AUDIT = Path(__file__).resolve().parents[2] / "docs" / "AUDIT.md"

pytestmark = pytest.mark.postgres

T = "/v1/{prefix}/databases/{database}/tables/{table}"
D = "/v1/{prefix}/databases/{database}"
R, A = ResourceType, Access
#: (method, path) -> the (resource type, access) of Paimon's model the route requires (docs/GOVERNANCE.md;
#: the path locates the resource); None = authenticated only (the handler then filters or decides itself,
#: see the tests below).
EXPECTED: dict[tuple[str, str], tuple[ResourceType, Access] | None] = {
    ("GET", "/v1/config"): None,
    ("GET", "/v1/{prefix}/databases"): None,
    # creating needs CREATEDATABASE / CREATETABLE, decided in the handler: one who may see an existing
    # database or table is told it exists (409), so the clients' "ignore if exists" works without it
    ("POST", "/v1/{prefix}/databases"): None,
    ("GET", D): (R.DATABASE, A.DESCRIBE),
    ("POST", D): (R.DATABASE, A.ALTER),
    ("DELETE", D): (R.DATABASE, A.DROP),
    ("GET", f"{D}/tables"): None,
    ("POST", f"{D}/tables"): None,
    ("GET", T): (R.TABLE, A.SELECT),
    ("POST", T): (R.TABLE, A.ALTER),
    ("DELETE", T): (R.TABLE, A.DROP),
    ("POST", "/v1/{prefix}/tables/rename"): None,
    # the management API: decided in the handler on the caller's assignments (may_grant, may_revoke,
    # ALTER or GRANT on the table; routes_management)
    ("GET", "/v1/{prefix}/permissions"): None,
    ("POST", "/v1/{prefix}/permissions/grant"): None,
    ("POST", "/v1/{prefix}/permissions/revoke"): None,
    ("GET", f"{T}/policies"): None,
    ("POST", f"{T}/policies"): None,
    ("POST", f"{T}/policies/drop"): None,
    ("GET", f"{T}/snapshot"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/commit"): (R.TABLE, A.UPDATE),
    ("GET", f"{T}/partitions"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/tags"): (R.TABLE, A.UPDATE),
    ("GET", f"{T}/tags"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/tags/{{tag}}"): (R.TABLE, A.SELECT),
    ("DELETE", f"{T}/tags/{{tag}}"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/rollback"): (R.TABLE, A.ALTER),
    # Branches: creating, dropping and renaming one are UPDATEs, as tags are; fast-forward replaces main's
    # snapshots, so it needs ALTER, as a rollback does.
    ("GET", f"{T}/branches"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/branches"): (R.TABLE, A.UPDATE),
    ("DELETE", f"{T}/branches/{{branch}}"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/branches/{{branch}}/rename"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/branches/{{branch}}/forward"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/commit-messages"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/filter-committed"): (R.TABLE, A.UPDATE),
    ("GET", f"{T}/commits"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/registry"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/events"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/lock-events"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/maintenance-runs"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/snapshot-recordings"): (R.TABLE, A.SELECT),
    # Data access: credentials follow the decision (write credentials need UPDATE, decided in the route).
    ("GET", f"{T}/token"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/auth"): (R.TABLE, A.SELECT),
    # Tables across the catalog: listings filter by SELECT on each table, by id answers 404 without it.
    ("GET", f"{D}/table-details"): None,
    ("GET", "/v1/{prefix}/tables"): None,
    ("GET", "/v1/{prefix}/tables/id/{tableId}"): None,
    ("POST", f"{D}/register"): (R.DATABASE, A.CREATETABLE),
    ("POST", f"{T}/undrop"): (R.DATABASE, A.CREATETABLE),
    ("GET", f"{D}/dropped-tables"): (R.DATABASE, A.CREATETABLE),
    ("POST", f"{D}/undrop"): (R.CATALOG, A.CREATEDATABASE),
    ("GET", "/v1/{prefix}/dropped-databases"): (R.CATALOG, A.CREATEDATABASE),
    ("POST", f"{T}/rollback-schema"): (R.TABLE, A.ALTER),
    # The change feed: any token; the events are those of tables the caller may SELECT.
    ("GET", "/v1/{prefix}/events"): None,
    # Views and functions: listings need LIST on the database, reading one SELECT on it, creating one
    # CREATEVIEW/CREATEFUNCTION on the database, changing or dropping one ALTER/DROP on it; catalog-wide
    # listings filter, renaming a view needs ALTER on it and CREATEVIEW on the destination database.
    ("GET", f"{D}/views"): (R.DATABASE, A.LIST),
    ("POST", f"{D}/views"): (R.DATABASE, A.CREATEVIEW),
    ("GET", f"{D}/view-details"): (R.DATABASE, A.LIST),
    ("GET", "/v1/{prefix}/views"): None,
    ("GET", f"{D}/views/{{view}}"): (R.VIEW, A.SELECT),
    ("POST", f"{D}/views/{{view}}"): (R.VIEW, A.ALTER),
    ("DELETE", f"{D}/views/{{view}}"): (R.VIEW, A.DROP),
    ("POST", "/v1/{prefix}/views/rename"): None,
    ("GET", f"{D}/functions"): (R.DATABASE, A.LIST),
    ("POST", f"{D}/functions"): (R.DATABASE, A.CREATEFUNCTION),
    ("GET", f"{D}/function-details"): (R.DATABASE, A.LIST),
    ("GET", "/v1/{prefix}/functions"): None,
    ("GET", f"{D}/functions/{{function}}"): (R.FUNCTION, A.SELECT),
    ("POST", f"{D}/functions/{{function}}"): (R.FUNCTION, A.ALTER),
    ("DELETE", f"{D}/functions/{{function}}"): (R.FUNCTION, A.DROP),
    # Partitions, snapshots, consumers: reads need SELECT; registering, dropping (an OVERWRITE commit),
    # marking done and resetting a consumer need UPDATE, as a writer's job does each of them.
    ("POST", f"{T}/partitions"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/partitions/drop"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/partitions/mark"): (R.TABLE, A.UPDATE),
    ("POST", f"{T}/partitions/list-by-names"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/partitions/list-by-filter"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/snapshots/{{version}}"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/snapshots"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/consumers"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/consumers/reset"): (R.TABLE, A.UPDATE),
    # Schemas: SELECT, as snapshots; replacing a table drops its data and schema: ALTER.
    ("GET", f"{T}/schemas"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/schemas/{{version}}"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/replace"): (R.TABLE, A.ALTER),
    # Semantic views: as SQL views (creating or replacing one: CREATEVIEW on the database).
    ("GET", f"{D}/semantic-views"): (R.DATABASE, A.LIST),
    ("GET", f"{D}/semantic-views/{{semantic_view}}"): (R.VIEW, A.SELECT),
    ("POST", f"{D}/semantic-views/{{semantic_view}}"): (R.DATABASE, A.CREATEVIEW),
    ("DELETE", f"{D}/semantic-views/{{semantic_view}}"): (R.VIEW, A.DROP),
    # Operations: the metrics name every table (ALTER on the catalog: its administrators); the document
    # and its viewers need a token. On-call work (routes_ops): ALTER on the table; the lock rows and their
    # release decide ALTER on each lock's table in the handler.
    ("POST", f"{T}/recover"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/expire-snapshots"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/remove-orphan-files"): (R.TABLE, A.ALTER),
    ("GET", "/v1/{prefix}/locks"): None,
    ("POST", "/v1/{prefix}/locks/release"): None,
    ("GET", "/metrics"): (R.CATALOG, A.ALTER),
    # The catalogs' admin API: the handler checks the service-level create_catalog privilege (create),
    # some assignment in the catalog (show; listings filter) or ALTER / DROP on the catalog (update, drop).
    ("GET", "/api/management/v1/catalogs"): None,
    ("POST", "/api/management/v1/catalogs"): None,
    ("GET", "/api/management/v1/catalogs/{catalog}"): None,
    ("PUT", "/api/management/v1/catalogs/{catalog}"): None,
    ("DELETE", "/api/management/v1/catalogs/{catalog}"): None,
    ("GET", "/openapi.json"): None,
    ("GET", "/docs"): None,
    ("GET", "/redoc"): None,
    # The console (a session cookie holding a token): pages as the API's reads of the same data; the
    # overview, locks, maintenance and live pages filter by the caller's assignments; releasing a lock
    # decides ALTER on the lock's table in the route; tags need UPDATE and rollback and recovery ALTER, as
    # in the API.
    ("GET", "/ui/"): None,
    ("GET", "/ui/tables/{database}/{table}"): (R.TABLE, A.SELECT),
    ("GET", "/ui/locks"): None,
    ("GET", "/ui/maintenance"): None,
    ("GET", "/ui/live"): None,
    ("GET", "/ui/live/events"): None,
    # the catalog switcher: any token (the pages of the catalog it switches to decide there)
    ("GET", "/ui/catalog"): None,
    ("POST", "/ui/locks/release"): None,
    ("POST", "/ui/tables/{database}/{table}/recover"): (R.TABLE, A.ALTER),
    ("POST", "/ui/tables/{database}/{table}/expire-snapshots"): (R.TABLE, A.ALTER),
    ("POST", "/ui/tables/{database}/{table}/remove-orphan-files"): (R.TABLE, A.ALTER),
    ("POST", "/ui/tables/{database}/{table}/tags"): (R.TABLE, A.UPDATE),
    ("POST", "/ui/tables/{database}/{table}/tags/{tag}/delete"): (R.TABLE, A.UPDATE),
    ("POST", "/ui/tables/{database}/{table}/rollback"): (R.TABLE, A.ALTER),
    ("GET", "/ui/recycle-bin"): None,
    ("POST", "/ui/recycle-bin/tables/{database}/{table}/undrop"): (R.DATABASE, A.CREATETABLE),
    ("POST", "/ui/recycle-bin/databases/{database}/undrop"): (R.CATALOG, A.CREATEDATABASE),
    # The governance pages and actions decide in the handler with the management API's own checks
    # (routes_management): listing everyone's assignments needs GRANT reaching the table (the principal
    # page: GRANT on the catalog), its policies ALTER or GRANT; granting may_grant, revoking may_revoke.
    ("GET", "/ui/tables/{database}/{table}/permissions"): None,
    ("GET", "/ui/principals/{name:path}"): None,
    ("POST", "/ui/tables/{database}/{table}/permissions/grant"): None,
    ("POST", "/ui/tables/{database}/{table}/permissions/revoke"): None,
    ("POST", "/ui/tables/{database}/{table}/policies"): None,
    ("POST", "/ui/tables/{database}/{table}/policies/drop"): None,
}  #: Answered without a token: they say only whether the process is up / ready; the console's sign-in
#: form, its sign-out (it only clears the cookie) and its static files (no data); ``/`` (a redirect to the
#: console) and ``/favicon.ico`` (no content), which a browser asks for.
UNAUTHENTICATED = {"/healthz", "/readyz", "/ui/login", "/ui/logout", "/ui/static", "/", "/favicon.ico"}


def requirements(route: APIRoute) -> set[tuple[ResourceType, Access] | None]:
    """The checks a route declares (its ``Require`` dependencies)."""
    found: set[tuple[ResourceType, Access] | None] = set()
    stack = [route.dependant]
    while stack:
        dep = stack.pop()
        if isinstance(dep.call, Require):
            rt, access = dep.call.resource_type, dep.call.access
            found.add(None if rt is None or access is None else (rt, access))
        stack.extend(dep.dependencies)
    return found


def all_routes(routes: list[Any]) -> list[Any]:
    """The app's routes with included routers flattened (FastAPI keeps those as one entry each)."""
    out: list[Any] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        out.extend(all_routes(list(included.routes)) if included is not None else [route])
    return out


def test_every_route_requires_its_privilege(service_client: TestClient) -> None:
    seen = set()
    routes = all_routes(list(service_client.app.routes))  # type: ignore[attr-defined]
    for route in routes:
        path = getattr(route, "path", "")
        if not isinstance(route, APIRoute):
            assert path in UNAUTHENTICATED, path
            continue
        for method in route.methods or ():
            key = (method, path)
            if path in UNAUTHENTICATED:
                assert requirements(route) == set(), key
                continue
            assert key in EXPECTED, f"new route {key}: add it to EXPECTED with its (resource, access)"
            assert requirements(route) == {EXPECTED[key]}, key
            seen.add(key)
    assert seen == set(EXPECTED)


@pytest.fixture
def tokens(service_catalog: MetastoreCatalog) -> dict[str, dict[str, str]]:
    seed(service_catalog)
    service_catalog.create_database("other")
    return {
        "admin": auth(make_principal(service_catalog, "admin", [("admin", None, None)])),
        "reader": auth(make_principal(service_catalog, "reader", [("read", "db", None)])),
        "writer": auth(make_principal(service_catalog, "writer", [("write", "db", "t")])),
        "other": auth(make_principal(service_catalog, "other-db", [("admin", "other", None)])),
        "none": auth(make_principal(service_catalog, "nobody")),
    }


def _status(response: Any, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == status


def test_tokens_are_checked(service_client: TestClient, tokens: dict[str, dict[str, str]]) -> None:
    _status(service_client.get(f"{P}/databases"), 401)
    _status(service_client.get(f"{P}/databases", headers=auth("pmt_unknown")), 401)
    _status(service_client.get(f"{P}/databases", headers={"Authorization": "Basic YWRtaW46eA=="}), 401)
    _status(service_client.get(f"{P}/databases", headers={"Authorization": "Bearer "}), 401)
    assert service_client.get(f"{P}/databases", headers=tokens["admin"]).status_code == 200


def test_read_only_principal_cannot_commit(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, dict[str, str]]
) -> None:
    base = service_catalog.get_table("db.t").latest_snapshot()
    assert base is not None
    before = state_of_storage(service_catalog)
    r = service_client.post(
        f"{P}/databases/db/tables/t/commit", json=commit_body(base), headers=tokens["reader"]
    )
    _status(r, 403)
    assert "write" in r.json()["message"]
    messages = {"commitUser": "u", "commitIdentifier": 1, "messages": "", "messagesVersion": 1}
    _status(
        service_client.post(
            f"{P}/databases/db/tables/t/commit-messages", json=messages, headers=tokens["reader"]
        ),
        403,
    )
    _status(
        service_client.post(
            f"{P}/databases/db/tables/nope/commit-messages", json=messages, headers=tokens["reader"]
        ),
        403,
    )
    _status(
        service_client.post(
            f"{P}/databases/db/tables/t/tags", json={"tagName": "x"}, headers=tokens["reader"]
        ),
        403,
    )
    assert state_of_storage(service_catalog) == before
    # Both refused commits are in the data-access log (the table that does not exist and the tag are
    # not), and the cookbook's per-principal audit counts them.
    refused = [e for e in access_events(service_catalog.engine) if e.event_type == "commit_refused"]
    assert sorted(
        (e.principal, e.table_identifier, e.payload["route"].rsplit("/", 1)[-1]) for e in refused
    ) == [
        ("reader", "db.t", "commit"),
        ("reader", "db.t", "commit-messages"),
    ]
    [block] = [
        b for b in re.findall(r"```sql\n(.*?)```", AUDIT.read_text(), re.S) if "refused_or_conflicted" in b
    ]
    with service_catalog.engine.connect() as conn:
        audit_rows = {r.principal: r for r in conn.execute(text(block))}
    assert audit_rows["reader"].refused_or_conflicted == 2 and audit_rows["reader"].published == 0
    # but it reads
    assert (
        service_client.get(f"{P}/databases/db/tables/t/snapshot", headers=tokens["reader"]).status_code == 200
    )
    # and the table-scoped writer commits
    r = service_client.post(
        f"{P}/databases/db/tables/t/commit", json=commit_body(base), headers=tokens["writer"]
    )
    assert r.json() == {"success": True}


def test_grant_on_one_database_does_not_reach_another(
    service_client: TestClient, tokens: dict[str, dict[str, str]]
) -> None:
    other = tokens["other"]
    assert service_client.get(f"{P}/databases", headers=other).json()["databases"] == ["other"]
    _status(service_client.get(f"{P}/databases/db", headers=other), 403)
    _status(service_client.get(f"{P}/databases/db/tables", headers=other), 403)
    _status(service_client.get(f"{P}/databases/db/tables/t", headers=other), 403)
    _status(service_client.delete(f"{P}/databases/db/tables/t", headers=other), 403)
    _status(service_client.post(f"{P}/databases", json={"name": "new"}, headers=other), 403)
    body = {"source": {"database": "db", "object": "t"}, "destination": {"database": "other", "object": "t"}}
    _status(service_client.post(f"{P}/tables/rename", json=body, headers=other), 403)
    assert service_client.post(
        f"{P}/databases/other/tables",
        json={
            "identifier": {"database": "other", "object": "x"},
            "schema": {"fields": [{"id": 0, "name": "a", "type": "INT"}], "options": {"bucket": "-1"}},
        },
        headers=other,
    ).is_success


def test_table_grant_shows_only_that_table(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, dict[str, str]]
) -> None:
    seed(service_catalog, "db.t2")
    writer = tokens["writer"]
    assert service_client.get(f"{P}/databases", headers=writer).json()["databases"] == ["db"]
    assert service_client.get(f"{P}/databases/db/tables", headers=writer).json()["tables"] == ["t"]
    _status(service_client.get(f"{P}/databases/db/tables/t2", headers=writer), 403)
    assert service_client.get(f"{P}/databases", headers=tokens["none"]).json()["databases"] == []


def test_revoked_tokens_and_grants_take_effect(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, dict[str, str]]
) -> None:
    principals = Principals(service_catalog.engine)
    second = principals.issue_token("reader")
    assert service_client.get(f"{P}/databases/db", headers=auth(second)).status_code == 200
    assert principals.revoke("reader", Privilege.READ, database="db")
    _status(service_client.get(f"{P}/databases/db", headers=auth(second)), 403)
    assert principals.revoke_tokens("reader") == 2
    _status(service_client.get(f"{P}/databases/db", headers=auth(second)), 401)
    _status(service_client.get(f"{P}/databases/db", headers=tokens["reader"]), 401)


def test_refusals_are_logged_and_counted(
    service_client: TestClient, tokens: dict[str, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="paimon_meta.service.auth"):
        service_client.delete(f"{P}/databases/db/tables/t", headers=tokens["reader"])
        service_client.get(f"{P}/databases")
    messages = [r.getMessage() for r in caplog.records]
    assert any("forbidden" in m and "reader" in m and "DELETE" in m for m in messages), messages
    assert any("unauthenticated" in m for m in messages), messages
    metrics = service_client.get("/metrics", headers=tokens["admin"]).text
    assert 'paimon_meta_service_auth_refusals_total{reason="forbidden"} 1.0' in metrics
    assert 'paimon_meta_service_auth_refusals_total{reason="unauthenticated"} 1.0' in metrics


def test_tokens_are_stored_hashed(service_catalog: MetastoreCatalog) -> None:
    token = make_principal(service_catalog, "p")
    with service_catalog.engine.connect() as conn:
        from sqlalchemy import text

        stored = conn.execute(text("SELECT token_hash, token_prefix FROM paimon_tokens")).one()
    assert token not in stored.token_hash and len(stored.token_hash) == 64
    assert token.startswith(stored.token_prefix) and len(stored.token_prefix) < len(token) // 3


def test_creating_what_exists_is_409_for_whoever_may_see_it_and_403_for_others(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, dict[str, str]]
) -> None:
    """pypaimon's ``create_database(name, True)``/``create_table(name, schema, True)`` ignore only a 409:
    a writer of an existing database and table goes on; creating anything still needs admin, and one
    who may not see the database learns nothing about it."""
    table_body = service_client.get(f"{P}/databases/db/tables/t", headers=tokens["admin"]).json()
    create_t = {"identifier": {"database": "db", "object": "t"}, "schema": table_body["schema"]}
    create_u = {"identifier": {"database": "db", "object": "u"}, "schema": table_body["schema"]}

    def refusals() -> float:
        metrics = service_client.get("/metrics", headers=tokens["admin"]).text
        prefix = 'paimon_meta_service_auth_refusals_total{reason="forbidden"}'
        return sum(float(x.split()[-1]) for x in metrics.splitlines() if x.startswith(prefix))

    before = refusals()
    for who in ("reader", "writer"):
        _status(service_client.post(f"{P}/databases", json={"name": "db"}, headers=tokens[who]), 409)
        _status(service_client.post(f"{P}/databases/db/tables", json=create_t, headers=tokens[who]), 409)
        _status(service_client.post(f"{P}/databases", json={"name": "new"}, headers=tokens[who]), 403)
        _status(service_client.post(f"{P}/databases/db/tables", json=create_u, headers=tokens[who]), 403)
    _status(service_client.post(f"{P}/databases", json={"name": "db"}, headers=tokens["other"]), 403)
    _status(service_client.post(f"{P}/databases/db/tables", json=create_t, headers=tokens["other"]), 403)
    assert refusals() == before + 6  # the 403s are counted as the dependency's are
    assert service_catalog.list_databases() == ["db", "other"] and service_catalog.list_tables("db") == ["t"]
    _status(service_client.post(f"{P}/databases", json={"name": "db"}, headers=tokens["admin"]), 409)
    assert (
        service_client.post(f"{P}/databases", json={"name": "new"}, headers=tokens["admin"]).status_code
        == 200
    )
    # ignore_if_exists is positional, as pypaimon's
    service_catalog.create_database("new", True)
    with pytest.raises(DatabaseAlreadyExistsError):
        service_catalog.create_database("new", False)


def test_event_log_metrics_can_be_left_out(service_catalog: MetastoreCatalog) -> None:
    """``serve --no-event-log-metrics`` (docs/OPERATIONS.md: they aggregate the whole log per scrape):
    /metrics keeps the process's families and leaves the event log's out."""
    from fastapi.testclient import TestClient

    from paimon_meta.cli.main import build_parser
    from paimon_meta.service.app import create_app
    from paimon_meta.service.state import ServiceSettings, ServiceState

    args = build_parser().parse_args(["serve", "--no-event-log-metrics"])
    assert args.no_event_log_metrics is True
    assert build_parser().parse_args(["serve"]).no_event_log_metrics is False
    admin = {"Authorization": "Bearer " + make_principal(service_catalog, "root", [("admin", None, None)])}
    for on in (True, False):
        settings = ServiceSettings(auth_cache_seconds=0, event_log_metrics=on)
        app = create_app(settings, state=ServiceState(settings, service_catalog))
        with TestClient(app, raise_server_exceptions=False) as client:
            metrics = client.get("/metrics", headers=admin).text
        assert "paimon_meta_service_requests_total" in metrics
        assert ("# TYPE paimon_meta_commits_total counter" in metrics) is on
