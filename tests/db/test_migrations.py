"""Migrations: one head, models == migrations, reversible with data, serialised, Java tables adopted."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psycopg
import psycopg.sql
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from paimon_meta.db import migrate
from paimon_meta.db.engine import libpq_conninfo, make_engine
from paimon_meta.db.models import Base
from tests.fixtures.postgres import DbFactory

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
OUR_TABLES = sorted(Base.metadata.tables)
HEAD = "0027"  # the newest revision under migrations/versions


def _diff(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        # The commit log's partitions (migration 0024) are made by time, not described by a model: the
        # parent is, and a partition's columns, indexes and constraints are the parent's by construction.
        partitions = set(
            conn.execute(
                text("SELECT relname FROM pg_class WHERE relispartition AND relkind = 'r'")
            ).scalars()
        )

        def include_name(name: str | None, type_: str, _parent: object) -> bool:
            return not (type_ == "table" and name in partitions)

        context = MigrationContext.configure(
            conn,
            opts={
                "version_table": migrate.VERSION_TABLE,
                "compare_type": True,
                "compare_server_default": True,
                "include_name": include_name,
            },
        )
        return list(compare_metadata(context, Base.metadata))


def test_single_head() -> None:
    assert migrate.heads() == [HEAD]


def test_revision_files_are_date_prefixed() -> None:
    names = [p.name for p in (migrate.script_location() / "versions").glob("*.py")]
    assert names
    for name in names:
        year, month, day, *_ = name.split("_")
        assert len(year) == 4 and len(month) == 2 and len(day) == 2, name
        assert (year + month + day).isdigit(), name


def test_every_migration_says_expand_or_contract() -> None:
    """Rolling upgrades (docs/DEPLOYMENT.md): a migration's header says whether it only adds (expand: the
    previous release keeps working on it) or removes what an older release used (contract)."""
    for path in sorted((REPO / "migrations" / "versions").glob("*.py")):
        header = path.read_text().split('"""')[1]
        assert "Kind: expand (" in header or "Kind: contract (" in header, path.name


def test_models_match_migrations(pg_engine: Engine) -> None:
    assert _diff(pg_engine) == []


def test_compare_detects_a_drift(clean_engine: Engine) -> None:
    # Guard against the comparison itself silently returning nothing.
    with clean_engine.begin() as conn:
        conn.execute(text("ALTER TABLE paimon_databases DROP COLUMN location"))
    diff = _diff(clean_engine)
    assert any("location" in repr(d) for d in diff), diff


def test_constraint_names_follow_the_convention(pg_engine: Engine) -> None:
    expected: set[tuple[str, str]] = set()
    for table in Base.metadata.tables.values():
        for constraint in table.constraints:
            expected.add((table.name, str(constraint.name)))
        for index in table.indexes:
            expected.add((table.name, str(index.name)))
    with pg_engine.connect() as conn:
        actual: set[tuple[str, str]] = set(
            conn.execute(
                text(
                    "SELECT c.relname, con.conname FROM pg_constraint con "
                    "JOIN pg_class c ON c.oid = con.conrelid WHERE c.relname = ANY(:t) "
                    "AND con.contype <> 'n' "  # PostgreSQL 18 lists NOT NULL constraints too
                    "UNION SELECT tablename, indexname FROM pg_indexes WHERE tablename = ANY(:t)"
                ),
                {"t": OUR_TABLES},
            )
        )
    assert actual == expected


def test_current_is_head(pg_url: str) -> None:
    assert migrate.current(pg_url) == HEAD


