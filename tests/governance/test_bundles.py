"""The read/write/admin bundles as Paimon assignments keep every principal's reach: for every route of the
service (tests/service/test_auth.py's list) and every check a handler makes itself, and every grant and
pair of grants, the legacy check (privilege levels over scopes, as ``Access.allows`` was before the
service's checks moved onto Paimon's model; ``LEGACY``) and the check of the Paimon model on the
migrated assignments (``governance.evaluate.decide``) agree. ``ROUTE_ACCESS`` is the (resource, access)
each mounted route requires; docs/GOVERNANCE.md shows the same table."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from paimon_meta.db.models import Privilege
from paimon_meta.governance.bundles import Bundle, bundle_assignments
from paimon_meta.governance.evaluate import Subject, decide, sees
from paimon_meta.governance.permissions import Access, Assignment, Resource, ResourceType
from paimon_meta.metastore.principals import Access as ServiceAccess
from paimon_meta.metastore.principals import GrantRow, Scope
from paimon_meta.service.app import create_app
from paimon_meta.service.auth import LOCATABLE, locate
from paimon_meta.service.state import ServiceSettings
from tests.service.test_auth import EXPECTED, all_routes, requirements

R, A = ResourceType, Access
NOW = datetime(2026, 9, 1, tzinfo=UTC)
T = "/v1/{prefix}/databases/{database}/tables/{table}"
D = "/v1/{prefix}/databases/{database}"
UI_T = "/ui/tables/{database}/{table}"

#: The (resource type, access) each route checks in Paimon's model: what the mounted routes' ``Require``
#: declare (tests/service/test_auth.py's ``EXPECTED`` is checked against the app; this module checks it
#: again without a database, :func:`test_route_access_is_what_every_mounted_route_requires`). The
#: resource's locator comes from the path: ``{database}`` and ``{table}``, ``{view}``, ``{function}``;
#: the metrics and the catalog's own routes name the catalog.
ROUTE_ACCESS: dict[tuple[str, str], tuple[ResourceType, Access]] = {
    route: check for route, check in EXPECTED.items() if check is not None
}

#: What each of those routes required before Paimon's model (privilege, scope of the path): the legacy
#: check the equivalence tests compare with, over the grants (``_legacy_allows``).
LEGACY: dict[tuple[str, str], tuple[str, str]] = {
    ("GET", D): ("read", "database"),
    ("POST", D): ("admin", "database"),
    ("DELETE", D): ("admin", "database"),
    ("GET", T): ("read", "table"),
    ("POST", T): ("admin", "table"),
    ("DELETE", T): ("admin", "table"),
    ("GET", f"{T}/snapshot"): ("read", "table"),
    ("POST", f"{T}/commit"): ("write", "table"),
    ("GET", f"{T}/partitions"): ("read", "table"),
    ("POST", f"{T}/tags"): ("write", "table"),
    ("GET", f"{T}/tags"): ("read", "table"),
    ("GET", f"{T}/tags/{{tag}}"): ("read", "table"),
    ("DELETE", f"{T}/tags/{{tag}}"): ("write", "table"),
    ("POST", f"{T}/rollback"): ("admin", "table"),
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
    ("GET", f"{T}/token"): ("read", "table"),
    ("POST", f"{T}/auth"): ("read", "table"),
    ("POST", f"{D}/register"): ("admin", "database"),
    ("POST", f"{T}/undrop"): ("admin", "database"),
    ("GET", f"{D}/dropped-tables"): ("admin", "database"),
    ("POST", f"{D}/undrop"): ("admin", "catalog"),
    ("GET", "/v1/{prefix}/dropped-databases"): ("admin", "catalog"),
    ("POST", f"{T}/rollback-schema"): ("admin", "table"),
    ("GET", f"{D}/views"): ("read", "database"),
    ("POST", f"{D}/views"): ("admin", "database"),
    ("GET", f"{D}/view-details"): ("read", "database"),
    ("GET", f"{D}/views/{{view}}"): ("read", "database"),
    ("POST", f"{D}/views/{{view}}"): ("admin", "database"),
    ("DELETE", f"{D}/views/{{view}}"): ("admin", "database"),
    ("GET", f"{D}/functions"): ("read", "database"),
    ("POST", f"{D}/functions"): ("admin", "database"),
    ("GET", f"{D}/function-details"): ("read", "database"),
    ("GET", f"{D}/functions/{{function}}"): ("read", "database"),
    ("POST", f"{D}/functions/{{function}}"): ("admin", "database"),
    ("DELETE", f"{D}/functions/{{function}}"): ("admin", "database"),
    ("POST", f"{T}/partitions"): ("write", "table"),
    ("POST", f"{T}/partitions/drop"): ("write", "table"),
    ("POST", f"{T}/partitions/mark"): ("write", "table"),
    ("POST", f"{T}/partitions/list-by-names"): ("read", "table"),
    ("POST", f"{T}/partitions/list-by-filter"): ("read", "table"),
    ("GET", f"{T}/snapshots/{{version}}"): ("read", "table"),
    ("GET", f"{T}/snapshots"): ("read", "table"),
    ("GET", f"{T}/consumers"): ("read", "table"),
    ("POST", f"{T}/consumers/reset"): ("write", "table"),
    ("GET", f"{T}/schemas"): ("read", "table"),
    ("GET", f"{T}/schemas/{{version}}"): ("read", "table"),
    ("POST", f"{T}/replace"): ("admin", "table"),
    ("GET", f"{D}/semantic-views"): ("read", "database"),
    ("GET", f"{D}/semantic-views/{{semantic_view}}"): ("read", "database"),
    ("POST", f"{D}/semantic-views/{{semantic_view}}"): ("admin", "database"),
    ("DELETE", f"{D}/semantic-views/{{semantic_view}}"): ("admin", "database"),
    ("POST", f"{T}/recover"): ("admin", "table"),
    ("POST", f"{T}/expire-snapshots"): ("admin", "table"),
    ("POST", f"{T}/remove-orphan-files"): ("admin", "table"),
    ("GET", "/metrics"): ("admin", "catalog"),
    ("GET", "/ui/tables/{database}/{table}"): ("read", "table"),
    ("POST", "/ui/tables/{database}/{table}/recover"): ("admin", "table"),
    ("POST", "/ui/tables/{database}/{table}/expire-snapshots"): ("admin", "table"),
    ("POST", "/ui/tables/{database}/{table}/remove-orphan-files"): ("admin", "table"),
    ("POST", "/ui/tables/{database}/{table}/tags"): ("write", "table"),
    ("POST", "/ui/tables/{database}/{table}/tags/{tag}/delete"): ("write", "table"),
    ("POST", "/ui/tables/{database}/{table}/rollback"): ("admin", "table"),
    ("POST", "/ui/recycle-bin/tables/{database}/{table}/undrop"): ("admin", "database"),
    ("POST", "/ui/recycle-bin/databases/{database}/undrop"): ("admin", "catalog"),
}

#: The checks handlers make themselves (routes that require only a token): what is checked, the legacy
#: check (privilege and scope; None: "a grant reaches into the database", ``sees_database``), and the
#: Paimon check (``"sees"``: any assignment in the database, ``governance.evaluate.sees``).
HANDLER_CHECKS: dict[str, tuple[tuple[Privilege | None, str], tuple[ResourceType, Access] | str]] = {
    "GET databases: a database is listed": ((None, "database"), "sees"),
    "GET .../tables, table-details: the database may be listed": ((None, "database"), "sees"),
    "GET .../tables, /tables, table-details, tables/id: a table is listed or found": (
        (Privilege.READ, "table"),
        (R.TABLE, A.SELECT),
    ),
    "POST tables/rename: the source table": ((Privilege.ADMIN, "table"), (R.TABLE, A.ALTER)),
    "POST tables/rename: the destination database": (
        (Privilege.ADMIN, "database"),
        (R.DATABASE, A.CREATETABLE),
    ),
    "POST views/rename: the source view's database": ((Privilege.ADMIN, "database"), (R.VIEW, A.ALTER)),
    "POST views/rename: the destination database": (
        (Privilege.ADMIN, "database"),
        (R.DATABASE, A.CREATEVIEW),
    ),
    "GET /views, /functions: a database's views and functions are listed": (
        (Privilege.READ, "database"),
        (R.DATABASE, A.LIST),
    ),
    "GET /views, /functions, console: every database's (a catalog-wide reader)": (
        (Privilege.READ, "catalog"),
        (R.CATALOG_ALL, A.SELECT),
    ),
    "GET .../token?access=write: write credentials": ((Privilege.WRITE, "table"), (R.TABLE, A.UPDATE)),
    "GET /events: an event of a table is delivered": ((Privilege.READ, "table"), (R.TABLE, A.SELECT)),
    "console: a lock, a maintenance run, a live event of a table is shown": (
        (Privilege.READ, "table"),
        (R.TABLE, A.SELECT),
    ),
    "console: a table's write actions are offered": (
        (Privilege.WRITE, "table"),
        (R.TABLE, A.UPDATE),
    ),
    "console: a table's admin actions, releasing its lock": ((Privilege.ADMIN, "table"), (R.TABLE, A.ALTER)),
    "console: releasing a lock of no table": ((Privilege.ADMIN, "catalog"), (R.CATALOG, A.ALTER)),
    "console: a database's dropped tables are listed in the recycle bin": (
        (Privilege.ADMIN, "database"),
        (R.DATABASE, A.CREATETABLE),
    ),
    "console: dropped databases are listed in the recycle bin": (
        (Privilege.ADMIN, "catalog"),
        (R.CATALOG, A.CREATEDATABASE),
    ),
    # creating: checked in the handler, after a caller who may see an existing one was told it exists (409)
    "POST databases: a database is created": ((Privilege.ADMIN, "catalog"), (R.CATALOG, A.CREATEDATABASE)),
    "POST .../tables: a table is created": ((Privilege.ADMIN, "database"), (R.DATABASE, A.CREATETABLE)),
}

# The grants a principal may hold, and the objects the checks name.
SCOPES = [(None, None), ("d1", None), ("d2", None), ("d1", "t1"), ("d1", "t2"), ("d2", "t1")]
GRANTS = [(p, db, t) for p in Privilege for db, t in SCOPES]
TARGETS = [("d1", "t1"), ("d1", "t2"), ("d2", "t1"), ("d1", "created_later"), ("d3", "x")]
GRANT_SETS = [(g,) for g in GRANTS] + list(itertools.combinations(GRANTS, 2))
_MIGRATED: dict[tuple[tuple[Privilege, str | None, str | None], ...], list[Assignment]] = {}


def _migrated(grants: tuple[tuple[Privilege, str | None, str | None], ...]) -> list[Assignment]:
    if grants not in _MIGRATED:
        _MIGRATED[grants] = [
            a for p, db, t in grants for a in bundle_assignments("alice", Bundle(p.value), db, t)
        ]
    return _MIGRATED[grants]


_RANK = {Privilege.READ: 1, Privilege.WRITE: 2, Privilege.ADMIN: 3}
Grants = tuple[tuple[Privilege, str | None, str | None], ...]


def _resource(resource_type: ResourceType, database: str, name: str) -> Resource:
    build: dict[ResourceType, Callable[[], Resource]] = {
        R.CATALOG: Resource.catalog,
        R.CATALOG_ALL: Resource.catalog_all,
        R.DATABASE: lambda: Resource.of_database(database),
        R.TABLE: lambda: Resource.table(database, name),
        R.VIEW: lambda: Resource.view(database, name),
        R.FUNCTION: lambda: Resource.function(database, name),
    }
    return build[resource_type]()


def _legacy_allows(grants: Grants, privilege: Privilege | None, scope: str, db: str, name: str) -> bool:
    """The check before Paimon's model: a grant reaching into ``db`` (``privilege`` None: listings), or
    a grant of ``privilege`` or a stronger one whose scope covers the path's ``scope`` of the target."""
    if privilege is None:
        return any(g_db in (None, db) for _, g_db, _ in grants)
    database, table = db if scope != "catalog" else None, name if scope == "table" else None
    return any(
        _RANK[p] >= _RANK[privilege] and Scope(g_db, g_t).covers(database, table) for p, g_db, g_t in grants
    )


