"""The service's checks are Paimon's permission model on the caller's assignments (issue 36, phase B
step 4): a ``DATABASE_ALL``/``CATALOG_ALL`` scope reaches objects created after it; an assignment stops
applying at its ``expireTime`` (a clock at the bound, no sleeping), and no cached access outlives it;
an OIDC group's assignments apply to its members; a refusal's body names the decision's reason and the
(resource, access) needed.

Until the stored assignments exist (``paimon_assignments``), an access is given assignments directly:
the principal is a real one (its token authenticates as any), its ``Access`` carries the assignments."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.governance.evaluate import Decision
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Assignment, ColumnRange, Resource
from paimon_meta.metastore import principals as principals_module
from paimon_meta.metastore.principals import Access, Held, Principals
from paimon_meta.service import auth as auth_module
from paimon_meta.service import deps, routes_catalog
from paimon_meta.service import state as state_module
from paimon_meta.service.app import create_app
from paimon_meta.service.auth import decision_of
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.oidc import IdentityProvider
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, commit_body, seed

pytestmark = pytest.mark.postgres

#: The bound of the expiring assignments below (millisecond precision, as the spec allows).
BOUND = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


class Service:
    def __init__(self, client: TestClient, state: ServiceState, catalog: MetastoreCatalog) -> None:
        self.client, self.state, self.catalog = client, state, catalog

    def give(self, monkeypatch: pytest.MonkeyPatch, name: str, *assignments: Assignment) -> dict[str, str]:
        """A token of a new principal ``name`` whose access carries ``assignments`` (of the default
        catalog) besides what its grants give."""
        token = make_principal(self.catalog, name)
        original = self.state.principals.authenticate

        def authenticate(presented: str) -> Access | None:
            access = original(presented)
            if access is None or access.principal != name:
                return access
            held = tuple(access.held or ()) + tuple(Held(None, a) for a in assignments)
            return Access(
                access.principal,
                access.grants,
                groups=access.groups,
                valid_until=access.valid_until,
                service=access.service,
                held=held,
            )

        monkeypatch.setattr(self.state.principals, "authenticate", authenticate)
        return auth(token)


@pytest.fixture
def service(service_catalog: MetastoreCatalog, identity_provider: IdentityProvider) -> Iterator[Service]:
    seed(service_catalog)
    settings = ServiceSettings(
        auth_cache_seconds=0, auth_failure_burst=0, oidc=identity_provider.settings(groups_claim="groups")
    )
    state = ServiceState(settings, service_catalog)
    with TestClient(create_app(settings, state=state), raise_server_exceptions=False) as client:
        yield Service(client, state, service_catalog)


def _refusal(response: Any) -> str:
    assert response.status_code == 403, response.text
    message: str = response.json()["message"]
    return message


def test_a_database_all_scope_reaches_a_table_created_later(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = service.give(
        monkeypatch,
        "carol",
        Assignment("carol", Resource.of_database("db"), A.LIST),
        Assignment("carol", Resource.database_all("db"), A.SELECT),
    )
    client = service.client
    # not there yet: the check passes (the scope names no object), the table is missing
    missing = client.get(f"{P}/databases/db/tables/later", headers=headers)
    assert missing.status_code == 404, missing.text
    base = seed(service.catalog, "db.later")
    assert client.get(f"{P}/databases/db/tables/later", headers=headers).status_code == 200
    assert client.get(f"{P}/databases/db/tables", headers=headers).json()["tables"] == ["later", "t"]
    assert client.get(f"{P}/databases", headers=headers).json()["databases"] == ["db"]
    # SELECT only: no UPDATE, and the 403 says why and what was needed
    refused = client.post(f"{P}/databases/db/tables/later/commit", json=commit_body(base), headers=headers)
    message = _refusal(refused)
    assert "principal 'carol' has no UPDATE on TABLE db.later" in message
    assert "needed: UPDATE on TABLE db.later; a write grant on db.later gives it" in message
    assert refused.json()["resourceType"] == "TABLE" and refused.json()["resourceName"] == "db.later"
    # another database is outside the scope
    service.catalog.create_database("other")
    seed(service.catalog, "other.x")
    assert "no SELECT on TABLE other.x" in _refusal(
        client.get(f"{P}/databases/other/tables/x", headers=headers)
    )


def test_a_catalog_all_scope_reaches_a_database_and_table_created_later(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = service.give(monkeypatch, "dave", Assignment("dave", Resource.catalog_all(), A.SELECT))
    client = service.client
    service.catalog.create_database("fresh")
    seed(service.catalog, "fresh.t")
    assert client.get(f"{P}/databases/fresh/tables/t", headers=headers).status_code == 200
    assert client.get(f"{P}/databases", headers=headers).json()["databases"] == ["db", "fresh"]
    # SELECT on what the catalog holds is not DESCRIBE of a database, nor the catalog's own ALTER
    assert "no DESCRIBE on DATABASE fresh" in _refusal(client.get(f"{P}/databases/fresh", headers=headers))
    assert "no ALTER on CATALOG" in _refusal(client.get("/metrics", headers=headers))


def test_an_assignment_stops_applying_at_its_expire_time(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    expiring = Assignment("erin", Resource.table("db", "t"), A.SELECT, expire_time=BOUND)
    headers = service.give(monkeypatch, "erin", expiring)
    now = [BOUND - timedelta(milliseconds=1)]
    for module in (principals_module, auth_module):
        monkeypatch.setattr(module, "utc_now", lambda: now[0])
    table = f"{P}/databases/db/tables/t"
    assert service.client.get(table, headers=headers).status_code == 200
    now[0] = BOUND  # exclusive: at the bound it authorizes nothing
    message = _refusal(service.client.get(table, headers=headers))
    assert "principal 'erin' has no SELECT on TABLE db.t (expired: SELECT on TABLE db.t to erin" in message
    now[0] = BOUND + timedelta(days=1)
    assert service.client.get(table, headers=headers).status_code == 403


class _Clock:
    """``time.time`` and ``time.monotonic`` of ``service.state``, moved by the test."""

    def __init__(self, wall: float) -> None:
        self.wall, self.mono = wall, 1000.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def test_a_cached_access_is_not_used_past_an_assignments_expire_time(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = make_principal(service_catalog, "frank", [("read", "db", None)])
    settings = ServiceSettings(auth_cache_seconds=3600)
    state = ServiceState(settings, service_catalog)
    clock = _Clock(BOUND.timestamp() - 10)
    monkeypatch.setattr(state_module, "time", clock)
    lookups: list[str] = []
    original = state.principals.authenticate

    def authenticate(presented: str) -> Access | None:
        lookups.append(presented)
        access = original(presented)
        assert access is not None
        extra = Held(None, Assignment("frank", Resource.table("db", "t"), A.UPDATE, expire_time=BOUND))
        return Access(access.principal, access.grants, held=(*(access.held or ()), extra))

    monkeypatch.setattr(state.principals, "authenticate", authenticate)
    try:
        first = state.authenticate(token)
        assert first is not None and first.expires_next(clock.wall) == BOUND.timestamp()
        clock.advance(9.999)
        assert state.authenticate(token) is first and len(lookups) == 1  # cached until the bound
        clock.advance(0.001)  # at the bound: looked up again (the store would no longer return it)
        assert state.authenticate(token) is not first and len(lookups) == 2
    finally:
        state.close()


def test_expires_next_is_the_first_change_after_now() -> None:
    def at(hours: int) -> datetime:
        return BOUND + timedelta(hours=hours)

    held = tuple(
        Held(None, Assignment("g", Resource.table("db", "t"), access, expire_time=when))
        for access, when in ((A.SELECT, at(-1)), (A.UPDATE, at(2)), (A.ALTER, at(1)), (A.DROP, None))
    )
    access = Access("g", (), held=held)
    assert access.expires_next(BOUND.timestamp()) == at(1).timestamp()  # the past one is ignored
    assert access.expires_next(at(1).timestamp()) == at(2).timestamp()
    assert access.expires_next(at(2).timestamp()) is None
    token_bound = Access("g", (), held=held, valid_until=at(1).timestamp() - 5)
    assert token_bound.expires_next(BOUND.timestamp()) == at(1).timestamp() - 5
    # and deciding at the bound: the one that expired gives nothing, the others still do
    assert not access.may(A.SELECT, Resource.table("db", "t"), at=at(-1))
    assert access.may(A.ALTER, Resource.table("db", "t"), at=at(1) - timedelta(milliseconds=1))
    assert not access.may(A.ALTER, Resource.table("db", "t"), at=at(1))


def test_an_oidc_groups_assignments_apply_to_its_members(
    service: Service, identity_provider: IdentityProvider
) -> None:
    principals = Principals(service.catalog.engine)
    principals.create_group("analysts", created_by="tests")
    principals.grant("group:analysts", Privilege.WRITE, database="db", table="t")
    token = identity_provider.token("bob", groups=["analysts"])
    access = service.state.authenticate(token)
    assert access is not None and access.subject.principal == "user:bob"
    assert access.subject.memberships == ("group:analysts",)
    # the group's assignments are the group's (not copied to the user), and they decide for the user
    assert {(a.principal, a.access) for a in access.assignments} == {
        ("group:analysts", A.SELECT),
        ("group:analysts", A.UPDATE),
    }
    client, headers = service.client, auth(token)
    table = f"{P}/databases/db/tables/t"
    assert client.get(table, headers=headers).status_code == 200
    message = _refusal(client.delete(table, headers=headers))
    assert "principal 'user:bob' (with group:analysts) has no DROP on TABLE db.t" in message
    # without the group in its claim, the user holds nothing
    assert client.get(table, headers=auth(identity_provider.token("bob"))).status_code == 403


def test_other_catalogs_refuse_a_principal_without_an_active_assignment_there(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default catalog's listings answer any token; a refusal of a check names the needed
    assignment. (Another catalog's 403 is tests/service/test_many_catalogs.py's.)"""
    headers = service.give(monkeypatch, "gina")
    client = service.client
    assert client.get(f"{P}/databases", headers=headers).json()["databases"] == []
    message = _refusal(client.post(f"{P}/databases", json={"name": "new"}, headers=headers))
    assert "has no CREATEDATABASE on CATALOG" in message and "an admin grant on the catalog" in message


def test_the_allowed_decision_carries_the_column_range(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SELECT`` on a table with a ``COLUMN`` assignment: the route runs, and its decision, kept on the
    request (``auth.decision_of``, for ``/auth``), carries the range."""
    denied = ColumnRange.denylist(["v"])
    headers = service.give(
        monkeypatch, "hana", Assignment("hana", Resource.column("db", "t"), A.SELECT, columns=denied)
    )
    seen: list[Decision | None] = []
    original = deps.catalog_of

    def catalog_of(request: Request) -> Any:
        seen.append(decision_of(request))
        return original(request)

    monkeypatch.setattr(routes_catalog, "catalog_of", catalog_of)
    assert service.client.get(f"{P}/databases/db/tables/t", headers=headers).status_code == 200
    [decision] = seen
    assert decision is not None and decision.allowed and decision.columns == denied
    # a column assignment gives SELECT only
    assert "no UPDATE on TABLE db.t" in _refusal(
        service.client.post(f"{P}/databases/db/tables/t/tags", json={"tagName": "x"}, headers=headers)
    )