def test_downgrade_and_upgrade_with_data(pg_db_factory: DbFactory) -> None:
    url = pg_db_factory()
    engine = make_engine(url)
    try:
        table_uuid = uuid.uuid4()
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO paimon_tables (catalog_key, database_name, table_name, location, table_uuid,"
                    " schema_id, latest_snapshot_id) VALUES ('jdbc', 'db', 't', '/w/db.db/t', :u, 0, 3)"
                ),
                {"u": table_uuid},
            )
            conn.execute(
                text(
                    "INSERT INTO paimon_database_properties VALUES ('jdbc', 'db', 'exists', 'true');"
                    "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds)"
                    " VALUES ('jdbc.db.t', 60);"
                    "INSERT INTO paimon_databases (catalog_key, database_name) VALUES ('jdbc', 'db');"
                    "INSERT INTO paimon_lock_events (lock_id, event_type) VALUES ('jdbc.db.t', 'acquired');"
                )
            )
        engine.dispose()
        migrate.downgrade(url, "base")
        assert migrate.current(url) is None
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            # Java's tables survive in Java's shape, with their rows; ours are gone.
            assert {"paimon_tables", "paimon_database_properties", "paimon_distributed_locks"} <= names
            assert "paimon_commit_events" not in names and "paimon_databases" not in names
            assert "paimon_maintenance_events" not in names
            columns = [c["name"] for c in inspect(conn).get_columns("paimon_tables")]
            assert columns == ["catalog_key", "database_name", "table_name"]
            assert conn.execute(text("SELECT count(*) FROM paimon_tables")).scalar() == 1
            pk = inspect(conn).get_pk_constraint("paimon_distributed_locks")["name"]
            assert pk == "paimon_distributed_locks_pkey"
        engine.dispose()
        migrate.upgrade(url)
        assert migrate.current(url) == HEAD
        with engine.connect() as conn:
            row = conn.execute(text("SELECT table_name, table_id, location FROM paimon_tables")).one()
            assert row.table_name == "t" and row.table_id >= 1 and row.location is None
            assert conn.execute(text("SELECT count(*) FROM paimon_distributed_locks")).scalar() == 1
        assert _diff(engine) == []
    finally:
        engine.dispose()


