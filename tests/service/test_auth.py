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
from paimon_meta.metastore.access_events import access_events
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.auth import Require
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, commit_body, seed, state_of_storage

AUDIT = Path(__file__).resolve().parents[2] / "docs" / "AUDIT.md"

pytestmark = pytest.mark.postgres

T = "/v1/{prefix}/databases/{database}/tables/{table}"
D = "/v1/{prefix}/databases/{database}"
#: (method, path) -> (privilege, scope) the route requires; None = authenticated only (the handler then
#: filters or checks the grants itself, see the tests below).
EXPECTED: dict[tuple[str, str], tuple[str | None, str]] = {
    ("GET", "/v1/config"): (None, "catalog"),
    ("GET", "/v1/{prefix}/databases"): (None, "catalog"),
    # creating needs admin, checked in the handler: one who may see an existing database or table is
    # told it exists (409), so the clients' "ignore if exists" works without admin
    ("POST", "/v1/{prefix}/databases"): (None, "catalog"),
    ("GET", D): ("read", "database"),
    ("POST", D): ("admin", "database"),
    ("DELETE", D): ("admin", "database"),
    ("GET", f"{D}/tables"): (None, "catalog"),
    ("POST", f"{D}/tables"): (None, "catalog"),
    ("GET", T): ("read", "table"),
    ("POST", T): ("admin", "table"),
    ("DELETE", T): ("admin", "table"),
    ("POST", "/v1/{prefix}/tables/rename"): (None, "catalog"),
    # the management API: checked in the handler on the caller's assignments (may_grant, may_revoke,
    # ALTER or GRANT on the table; routes_management)
    ("GET", "/v1/{prefix}/permissions"): (None, "catalog"),
    ("POST", "/v1/{prefix}/permissions/grant"): (None, "catalog"),
    ("POST", "/v1/{prefix}/permissions/revoke"): (None, "catalog"),
    ("GET", f"{T}/policies"): (None, "catalog"),
    ("POST", f"{T}/policies"): (None, "catalog"),
    ("POST", f"{T}/policies/drop"): (None, "catalog"),
    ("GET", f"{T}/snapshot"): ("read", "table"),
    ("POST", f"{T}/commit"): ("write", "table"),
    ("GET", f"{T}/partitions"): ("read", "table"),
    ("POST", f"{T}/tags"): ("write", "table"),
    ("GET", f"{T}/tags"): ("read", "table"),
    ("GET", f"{T}/tags/{{tag}}"): ("read", "table"),
    ("DELETE", f"{T}/tags/{{tag}}"): ("write", "table"),
    ("POST", f"{T}/rollback"): ("admin", "table"),
    # Branches: creating, dropping and renaming one need write, as tags do; fast-forward replaces main's
    # snapshots, so it needs admin, as a rollback does.
    ("GET", f"{T}/branches"): ("read", "table"),
    ("POST", f"{T}/branches"): ("write", "table"),
    ("DELETE", f"{T}/branches/{{branch}}"): ("write", "table"),
    ("POST", f"{T}/branches/{{branch}}/rename"): ("write", "table"),
    ("POST", f"{T}/branches/{{branch}}/forward"): ("admin", "table"),
    ("POST", f"{T}/commit-messages"): ("write", "table"),
    ("POST", f"{T}/filter-committed"): ("write", "table"),
    ("GET", f"{T}/commits"): ("read", "table"),
    ("GET", f"{T}/registry"): ("read", "table"),
    ("GET", f"{T}/events"): ("read", "table"),
    ("GET", f"{T}/lock-events"): ("read", "table"),
    ("GET", f"{T}/maintenance-runs"): ("read", "table"),
    ("GET", f"{T}/snapshot-recordings"): ("read", "table"),
    # Data access: credentials follow the grant (write credentials need write, checked in the route).
    ("GET", f"{T}/token"): ("read", "table"),
    ("POST", f"{T}/auth"): ("read", "table"),
    # Tables across the catalog: listings filter by the caller's grants, by id answers 404 without read.
    ("GET", f"{D}/table-details"): (None, "catalog"),
    ("GET", "/v1/{prefix}/tables"): (None, "catalog"),
    ("GET", "/v1/{prefix}/tables/id/{tableId}"): (None, "catalog"),
    ("POST", f"{D}/register"): ("admin", "database"),
    ("POST", f"{T}/undrop"): ("admin", "database"),
    ("GET", f"{D}/dropped-tables"): ("admin", "database"),
    ("POST", f"{D}/undrop"): ("admin", "catalog"),
    ("GET", "/v1/{prefix}/dropped-databases"): ("admin", "catalog"),
    ("POST", f"{T}/rollback-schema"): ("admin", "table"),
    # The change feed: any token; the events are those of tables the caller may read.
    ("GET", "/v1/{prefix}/events"): (None, "catalog"),
    # Views and functions: reads need read on the database, changes admin on it (as creating a table);
    # catalog-wide listings filter by the caller's grants, renaming a view checks both databases.
    ("GET", f"{D}/views"): ("read", "database"),
    ("POST", f"{D}/views"): ("admin", "database"),
    ("GET", f"{D}/view-details"): ("read", "database"),
    ("GET", "/v1/{prefix}/views"): (None, "catalog"),
    ("GET", f"{D}/views/{{view}}"): ("read", "database"),
    ("POST", f"{D}/views/{{view}}"): ("admin", "database"),
    ("DELETE", f"{D}/views/{{view}}"): ("admin", "database"),
    ("POST", "/v1/{prefix}/views/rename"): (None, "catalog"),
    ("GET", f"{D}/functions"): ("read", "database"),
    ("POST", f"{D}/functions"): ("admin", "database"),
    ("GET", f"{D}/function-details"): ("read", "database"),
    ("GET", "/v1/{prefix}/functions"): (None, "catalog"),
    ("GET", f"{D}/functions/{{function}}"): ("read", "database"),
    ("POST", f"{D}/functions/{{function}}"): ("admin", "database"),
    ("DELETE", f"{D}/functions/{{function}}"): ("admin", "database"),
    # Partitions, snapshots, consumers: reads need read; registering, dropping (an OVERWRITE commit),
    # marking done and resetting a consumer need write, as a writer's job does each of them.
    ("POST", f"{T}/partitions"): ("write", "table"),
    ("POST", f"{T}/partitions/drop"): ("write", "table"),
    ("POST", f"{T}/partitions/mark"): ("write", "table"),
    ("POST", f"{T}/partitions/list-by-names"): ("read", "table"),
    ("POST", f"{T}/partitions/list-by-filter"): ("read", "table"),
    ("GET", f"{T}/snapshots/{{version}}"): ("read", "table"),
    ("GET", f"{T}/snapshots"): ("read", "table"),
    ("GET", f"{T}/consumers"): ("read", "table"),
    ("POST", f"{T}/consumers/reset"): ("write", "table"),
    # Schemas: read, as snapshots; replacing a table drops its data and schema: admin, as dropping it.
    ("GET", f"{T}/schemas"): ("read", "table"),
    ("GET", f"{T}/schemas/{{version}}"): ("read", "table"),
    ("POST", f"{T}/replace"): ("admin", "table"),
    # Semantic views: as SQL views (read on the database; changes admin on it).
    ("GET", f"{D}/semantic-views"): ("read", "database"),
    ("GET", f"{D}/semantic-views/{{semantic_view}}"): ("read", "database"),
    ("POST", f"{D}/semantic-views/{{semantic_view}}"): ("admin", "database"),
    ("DELETE", f"{D}/semantic-views/{{semantic_view}}"): ("admin", "database"),
    # Operations: the metrics name every table; the document and its viewers need a token.
    # On-call work (routes_ops): admin on the table; the lock rows and their release check admin on each
    # lock's table in the handler.
    ("POST", f"{T}/recover"): ("admin", "table"),
    ("POST", f"{T}/expire-snapshots"): ("admin", "table"),
    ("POST", f"{T}/remove-orphan-files"): ("admin", "table"),
    ("GET", "/v1/{prefix}/locks"): (None, "catalog"),
    ("POST", "/v1/{prefix}/locks/release"): (None, "catalog"),
    ("GET", "/metrics"): ("admin", "catalog"),
    # The catalogs' admin API: the handler checks the service-level create_catalog privilege (create),
    # some grant in the catalog (show; listings filter) or admin on the whole catalog (update, drop).
    ("GET", "/api/management/v1/catalogs"): (None, "catalog"),
    ("POST", "/api/management/v1/catalogs"): (None, "catalog"),
    ("GET", "/api/management/v1/catalogs/{catalog}"): (None, "catalog"),
    ("PUT", "/api/management/v1/catalogs/{catalog}"): (None, "catalog"),
    ("DELETE", "/api/management/v1/catalogs/{catalog}"): (None, "catalog"),
    ("GET", "/openapi.json"): (None, "catalog"),
    ("GET", "/docs"): (None, "catalog"),
    ("GET", "/redoc"): (None, "catalog"),
    # The console (a session cookie holding a token): pages as the API's reads of the same data; the
    # overview, locks, maintenance and live pages filter by the caller's grants; releasing a lock checks
    # admin on the lock's table in the route; tags need write and rollback and recovery admin, as in the
    # API and the CLI.
    ("GET", "/ui/"): (None, "catalog"),
    ("GET", "/ui/tables/{database}/{table}"): ("read", "table"),
    ("GET", "/ui/locks"): (None, "catalog"),
    ("GET", "/ui/maintenance"): (None, "catalog"),
    ("GET", "/ui/live"): (None, "catalog"),
    ("GET", "/ui/live/events"): (None, "catalog"),
    # the catalog switcher: any token (the pages of the catalog it switches to check its grants)
    ("GET", "/ui/catalog"): (None, "catalog"),
    ("POST", "/ui/locks/release"): (None, "catalog"),
    ("POST", "/ui/tables/{database}/{table}/recover"): ("admin", "table"),
    ("POST", "/ui/tables/{database}/{table}/expire-snapshots"): ("admin", "table"),
    ("POST", "/ui/tables/{database}/{table}/remove-orphan-files"): ("admin", "table"),
    ("POST", "/ui/tables/{database}/{table}/tags"): ("write", "table"),
    ("POST", "/ui/tables/{database}/{table}/tags/{tag}/delete"): ("write", "table"),
    ("POST", "/ui/tables/{database}/{table}/rollback"): ("admin", "table"),
}
#: Answered without a token: they say only whether the process is up / ready; the console's sign-in
#: form, its sign-out (it only clears the cookie) and its static files (no data); ``/`` (a redirect to the
#: console) and ``/favicon.ico`` (no content), which a browser asks for.
UNAUTHENTICATED = {"/healthz", "/readyz", "/ui/login", "/ui/logout", "/ui/static", "/", "/favicon.ico"}


