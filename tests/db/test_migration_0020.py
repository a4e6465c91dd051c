"""Migration 0020 (grants per catalog): every principal, token and grant of a metastore migrated from
0019 keeps working exactly as before in the catalog it was made for, and reaches into no other catalog;
a downgrade keeps the default catalog's grants."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from paimon_meta.db import migrate
from paimon_meta.db.engine import make_engine
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.principals import Principals, hash_token
from tests.fixtures.postgres import DbFactory

pytestmark = pytest.mark.postgres

TOKEN = "pmt_" + "x" * 43


def _seed_0019(url: str, *, with_catalog: bool) -> None:
    """A principal with a token and three grants, written as the 0019 schema holds them."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            pid = conn.execute(
                text(
                    "INSERT INTO paimon_principals (name, created_by) VALUES ('etl', 'ops')"
                    " RETURNING principal_id"
                )
            ).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO paimon_tokens (principal_id, token_hash, token_prefix) VALUES (:p, :h, :x)"
                ),
                {"p": pid, "h": hash_token(TOKEN), "x": TOKEN[:12]},
            )
            for privilege, database, table in (
                ("read", None, None),
                ("write", "db", None),
                ("admin", "db", "t"),
            ):
                conn.execute(
                    text(
                        "INSERT INTO paimon_grants (principal_id, privilege, database_name, table_name)"
                        " VALUES (:p, :v, :d, :t)"
                    ),
                    {"p": pid, "v": privilege, "d": database, "t": table},
                )
            if with_catalog:  # serve recorded its default catalog (phase 1)
                conn.execute(
                    text(
                        "INSERT INTO paimon_catalogs (name, catalog_key, warehouse, warehouse_key)"
                        " VALUES ('paimon', 'jdbc', 'file:///w', 'file:///w')"
                    )
                )
    finally:
        engine.dispose()


@pytest.mark.parametrize("with_catalog", [False, True], ids=["no-catalog-row", "default-recorded"])
def test_every_grant_and_token_keeps_working(pg_db_factory: DbFactory, with_catalog: bool) -> None:
    url = pg_db_factory()
    migrate.downgrade(url, "0019")
    _seed_0019(url, with_catalog=with_catalog)
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        access = Principals(engine).authenticate(TOKEN)
        assert access is not None and access.principal == "etl"
        # the default catalog (key jdbc) served as before: exactly the same answers
        here = access.in_catalog("jdbc", default=True)
        # (read on the catalog, write on db, admin on db.t, in Paimon's model: their bundles)
        assert here.may(A.SELECT, Resource.catalog_all()) and not here.may(A.UPDATE, Resource.catalog_all())
        db, t, u = Resource.of_database("db"), Resource.table("db", "t"), Resource.table("db", "u")
        assert here.may(A.UPDATE, Resource.database_all("db")) and not here.may(A.DROP, db)
        assert here.may(A.ALTER, t) and not here.may(A.ALTER, u)
        # another catalog: nothing
        there = access.in_catalog("team_b", default=False)
        assert there.grants == () and not there.holds_any()
        with engine.connect() as conn:
            keys = set(conn.execute(text("SELECT catalog_key FROM paimon_grants")).scalars())
        # assigned to the one recorded catalog, or left to "the default catalog"
        assert keys == ({"jdbc"} if with_catalog else {None})
        # a downgrade keeps them (and the previous release reads them as before)
        engine.dispose()
        migrate.downgrade(url, "0019")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM paimon_grants")).scalar() == 3
    finally:
        engine.dispose()
