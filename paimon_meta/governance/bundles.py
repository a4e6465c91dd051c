"""The service's three privilege levels (``read`` < ``write`` < ``admin`` on the catalog, a database or
one table) as named bundles of Paimon assignments.

Invariant (tests/governance/test_bundles.py checks it for every route and every grant): a principal
whose grants are replaced by their bundles may do exactly what it could before, no more and no less.
Hence two choices:

* the bundles name their accesses one by one instead of ``ALL``: ``ALL`` includes ``GRANT``, which no
  level gave (delegating is new: an operator grants ``GRANT`` explicitly);
* a catalog-wide level is a ``CATALOG_ALL`` assignment (it reaches databases and tables created later,
  as a catalog grant did), plus, for ``admin``, the catalog's own ``CREATEDATABASE``, ``ALTER`` and
  ``DROP``; a database-wide level is the database's own accesses plus ``DATABASE_ALL`` for what it holds.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access, Assignment, Resource

A = Access


class Bundle(enum.StrEnum):
    """A privilege level of the service (``paimon_grants.privilege``); each holds the ones before it."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


_ORDER = (Bundle.READ, Bundle.WRITE, Bundle.ADMIN)

#: What each level adds to the one before it, per scope: (scope resource kind, accesses).
_CATALOG: dict[Bundle, tuple[tuple[str, frozenset[Access]], ...]] = {
    Bundle.READ: (("catalog_all", frozenset({A.DESCRIBE, A.LIST, A.SELECT})),),
    Bundle.WRITE: (("catalog_all", frozenset({A.UPDATE})),),
    Bundle.ADMIN: (
        ("catalog", frozenset({A.CREATEDATABASE, A.ALTER, A.DROP})),
        ("catalog_all", frozenset({A.ALTER, A.DROP, A.CREATETABLE, A.CREATEVIEW, A.CREATEFUNCTION})),
    ),
}
_DATABASE: dict[Bundle, tuple[tuple[str, frozenset[Access]], ...]] = {
    Bundle.READ: (("database", frozenset({A.DESCRIBE, A.LIST})), ("database_all", frozenset({A.SELECT}))),
    Bundle.WRITE: (("database_all", frozenset({A.UPDATE})),),
    Bundle.ADMIN: (
        ("database", frozenset({A.ALTER, A.DROP, A.CREATETABLE, A.CREATEVIEW, A.CREATEFUNCTION})),
        ("database_all", frozenset({A.ALTER, A.DROP})),
    ),
}
_TABLE: dict[Bundle, tuple[tuple[str, frozenset[Access]], ...]] = {
    Bundle.READ: (("table", frozenset({A.SELECT})),),
    Bundle.WRITE: (("table", frozenset({A.UPDATE})),),
    Bundle.ADMIN: (("table", frozenset({A.ALTER, A.DROP})),),
}


def bundle_assignments(
    principal: str,
    bundle: Bundle,
    database: str | None = None,
    table: str | None = None,
    *,
    expire_time: datetime | None = None,
) -> tuple[Assignment, ...]:
    """The assignments that replace a ``bundle`` grant on the catalog (no database), a database (no
    table) or one table, in a stable order (resource, then access)."""
    if table is not None and database is None:
        raise ValidationError("a table grant needs its database", table=table)
    levels = _ORDER[: _ORDER.index(bundle) + 1]
    table_of = _CATALOG if database is None else _DATABASE if table is None else _TABLE
    db, name = database or "", table or ""
    resources: dict[str, Callable[[], Resource]] = {
        "catalog": Resource.catalog,
        "catalog_all": Resource.catalog_all,
        "database": lambda: Resource.of_database(db),
        "database_all": lambda: Resource.database_all(db),
        "table": lambda: Resource.table(db, name),
    }
    wanted: dict[str, set[Access]] = {}
    for level in levels:
        for kind, accesses in table_of[level]:
            wanted.setdefault(kind, set()).update(accesses)
    out = []
    for kind in ("catalog", "catalog_all", "database", "database_all", "table"):
        for access in sorted(wanted.get(kind, ())):
            out.append(Assignment(principal, resources[kind](), access, expire_time=expire_time))
    return tuple(out)