def _requirements(route: APIRoute) -> set[tuple[str | None, str]]:
    found: set[tuple[str | None, str]] = set()
    stack = [route.dependant]
    while stack:
        dep = stack.pop()
        if isinstance(dep.call, Require):
            found.add((None if dep.call.privilege is None else dep.call.privilege.value, dep.call.scope))
        stack.extend(dep.dependencies)
    return found


def _all_routes(routes: list[Any]) -> list[Any]:
    """The app's routes with included routers flattened (FastAPI keeps those as one entry each)."""
    out: list[Any] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        out.extend(_all_routes(list(included.routes)) if included is not None else [route])
    return out


def test_every_route_requires_its_privilege(service_client: TestClient) -> None:
    seen = set()
    routes = _all_routes(list(service_client.app.routes))  # type: ignore[attr-defined]
    for route in routes:
        path = getattr(route, "path", "")
        if not isinstance(route, APIRoute):
            assert path in UNAUTHENTICATED, path
            continue
        for method in route.methods or ():
            key = (method, path)
            if path in UNAUTHENTICATED:
                assert _requirements(route) == set(), key
                continue
            assert key in EXPECTED, f"new route {key}: add it to EXPECTED with its privilege"
            assert _requirements(route) == {EXPECTED[key]}, key
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