def _new_allows(
    assignments: list[Assignment], check: tuple[ResourceType, Access] | str, db: str, name: str
) -> bool:
    subject = Subject("alice")
    if check == "sees":
        return sees(assignments, subject, db, NOW)
    assert not isinstance(check, str)
    resource_type, access = check
    return decide(assignments, subject, _resource(resource_type, db, name), access, at=NOW).allowed


def _service_allows(grants: Grants, check: tuple[ResourceType, Access] | str, db: str, name: str) -> bool:
    """The service's own path: the ``Access`` of the grants (its assignments from
    ``assignments_from_grants``), the resource located from the path's parameters as ``Require`` does."""
    access = ServiceAccess("alice", tuple(GrantRow(p, Scope(g_db, g_t)) for p, g_db, g_t in grants))
    if check == "sees":
        return access.sees(db, at=NOW)
    assert not isinstance(check, str)
    resource_type, needs = check
    if resource_type in LOCATABLE:
        params = {"database": db, "table": name, "view": name, "semantic_view": name, "function": name}
        return access.may(needs, locate(resource_type, params), at=NOW)
    return access.may(needs, _resource(resource_type, db, name), at=NOW)


def test_every_route_has_its_paimon_access() -> None:
    """Every route that required a privilege requires one (resource, access), and no other does."""
    assert set(ROUTE_ACCESS) == set(LEGACY)


