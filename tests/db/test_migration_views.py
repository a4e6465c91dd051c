"""Migration 0005 adopts Java's ``paimon_views`` (JdbcCatalog creates it when missing) and gives it back."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from paimon_meta.db import migrate
from paimon_meta.db.engine import make_engine
from tests.fixtures.postgres import DbFactory

pytestmark = pytest.mark.postgres

# JdbcUtils.CREATE_VIEW_TABLE and INSERT_VIEW_SQL, as Java issues them.
JAVA_DDL = (
    "CREATE TABLE paimon_views(catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL,"
    " view_name VARCHAR(255) NOT NULL, view_schema TEXT NOT NULL,"
    " PRIMARY KEY (catalog_key, database_name, view_name))"
)
JAVA_INSERT = (
    "INSERT INTO paimon_views (catalog_key, database_name, view_name, view_schema) VALUES (:k, :d, :n, :s)"
)
SCHEMA = '{"fields":[],"query":"SELECT 1","dialects":{},"options":{}}'


def test_java_views_adopted_and_given_back(pg_db_factory: DbFactory) -> None:
    url = pg_db_factory(migrated=False)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(JAVA_DDL))
            conn.execute(text(JAVA_INSERT), {"k": "jdbc", "d": "db", "n": "v1", "s": SCHEMA})
        engine.dispose()
        migrate.upgrade(url, "0005")
        with engine.begin() as conn:
            row = conn.execute(text("SELECT * FROM paimon_views")).one()
            assert row.view_name == "v1" and row.view_schema == SCHEMA
            assert row.view_id >= 1 and row.view_uuid is None and row.version == 1
            # Java's own INSERT still works on the extended table.
            conn.execute(text(JAVA_INSERT), {"k": "jdbc", "d": "db", "n": "v2", "s": SCHEMA})
            assert inspect(conn).get_pk_constraint("paimon_views")["name"] == "pk_paimon_views"
            # Byte order, whatever the database's collation: the order listings page in.
            collations = conn.execute(
                text(
                    "SELECT collation_name FROM information_schema.columns WHERE table_name = 'paimon_views'"
                    " AND column_name IN ('database_name', 'view_name')"
                )
            ).scalars()
            assert list(collations) == ["C", "C"]
            conn.execute(text(JAVA_INSERT), {"k": "jdbc", "d": "db", "n": "B", "s": SCHEMA})
            conn.execute(text(JAVA_INSERT), {"k": "jdbc", "d": "db", "n": "a", "s": SCHEMA})
            names = conn.execute(text("SELECT view_name FROM paimon_views ORDER BY view_name")).scalars()
            assert list(names) == ["B", "a", "v1", "v2"]
        engine.dispose()
        migrate.downgrade(url, "0004")
        with engine.connect() as conn:
            columns = [c["name"] for c in inspect(conn).get_columns("paimon_views")]
            assert columns == ["catalog_key", "database_name", "view_name", "view_schema"]
            assert conn.execute(text("SELECT count(*) FROM paimon_views")).scalar() == 4
            assert inspect(conn).get_pk_constraint("paimon_views")["name"] == "paimon_views_pkey"
            assert "paimon_functions" not in inspect(conn).get_table_names()
    finally:
        engine.dispose()
