"""Migration 0022 keeps every existing principal's reach: grants seeded at 0021 (every single grant and
every pair of tests/governance/test_bundles.py's grants, one principal each), upgraded; for every route
of ROUTE_ACCESS and every handler check, ``decide`` on the assignments the store loads for the principal
answers as the legacy ``Access.allows`` on its grants, on every target."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from paimon_meta.db import migrate
from paimon_meta.db.engine import make_engine
from paimon_meta.db.models import Privilege
from paimon_meta.governance.evaluate import decide, sees
from paimon_meta.metastore.assignments import Assignments
from tests.fixtures.postgres import DbFactory
from tests.governance.test_bundles import (
    GRANT_SETS,
    HANDLER_CHECKS,
    LEGACY,
    NOW,
    ROUTE_ACCESS,
    TARGETS,
    _legacy_allows,
    _resource,
)

pytestmark = pytest.mark.postgres

Grants = tuple[tuple[Privilege, str | None, str | None], ...]


def _seed_0021(url: str, catalog_key: str | None) -> dict[str, Grants]:
    """One principal per grant set, its grants written as the 0021 schema holds them; with
    ``catalog_key``, a recorded catalog with databases d1, d2 and table d1.t1 (ids to bind to)."""
    engine = make_engine(url)
    seeded: dict[str, Grants] = {}
    try:
        with engine.begin() as conn:
            if catalog_key is not None:
                conn.execute(
                    text(
                        "INSERT INTO paimon_catalogs (name, catalog_key, warehouse, warehouse_key)"
                        " VALUES ('paimon', :k, 'file:///w', 'file:///w')"
                    ),
                    {"k": catalog_key},
                )
                for db in ("d1", "d2"):
                    conn.execute(
                        text("INSERT INTO paimon_databases (catalog_key, database_name) VALUES (:k, :d)"),
                        {"k": catalog_key, "d": db},
                    )
                conn.execute(
                    text(
                        "INSERT INTO paimon_tables (catalog_key, database_name, table_name)"
                        " VALUES (:k, 'd1', 't1')"
                    ),
                    {"k": catalog_key},
                )
            for i, grants in enumerate(GRANT_SETS):
                name = f"p{i}"
                pid = conn.execute(
                    text("INSERT INTO paimon_principals (name) VALUES (:n) RETURNING principal_id"),
                    {"n": name},
                ).scalar_one()
                for privilege, database, table in grants:
                    conn.execute(
                        text(
                            "INSERT INTO paimon_grants (principal_id, privilege, database_name, table_name,"
                            " catalog_key) VALUES (:p, :v, :d, :t, :k)"
                        ),
                        {"p": pid, "v": privilege.value, "d": database, "t": table, "k": catalog_key},
                    )
                seeded[name] = grants
    finally:
        engine.dispose()
    return seeded


@pytest.mark.parametrize("catalog_key", [None, "jdbc"], ids=["default-catalog", "catalog-key"])
def test_every_principal_keeps_its_reach(pg_db_factory: DbFactory, catalog_key: str | None) -> None:
    url = pg_db_factory()
    migrate.downgrade(url, "0021")
    seeded = _seed_0021(url, catalog_key)
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        store = Assignments(engine, catalog_key="jdbc", default=True)
        checks = [(LEGACY[route][0], LEGACY[route][1], check) for route, check in ROUTE_ACCESS.items()] + [
            (p.value if p else None, scope, check) for (p, scope), check in HANDLER_CHECKS.values()
        ]
        differ = []
        for name, grants in seeded.items():
            loaded = store.of_subject(name)
            assert loaded.assignments, name
            for privilege, scope, check in checks:
                for db, obj in TARGETS:
                    before = _legacy_allows(
                        grants, None if privilege is None else Privilege(privilege), scope, db, obj
                    )
                    if check == "sees":
                        after = sees(loaded.assignments, loaded.subject, db, NOW)
                    else:
                        assert not isinstance(check, str)
                        resource_type, access = check
                        after = decide(
                            loaded.assignments,
                            loaded.subject,
                            _resource(resource_type, db, obj),
                            access,
                            at=NOW,
                        ).allowed
                    if before != after:
                        differ.append((name, grants, check, db, obj, before))
        assert not differ, differ[:5]
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT resource_type, database_name, object_name, object_id, reason"
                    " FROM paimon_assignments"
                )
            ).all()
        assert all(r.reason.startswith("migrated from grant ") for r in rows)
        bound = {(r.resource_type, r.database_name, r.object_name) for r in rows if r.object_id is not None}
        if catalog_key is None:  # no key names the objects: bound by name, as the grants were
            assert not bound
        else:  # the existing objects are bound to their ids; the others by name
            assert ("TABLE", "d1", "t1") in bound and ("DATABASE", "d1", None) in bound
            assert ("TABLE", "d1", "t2") not in bound
        # another catalog sees none of them
        assert Assignments(engine, catalog_key="other", default=False).of_subject("p0").assignments == ()
        # downgrade drops the assignments, the grants are still there
        migrate.downgrade(url, "0021")
        with engine.connect() as conn:
            count = conn.execute(text("SELECT count(*) FROM paimon_grants")).scalar_one()
        assert count == sum(len(g) for g in seeded.values())
    finally:
        engine.dispose()