def test_route_access_is_what_every_mounted_route_requires() -> None:
    """The table is the app's: each mounted route's ``Require`` (a new route cannot be missed)."""
    mounted: dict[tuple[str, str], tuple[ResourceType, Access]] = {}
    for route in all_routes(list(create_app(ServiceSettings()).routes)):
        if not isinstance(route, APIRoute):
            continue
        checks = requirements(route)
        assert len(checks) <= 1, (route.path, checks)
        for method in route.methods or ():
            for check in checks:
                if check is not None:
                    mounted[(method, route.path)] = check
    assert mounted == ROUTE_ACCESS


def _differences(
    privilege: Privilege | None, scope: str, check: tuple[ResourceType, Access] | str
) -> list[tuple[object, ...]]:
    """The (grants, target) pairs on which the legacy check and the Paimon check disagree: ``decide`` on
    the bundles, and the service's ``Access`` of the grants deciding on the located resource."""
    out: list[tuple[object, ...]] = []
    for grants in GRANT_SETS:
        for target in TARGETS:
            legacy = _legacy_allows(grants, privilege, scope, *target)
            if legacy != _new_allows(_migrated(grants), check, *target):
                out.append((grants, target, "decide"))
            if legacy != _service_allows(grants, check, *target):
                out.append((grants, target, "service"))
    return out


