"""Database and table rows, Java compatibility, and the snapshot pointer compare-and-set."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from sqlalchemy import Engine, text

from paimon_meta.errors import (
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    SnapshotPointerConflictError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ValidationError,
)
from paimon_meta.metastore.events import CommitRef, EventLog, SnapshotPublished
from paimon_meta.metastore.registry import Registry
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.model.snapshot import CommitKind

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("name", ["db", "_x", "A-b_9", "a" * 128])
def test_valid_identifiers(name: str) -> None:
    assert validate_identifier("table", name) == name


@pytest.mark.parametrize("name", ["", "9a", "a.b", "a b", "a;drop", "é", "a" * 129, "-a"])
def test_invalid_identifiers_are_named(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid table name") as info:
        validate_identifier("table", name)
    assert info.value.fields["identifier"] == name


def test_databases_and_tables(clean_engine: Engine) -> None:
    reg = Registry(clean_engine)
    db = reg.create_database("sales", location="s3://w/sales.db", properties={"owner": "team"})
    assert db.database_id is not None and db.properties == {"owner": "team"}
    with pytest.raises(DatabaseAlreadyExistsError):
        reg.create_database("sales")
    with pytest.raises(ValidationError):
        reg.create_database("bad name")
    assert reg.list_databases() == ["sales"]

    table_uuid = uuid.uuid4()
    row = reg.create_table_row("sales", "orders", "s3://w/sales.db/orders", table_uuid, 0)
    assert (row.identifier, row.location, row.table_uuid, row.schema_id) == (
        "sales.orders",
        "s3://w/sales.db/orders",
        table_uuid,
        0,
    )
    assert row.latest_snapshot_id is None
    with pytest.raises(TableAlreadyExistsError):
        reg.create_table_row("sales", "orders", "s3://elsewhere", uuid.uuid4(), 0)
    with pytest.raises(TableAlreadyExistsError, match="uuid"):
        reg.create_table_row("sales", "orders2", "s3://w/sales.db/orders2", table_uuid, 0)
    # another spelling of a registered location, or one inside it: refused on the normal forms
    for other in (
        "S3://w//sales.db/orders/",
        "s3a://w/sales.db/./orders",
        "s3://w/sales.db/orders/x",
        "s3://w",
    ):
        with pytest.raises(TableAlreadyExistsError, match=r"overlaps the files of table sales\.orders"):
            reg.create_table_row("sales", "orders3", other, uuid.uuid4(), 0)
    with pytest.raises(DatabaseNotFoundError):
        reg.create_table_row("nope", "t", "s3://x", uuid.uuid4(), 0)
    with pytest.raises(ValidationError, match="invalid table name"):
        reg.create_table_row("sales", "t;", "s3://x", uuid.uuid4(), 0)

    assert reg.get_table_row("sales", "orders") == row
    assert reg.get_table_row_by_id(row.table_id) == row
    assert [r.name for r in reg.list_table_rows("sales")] == ["orders"]
    assert reg.lock_id("sales", "orders") == "jdbc.sales.orders"
    assert reg.drop_table_row("sales", "orders").table_id == row.table_id
    with pytest.raises(TableNotFoundError):
        reg.get_table_row("sales", "orders")
    with pytest.raises(TableNotFoundError):
        reg.drop_table_row("sales", "orders")
    # A new table under the old name gets a new id: old events never point at it.
    again = reg.create_table_row("sales", "orders", "s3://w/sales.db/orders-2", uuid.uuid4(), 0)
    assert again.table_id > row.table_id


def test_java_sees_ours_and_we_see_javas(clean_engine: Engine) -> None:
    reg = Registry(clean_engine)
    reg.create_database("ours", location="/w/ours.db")
    with clean_engine.begin() as conn:
        props = {
            key: value
            for key, value in conn.execute(
                text(
                    "SELECT property_key, property_value FROM paimon_database_properties"
                    " WHERE catalog_key = 'jdbc' AND database_name = 'ours'"
                )
            )
        }
        # What JdbcCatalog.createDatabaseImpl and createTableImpl insert.
        conn.execute(
            text(
                "INSERT INTO paimon_database_properties (catalog_key, database_name, property_key,"
                " property_value) VALUES ('jdbc', 'theirs', 'exists', 'true'),"
                " ('jdbc', 'theirs', 'location', '/w/theirs.db'), ('jdbc', 'theirs', 'k', 'v')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO paimon_tables (catalog_key, database_name, table_name)"
                " VALUES ('jdbc', 'theirs', 'events')"
            )
        )
    assert props == {"exists": "true", "location": "/w/ours.db"}
    assert reg.list_databases() == ["ours", "theirs"]
    # databases only table rows name (read by a skip scan of the key): each once, in order
    with clean_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_tables (catalog_key, database_name, table_name) VALUES"
                " ('jdbc', 'only_rows', 'a'), ('jdbc', 'only_rows', 'b'), ('jdbc', 'zz', 'c'),"
                " ('other', 'elsewhere', 'd')"
            )
        )
    assert reg.list_databases() == ["only_rows", "ours", "theirs", "zz"]
    theirs = reg.get_database("theirs")
    assert (theirs.database_id, theirs.location, theirs.properties) == (None, "/w/theirs.db", {"k": "v"})
    with pytest.raises(DatabaseAlreadyExistsError):
        reg.create_database("theirs")
    java_row = reg.get_table_row("theirs", "events")
    assert java_row.location is None and java_row.table_id >= 1
    # Another catalog key is another catalog.
    assert Registry(clean_engine, catalog_key="other").list_databases() == ["elsewhere"]
    assert Registry(clean_engine, catalog_key="third").list_databases() == []
    with pytest.raises(DatabaseNotFoundError):
        reg.get_database("missing")


def test_advance_pointer_is_a_compare_and_set(clean_engine: Engine) -> None:
    reg = Registry(clean_engine)
    reg.create_database("db")
    row = reg.create_table_row("db", "t", "/w/db.db/t", uuid.uuid4(), 0)
    ref = CommitRef.new(
        table_id=row.table_id,
        table_identifier=row.identifier,
        commit_user="u",
        commit_identifier=1,
        commit_kind=CommitKind.APPEND,
    )
    with clean_engine.begin() as conn:
        Registry.advance_pointer(conn, row.table_id, None, 1)
        EventLog.append(conn, SnapshotPublished(ref=ref, snapshot_id=1))
    with pytest.raises(SnapshotPointerConflictError) as info, clean_engine.begin() as conn:
        Registry.advance_pointer(conn, row.table_id, None, 2)
    assert info.value.fields["actual"] == 1
    # A failed CAS rolls back with the rest of its transaction (here: the event).
    second = CommitRef.new(
        table_id=row.table_id,
        table_identifier=row.identifier,
        commit_user="u",
        commit_identifier=2,
        commit_kind=CommitKind.APPEND,
    )
    with pytest.raises(SnapshotPointerConflictError), clean_engine.begin() as conn:
        EventLog.append(conn, SnapshotPublished(ref=second, snapshot_id=5))
        Registry.advance_pointer(conn, row.table_id, 4, 5)
    with clean_engine.begin() as conn:
        Registry.advance_pointer(conn, row.table_id, 1, 3)  # a gap is fine (external commits)
    assert reg.get_table_row("db", "t").latest_snapshot_id == 3
    assert EventLog(clean_engine).events_for_commit(second.commit_id) == []
    for prev, new in ((3, 3), (3, 2), (None, 0)):
        with pytest.raises(ValidationError), clean_engine.begin() as conn:
            Registry.advance_pointer(conn, row.table_id, prev, new)
    with pytest.raises(TableNotFoundError), clean_engine.begin() as conn:
        Registry.advance_pointer(conn, 10**12, None, 1)


def test_errors_inside_a_caller_transaction_leave_it_usable(clean_engine: Engine) -> None:
    reg = Registry(clean_engine)
    with clean_engine.begin() as conn:
        reg.create_database("db", conn=conn)
        reg.create_table_row("db", "t", "/w/t", uuid.uuid4(), 0, conn=conn)
        with pytest.raises(TableAlreadyExistsError):
            reg.create_table_row("db", "t", "/w/t2", uuid.uuid4(), 0, conn=conn)
        reg.create_table_row("db", "u", "/w/u", uuid.uuid4(), 0, conn=conn)
    assert [r.name for r in reg.list_table_rows("db")] == ["t", "u"]


def test_two_concurrent_overlapping_creates_cannot_both_pass(clean_engine: Engine) -> None:
    """Issue 34: the overlap check and the insert run under one advisory lock, so a second create of an
    overlapping location (another spelling, another name) waits for the first and then sees its row."""
    reg = Registry(clean_engine)
    reg.create_database("db")
    outcome: list[BaseException | str] = []

    def second() -> None:
        try:
            reg.create_table_row("db", "b", "/w//db.db/t/", uuid.uuid4(), 0)
            outcome.append("created")
        except BaseException as e:  # recorded for the main thread
            outcome.append(e)

    with clean_engine.connect() as conn, conn.begin():
        reg.create_table_row("db", "a", "/w/db.db/t", uuid.uuid4(), 0, conn=conn)
        thread = threading.Thread(target=second)
        thread.start()
        # wait (a condition, not a sleep) until the second create waits for the advisory lock
        deadline = time.monotonic() + 60
        with clean_engine.connect() as probe:
            while not outcome:
                waiting = probe.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND "
                        "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    )
                ).scalar_one()
                probe.rollback()
                if waiting:
                    break
                assert time.monotonic() < deadline, "the second create never waited for the first"
                time.sleep(0.05)
        assert not outcome, outcome  # it did not pass the check while the first was uncommitted
    thread.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], TableAlreadyExistsError), outcome
    assert "overlaps the files of table db.a" in str(outcome[0])
    assert [r.name for r in reg.list_table_rows("db")] == ["a"]
