"""The read/write/admin bundles as Paimon assignments keep every principal's reach: for every route of the
service (tests/service/test_auth.py's list) and every check a handler makes itself, and every grant and
pair of grants, the legacy check (``metastore.principals.Access.allows``) and the check of the Paimon
model on the migrated assignments (``governance.evaluate.decide``) agree. ``ROUTE_ACCESS`` is the
(resource, access) each route needs in Paimon's model; docs/GOVERNANCE.md shows the same table."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from paimon_meta.db.models import Privilege
from paimon_meta.governance.bundles import Bundle, bundle_assignments
from paimon_meta.governance.evaluate import Subject, decide, sees
from paimon_meta.governance.permissions import Access, Assignment, Resource, ResourceType
from paimon_meta.metastore.principals import Access as LegacyAccess
from paimon_meta.metastore.principals import GrantRow, Scope
from tests.service.test_auth import EXPECTED

R, A = ResourceType, Access
NOW = datetime(2026, 9, 1, tzinfo=UTC)
T = "/v1/{prefix}/databases/{database}/tables/{table}"
D = "/v1/{prefix}/databases/{database}"
UI_T = "/ui/tables/{database}/{table}"

#: The (resource type, access) each route checks in Paimon's model, for every route of EXPECTED that
#: requires a privilege. The resource's locator comes from the path: ``{database}`` and ``{table}``,
#: ``{view}``, ``{function}``; the metrics and the catalog's own routes name the catalog.
ROUTE_ACCESS: dict[tuple[str, str], tuple[ResourceType, Access]] = {
    ("GET", D): (R.DATABASE, A.DESCRIBE),
    ("POST", D): (R.DATABASE, A.ALTER),
    ("DELETE", D): (R.DATABASE, A.DROP),
    ("POST", f"{D}/register"): (R.DATABASE, A.CREATETABLE),
    ("POST", f"{T}/undrop"): (R.DATABASE, A.CREATETABLE),
    ("GET", T): (R.TABLE, A.SELECT),
    ("POST", T): (R.TABLE, A.ALTER),
    ("DELETE", T): (R.TABLE, A.DROP),
    **{
        ("GET", f"{T}/{suffix}"): (R.TABLE, A.SELECT)
        for suffix in (
            "snapshot", "partitions", "tags", "tags/{tag}", "branches", "commits", "registry", "events",
            "lock-events", "maintenance-runs", "snapshot-recordings", "token", "snapshots/{version}",
            "snapshots", "consumers",
        )
    },
    ("POST", f"{T}/auth"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/partitions/list-by-names"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/partitions/list-by-filter"): (R.TABLE, A.SELECT),
    **{
        (method, f"{T}/{suffix}"): (R.TABLE, A.UPDATE)
        for method, suffix in (
            ("POST", "commit"), ("POST", "tags"), ("DELETE", "tags/{tag}"), ("POST", "branches"),
            ("DELETE", "branches/{branch}"), ("POST", "branches/{branch}/rename"),
            ("POST", "commit-messages"), ("POST", "filter-committed"), ("POST", "partitions"),
            ("POST", "partitions/drop"), ("POST", "partitions/mark"), ("POST", "consumers/reset"),
        )
    },
    ("POST", f"{T}/rollback"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/rollback-schema"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/branches/{{branch}}/forward"): (R.TABLE, A.ALTER),
    ("GET", f"{D}/views"): (R.DATABASE, A.LIST),
    ("GET", f"{D}/view-details"): (R.DATABASE, A.LIST),
    ("POST", f"{D}/views"): (R.DATABASE, A.CREATEVIEW),
    ("GET", f"{D}/views/{{view}}"): (R.VIEW, A.SELECT),
    ("POST", f"{D}/views/{{view}}"): (R.VIEW, A.ALTER),
    ("DELETE", f"{D}/views/{{view}}"): (R.VIEW, A.DROP),
    ("GET", f"{D}/functions"): (R.DATABASE, A.LIST),
    ("GET", f"{D}/function-details"): (R.DATABASE, A.LIST),
    ("POST", f"{D}/functions"): (R.DATABASE, A.CREATEFUNCTION),
    ("GET", f"{D}/functions/{{function}}"): (R.FUNCTION, A.SELECT),
    ("POST", f"{D}/functions/{{function}}"): (R.FUNCTION, A.ALTER),
    ("DELETE", f"{D}/functions/{{function}}"): (R.FUNCTION, A.DROP),
    ("GET", f"{D}/semantic-views"): (R.DATABASE, A.LIST),
    ("GET", f"{D}/semantic-views/{{semantic_view}}"): (R.VIEW, A.SELECT),
    ("POST", f"{D}/semantic-views/{{semantic_view}}"): (R.DATABASE, A.CREATEVIEW),
    ("DELETE", f"{D}/semantic-views/{{semantic_view}}"): (R.VIEW, A.DROP),
    ("GET", f"{D}/dropped-tables"): (R.DATABASE, A.CREATETABLE),
    ("POST", f"{D}/undrop"): (R.CATALOG, A.CREATEDATABASE),
    ("GET", "/v1/{prefix}/dropped-databases"): (R.CATALOG, A.CREATEDATABASE),
    ("GET", f"{T}/schemas"): (R.TABLE, A.SELECT),
    ("GET", f"{T}/schemas/{{version}}"): (R.TABLE, A.SELECT),
    ("POST", f"{T}/replace"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/recover"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/expire-snapshots"): (R.TABLE, A.ALTER),
    ("POST", f"{T}/remove-orphan-files"): (R.TABLE, A.ALTER),
    ("GET", "/metrics"): (R.CATALOG, A.ALTER),
    ("GET", UI_T): (R.TABLE, A.SELECT),
    ("POST", f"{UI_T}/recover"): (R.TABLE, A.ALTER),
    ("POST", f"{UI_T}/tags"): (R.TABLE, A.UPDATE),
    ("POST", f"{UI_T}/tags/{{tag}}/delete"): (R.TABLE, A.UPDATE),
    ("POST", f"{UI_T}/rollback"): (R.TABLE, A.ALTER),
    ("POST", f"{UI_T}/expire-snapshots"): (R.TABLE, A.ALTER),
    ("POST", f"{UI_T}/remove-orphan-files"): (R.TABLE, A.ALTER),
    ("POST", "/ui/recycle-bin/tables/{database}/{table}/undrop"): (R.DATABASE, A.CREATETABLE),
    ("POST", "/ui/recycle-bin/databases/{database}/undrop"): (R.CATALOG, A.CREATEDATABASE),
}  # fmt: skip

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


def _legacy(grants: tuple[tuple[Privilege, str | None, str | None], ...]) -> LegacyAccess:
    return LegacyAccess("alice", tuple(GrantRow(p, Scope(db, t)) for p, db, t in grants))


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


def _legacy_allows(access: LegacyAccess, privilege: Privilege | None, scope: str, db: str, name: str) -> bool:
    if privilege is None:
        return access.sees_database(db)
    return access.allows(privilege, db if scope != "catalog" else None, name if scope == "table" else None)


def _new_allows(
    assignments: list[Assignment], check: tuple[ResourceType, Access] | str, db: str, name: str
) -> bool:
    subject = Subject("alice")
    if check == "sees":
        return sees(assignments, subject, db, NOW)
    assert not isinstance(check, str)
    resource_type, access = check
    return decide(assignments, subject, _resource(resource_type, db, name), access, at=NOW).allowed


def test_every_route_has_its_paimon_access() -> None:
    needs_privilege = {k for k, (privilege, _) in EXPECTED.items() if privilege is not None}
    assert set(ROUTE_ACCESS) == needs_privilege


def _differences(
    privilege: Privilege | None, scope: str, check: tuple[ResourceType, Access] | str
) -> list[tuple[object, ...]]:
    """The (grants, target) pairs on which the legacy check and the Paimon check disagree."""
    return [
        (grants, target)
        for grants in GRANT_SETS
        for target in TARGETS
        if _legacy_allows(_legacy(grants), privilege, scope, *target)
        != _new_allows(_migrated(grants), check, *target)
    ]


@pytest.mark.parametrize("route", sorted(ROUTE_ACCESS), ids=" ".join)
def test_a_route_allows_exactly_whom_it_allowed(route: tuple[str, str]) -> None:
    privilege, scope = EXPECTED[route]
    assert privilege is not None
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
        (method, path, EXPECTED[(method, path)][0], EXPECTED[(method, path)][1], rt.value, access.value)
        for (method, path), (rt, access) in ROUTE_ACCESS.items()
    }
    assert rows == expected
    for name, ((privilege, scope), check) in HANDLER_CHECKS.items():
        legacy = "a grant in it" if privilege is None else f"{privilege.value} on {scope}"
        paimon = (
            "any assignment in it" if isinstance(check, str) else f"`{check[0].value}` `{check[1].value}`"
        )
        assert f"| {name} | {legacy} | {paimon} |" in text, name