@pytest.mark.parametrize("route", sorted(ROUTE_ACCESS), ids=" ".join)
def test_a_route_allows_exactly_whom_it_allowed(route: tuple[str, str]) -> None:
    privilege, scope = LEGACY[route]
    differ = _differences(Privilege(privilege), scope, ROUTE_ACCESS[route])
    assert not differ, differ[:5]


@pytest.mark.parametrize("name", sorted(HANDLER_CHECKS))
def test_a_handler_check_allows_exactly_whom_it_allowed(name: str) -> None:
    (privilege, scope), check = HANDLER_CHECKS[name]
    differ = _differences(privilege, scope, check)
    assert not differ, differ[:5]


def test_no_bundle_gives_grant_and_each_holds_the_one_below() -> None:
    for db, t in SCOPES:
        sets = [set(bundle_assignments("p", b, db, t)) for b in Bundle]
        assert sets[0] < sets[1] < sets[2]
        assert all(a.access is not A.GRANT and a.access is not A.ALL for a in sets[2])


def test_docs_show_the_table() -> None:
    """docs/GOVERNANCE.md lists every route with its legacy privilege and its Paimon access."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "GOVERNANCE.md").read_text()
    rows = set(re.findall(r"^\| `(\w+) ([^`]+)` \| (\w+) on (\w+) \| `(\w+)` \| `(\w+)` \|$", text, re.M))
    expected = {
        (method, path, LEGACY[(method, path)][0], LEGACY[(method, path)][1], rt.value, access.value)
        for (method, path), (rt, access) in ROUTE_ACCESS.items()
    }
    assert rows == expected
    for name, ((privilege, scope), check) in HANDLER_CHECKS.items():
        legacy = "a grant in it" if privilege is None else f"{privilege.value} on {scope}"
        paimon = (
            "any assignment in it" if isinstance(check, str) else f"`{check[0].value}` `{check[1].value}`"
        )
        assert f"| {name} | {legacy} | {paimon} |" in text, name


def test_a_branch_is_checked_as_its_table() -> None:
    """``t$branch_b`` in a path is table ``t``: its assignments apply, another table's do not."""
    params = {"database": "d1", "table": "t1$branch_b1"}
    assert locate(R.TABLE, params) == Resource.table("d1", "t1")
    reader = ServiceAccess("alice", (GrantRow(Privilege.READ, Scope("d1", "t1")),))
    assert reader.may(A.SELECT, locate(R.TABLE, params), at=NOW)
    assert not reader.may(A.SELECT, locate(R.TABLE, {"database": "d1", "table": "t2$branch_b1"}), at=NOW)