def test_0014_normalises_existing_locations(
    pg_db_factory: DbFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows stored before the normal form (issue 34) get it, and its key; rows whose locations name one
    place (what the register hole left) are reported; a location with no normal form stops the upgrade
    naming its row."""
    url = pg_db_factory()
    migrate.downgrade(url, "0013")
    engine = make_engine(url)
    rows = {
        "victim": "/w/db1.db/t1",
        "stolen": "/w//db1.db/t1/",
        "around": "/w/./db1.db",
        "upper": "S3://Bkt//w/db.db/u/",
        "encoded": "file:/w/db.db/%76",
        "java": None,
    }
    try:
        with engine.begin() as conn:
            for name, location in rows.items():
                conn.execute(
                    text(
                        "INSERT INTO paimon_tables (catalog_key, database_name, table_name, location) "
                        "VALUES ('jdbc', 'db', :n, :l)"
                    ),
                    {"n": name, "l": location},
                )
        engine.dispose()
        with caplog.at_level(logging.WARNING, logger="paimon_meta.migrations"):
            migrate.upgrade(url)
        with engine.connect() as conn:
            got = {
                r.table_name: (r.location, r.location_key)
                for r in conn.execute(text("SELECT table_name, location, location_key FROM paimon_tables"))
            }
        assert got == {
            "victim": ("/w/db1.db/t1", "/w/db1.db/t1"),
            "stolen": ("/w/db1.db/t1", "/w/db1.db/t1"),
            "around": ("/w/db1.db", "/w/db1.db"),
            "upper": ("s3://Bkt/w/db.db/u", "s3://bkt/w/db.db/u"),
            "encoded": ("file:///w/db.db/v", "/w/db.db/v"),
            "java": (None, None),
        }
        warnings = [r.getMessage() for r in caplog.records if r.name == "paimon_meta.migrations"]
        assert any("jdbc:db.victim" in w and "jdbc:db.stolen" in w and "share" in w for w in warnings), (
            warnings
        )
        assert any("jdbc:db.around" in w and "inside" in w for w in warnings), warnings
        assert not any("upper" in w or "encoded" in w for w in warnings), warnings
        assert _diff(engine) == []

        # a location with no normal form: the upgrade stops, naming the row
        migrate.downgrade(url, "0013")
        with engine.begin() as conn:
            conn.execute(text("UPDATE paimon_tables SET location = '/w/x/../y' WHERE table_name = 'upper'"))
        engine.dispose()
        with pytest.raises(RuntimeError, match=r"jdbc:db.upper .*'\.\.'"):
            migrate.upgrade(url)
        assert migrate.current(url) == "0013"
    finally:
        engine.dispose()


def test_adopts_tables_java_created_first(pg_db_factory: DbFactory) -> None:
    url = pg_db_factory(migrated=False)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            # JdbcCatalog's DDL and inserts, as Java issues them.
            conn.execute(
                text(
                    "CREATE TABLE paimon_tables(catalog_key VARCHAR(255) NOT NULL,"
                    " database_name VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL,"
                    " PRIMARY KEY (catalog_key, database_name, table_name));"
                    "CREATE TABLE paimon_distributed_locks(lock_id VARCHAR(255) NOT NULL,"
                    " acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,"
                    " expire_time_seconds BIGINT DEFAULT 0 NOT NULL, PRIMARY KEY (lock_id));"
                    "INSERT INTO paimon_tables (catalog_key, database_name, table_name)"
                    " VALUES ('jdbc','d','a');"
                    "INSERT INTO paimon_tables (catalog_key, database_name, table_name)"
                    " VALUES ('jdbc','d','b');"
                )
            )
        engine.dispose()
        migrate.upgrade(url)
        with engine.connect() as conn:
            ids = conn.execute(text("SELECT table_id FROM paimon_tables ORDER BY table_name")).scalars().all()
        assert len(set(ids)) == 2
        assert _diff(engine) == []
    finally:
        engine.dispose()


def _upgrade_in_child(url: str) -> None:
    migrate.upgrade(url)


def test_concurrent_upgrades_are_serialised(pg_db_factory: DbFactory) -> None:
    url = pg_db_factory(migrated=False)
    errors: list[BaseException] = []

    def in_thread() -> None:
        try:
            migrate.upgrade(url)
        except BaseException as exc:
            errors.append(exc)

    # Two processes (the advisory lock) and two threads of this process (the in-process lock).
    ctx = multiprocessing.get_context("spawn")
    children = [ctx.Process(target=_upgrade_in_child, args=(url,)) for _ in range(2)]
    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for child in children:
        child.start()
    for thread in threads:
        thread.start()
    for child in children:
        child.join(60)
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert [c.exitcode for c in children] == [0, 0]
    assert migrate.current(url) == HEAD


def test_alembic_command_line_uses_the_same_env(pg_db_factory: DbFactory) -> None:
    url = pg_db_factory(migrated=False)
    env = {**os.environ, "PAIMON_META_DATABASE_URL": url}
    alembic = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]
    subprocess.run([*alembic, "upgrade", "head"], check=True, cwd=REPO, env=env, capture_output=True)
    assert migrate.current(url) == HEAD
    out = subprocess.run(
        [*alembic, "upgrade", "head", "--sql"], check=True, cwd=REPO, env=env, capture_output=True, text=True
    ).stdout
    # Offline mode emits the whole script (from base), verbatim: no doubled percent signs.
    assert "CREATE VIEW paimon_commit_history" in out and "CREATE VIEW paimon_maintenance_history" in out
    assert f"version_num='{HEAD}'" in out
    assert "%%" not in out and "pg_advisory_xact_lock" not in out
    # ... and that script, applied by hand, yields the same schema.
    offline_url = pg_db_factory(migrated=False)
    with psycopg.connect(libpq_conninfo(offline_url), autocommit=True) as conn:
        conn.execute(out.encode())
    engine = make_engine(offline_url)
    try:
        assert _diff(engine) == []
    finally:
        engine.dispose()


def _hold_table(url: str, table: str) -> psycopg.Connection[tuple[object, ...]]:
    """A live replica's transaction that has read ``table`` and stays open (its ACCESS SHARE lock held)."""
    holder = psycopg.connect(libpq_conninfo(url))
    holder.execute(psycopg.sql.SQL("SELECT count(*) FROM {}").format(psycopg.sql.Identifier(table)))
    return holder


def _columns(url: str, table: str) -> set[str]:
    engine = make_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def test_upgrade_beside_live_traffic_times_out_and_retries_instead_of_deadlocking(
    pg_db_factory: DbFactory,
) -> None:
    """CI saw it (stop 42's run): the Job's ``ALTER TABLE paimon_distributed_locks`` (0018) deadlocked with
    a live replica's transaction, since one transaction ran every revision and held the earlier ones'
    locks. Now each revision is its own transaction and waits at most the lock timeout: while a replica's
    transaction holds the table, the revision rolls back alone and is retried until the table is free."""
    url = pg_db_factory(migrated=False)
    migrate.upgrade(url, "0017")
    holder = _hold_table(url, "paimon_distributed_locks")
    pauses: list[float] = []

    def sleep(pause: float) -> None:
        pauses.append(pause)
        if len(pauses) == 2:
            holder.rollback()  # the replica's transaction ends: the next attempt gets the lock

    try:
        migrate.upgrade(url, lock_timeout_seconds=0.2, retry_for_seconds=3600, sleep=sleep)
    finally:
        holder.close()
    assert len(pauses) == 2
    assert migrate.current(url) == HEAD
    assert "held_since" in _columns(url, "paimon_distributed_locks")


def test_upgrade_that_keeps_losing_stops_at_a_whole_revision(pg_db_factory: DbFactory) -> None:
    """When the retry window ends, the error names the revision reached; nothing of the revision that
    lost is applied (each revision is one transaction), and the advisory lock is released."""
    url = pg_db_factory(migrated=False)
    migrate.upgrade(url, "0017")
    holder = _hold_table(url, "paimon_distributed_locks")
    try:
        with pytest.raises(migrate.MigrationLockTimeoutError) as caught:
            migrate.upgrade(url, lock_timeout_seconds=0.1, retry_for_seconds=0, sleep=lambda _: None)
    finally:
        holder.close()
    assert caught.value.fields["revision"] == "0017"
    assert migrate.current(url) == "0017"
    assert "held_since" not in _columns(url, "paimon_distributed_locks")
    # Nothing was left locked or half-done: the same upgrade now completes at once.
    migrate.upgrade(url, retry_for_seconds=0)
    assert migrate.current(url) == HEAD


def test_partitioning_uses_what_an_operator_built_online(pg_db_factory: DbFactory) -> None:
    """0024 on a large log: the operator built p0's primary key index and validated its range constraint
    while the previous release ran (0024's header); the migration adopts both instead of building and
    scanning, and the constraint's bound is p0's."""
    url = pg_db_factory(migrated=False)
    migrate.upgrade(url, "0023")
    bound = "2031-01-01 00:00:00+00"
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
        conn.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY paimon_commit_events_p0_pkey "
            "ON paimon_commit_events (event_id, created_at)"
        )
        conn.execute(
            "ALTER TABLE paimon_commit_events ADD CONSTRAINT ck_paimon_commit_events_p0_range "
            f"CHECK (created_at < '{bound}') NOT VALID"
        )
        conn.execute("ALTER TABLE paimon_commit_events VALIDATE CONSTRAINT ck_paimon_commit_events_p0_range")
        built = conn.execute("SELECT 'paimon_commit_events_p0_pkey'::regclass::oid").fetchone()
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            pk = conn.execute(
                text(
                    "SELECT conindid FROM pg_constraint WHERE contype = 'p' "
                    "AND conrelid = 'paimon_commit_events_p0'::regclass"
                )
            ).scalar_one()
            assert built is not None and pk == built[0]
            ranges = conn.execute(
                text("SELECT name, range_start, range_end FROM paimon_event_partitions ORDER BY range_end")
            ).all()
            assert ranges[0][0] == "paimon_commit_events_p0" and ranges[0][1] is None
            assert ranges[0][2].isoformat() == "2031-01-01T00:00:00+00:00" and ranges[1][1] == ranges[0][2]
            # the operator's constraint went: the partition bound says it now
            left = conn.execute(
                text("SELECT count(*) FROM pg_constraint WHERE conname = 'ck_paimon_commit_events_p0_range'")
            ).scalar_one()
            assert left == 0
        assert _diff(engine) == []
    finally:
        engine.dispose()
