"""The change feed reads the commit, lock and maintenance logs as one stream in (txid, log, event id)
order below the horizon of running transactions: resumable from any position with nothing lost or
repeated, even when a transaction that took a lower event id commits after one that took a higher id."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from sqlalchemy import Engine

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.errors import ValidationError
from paimon_meta.metastore.feed import FEED_CHANNEL, START, FeedEvent, FeedFilter, Position, read_feed
from paimon_meta.ops.tags import create_tag
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import FAST_LOCK

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])
KEY = "jdbc"


def _write(catalog: MetastoreCatalog, identifier: str, keys: list[int]) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array(keys, pa.int64())}))
    commit.commit(write.prepare_commit())
    write.close()


def _lock_event(conn: psycopg.Connection, table: str) -> int:
    row = conn.execute(
        "INSERT INTO paimon_lock_events (lock_id, event_type, owner) VALUES (%s, 'acquired', 'test') "
        "RETURNING event_id",
        (f"{KEY}.db.{table}",),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_order_resume_and_filters(clean_db: str, tmp_path: Path) -> None:
    catalog = paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK)
    try:
        catalog.create_table("db.t", SCHEMA)
        catalog.create_table("db.u", SCHEMA)
        for i in range(3):
            _write(catalog, "db.t", [i])
        _write(catalog, "db.u", [9])
        create_tag(catalog, "db.t", "v1", principal="alice")
        everything, end = read_feed(catalog.engine, catalog_key=KEY, limit=1000)
        positions = [e.position for e in everything]
        assert positions == sorted(set(positions)) and end == positions[-1]
        assert {e.log for e in everything} == {"commit", "lock", "maintenance"}
        published = [e for e in everything if e.kind == "snapshot_published"]
        assert [(e.subject, e.data["snapshotId"]) for e in published] == [
            ("db.t", 1),
            ("db.t", 2),
            ("db.t", 3),
            ("db.u", 1),
        ]
        assert {e.subject for e in everything if e.log == "lock"} == {"db.t", "db.u"}
        runs = [e for e in everything if e.log == "maintenance"]
        assert [e.kind for e in runs] == ["create_tag.started", "create_tag.finished"]
        assert all(e.principal == "alice" for e in runs)

        # pages of 3, each resumed from the last position: the same events once each
        paged, cursor = [], START
        while True:
            page, cursor = read_feed(catalog.engine, catalog_key=KEY, after=cursor, limit=3)
            if not page:
                break
            paged += page
        assert paged == everything
        assert read_feed(catalog.engine, catalog_key=KEY, after=end)[0] == []

        only_u, _ = read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(subject="db.u"))
        assert only_u and {e.subject for e in only_u} == {"db.u"}
        kinds, _ = read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(kinds=("snapshot_published",)))
        assert kinds == published
        # kind lanes (one index range per kind and log, a log no kind can come from not read): the same
        # events as the whole feed filtered, in pages resumed from their positions, from any position
        for wanted in (
            ("acquired", "create_tag.finished", "prepared"),
            ("released",),
            ("create_tag.started", "bogus"),
            ("bogus",),
            ("lock", "snapshot_published"),  # a whole log named: every log read whole
        ):
            expected = [e for e in everything if e.kind in wanted or e.log in wanted]
            for start in (START, everything[len(everything) // 2].position):
                got, cursor = [], start
                while True:
                    page, cursor = read_feed(
                        catalog.engine, catalog_key=KEY, after=cursor, limit=2, keep=FeedFilter(kinds=wanted)
                    )
                    if not page:
                        break
                    got += page
                assert got == [e for e in expected if e.position > start], wanted
        assert any(e.kind == "acquired" for e in everything)
        hidden, _ = read_feed(catalog.engine, catalog_key=KEY, visible=lambda e: e.subject != "db.t")
        assert hidden == [e for e in everything if e.subject != "db.t"]
        by_alice, _ = read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(principal="alice"))
        assert by_alice == runs
        in_db, _ = read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(database="db"))
        assert in_db == everything
        assert read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(database="other"))[0] == []
        # a time range: since inclusive, until exclusive, on the event's own time
        middle = published[2].time
        since, _ = read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(since=middle))
        until, _ = read_feed(catalog.engine, catalog_key=KEY, keep=FeedFilter(until=middle))
        assert since == [e for e in everything if e.time >= middle] and published[2] in since
        assert until == [e for e in everything if e.time < middle] and published[2] not in until
        assert since and until and len(since) + len(until) == len(everything)
        assert Position.parse(end.token()) == end
        for bad in ("x", "1.2", "1.9.1", "-1.0.0", "1.0.0.0"):
            with pytest.raises(ValidationError):
                Position.parse(bad)
    finally:
        catalog.close()


def test_a_late_committing_transaction_is_neither_lost_nor_repeated(clean_engine: Engine) -> None:
    """T_a starts writing first (the lower txid) but takes its event id after T_b, and commits after T_b.
    A reader by event id would pass T_b's event and never see T_a's; the feed holds T_b's back until
    T_a has ended, then gives both, T_a's first."""
    conninfo = libpq_conninfo(clean_engine.url.render_as_string(hide_password=False))
    with psycopg.connect(conninfo) as a, psycopg.connect(conninfo) as b:
        a.execute("SELECT pg_current_xact_id()")  # T_a has its transaction id (the older one)
        b_id = _lock_event(b, "b")
        b.commit()
        seen, cursor = read_feed(clean_engine, catalog_key=KEY)
        assert seen == []  # held back: an older transaction is still running
        a_id = _lock_event(a, "a")
        assert a_id > b_id
        seen, cursor = read_feed(clean_engine, catalog_key=KEY, after=cursor)
        assert seen == []
        a.commit()
        seen, cursor = read_feed(clean_engine, catalog_key=KEY, after=cursor)
        assert [(e.subject, e.data["lockId"]) for e in seen] == [
            ("db.a", f"{KEY}.db.a"),
            ("db.b", f"{KEY}.db.b"),
        ]
        assert read_feed(clean_engine, catalog_key=KEY, after=cursor)[0] == []
        # a rolled-back event is never delivered, and does not hold the feed back once it ended
        c_open = _lock_event(a, "rolled_back")
        assert c_open > a_id
        a.rollback()
        d_id = _lock_event(b, "d")
        b.commit()
        seen, _ = read_feed(clean_engine, catalog_key=KEY, after=cursor)
        assert [(e.subject, e.position.event_id) for e in seen] == [("db.d", d_id)]


def test_a_committed_event_notifies_feed_readers_and_a_rolled_back_one_does_not(clean_db: str) -> None:
    """Migration 0011's trigger: the transaction that writes events NOTIFYs FEED_CHANNEL when it commits
    (once, however many events), and never when it rolls back."""
    from sqlalchemy import create_engine

    conninfo = libpq_conninfo(create_engine(clean_db).url)
    with (
        psycopg.connect(conninfo, autocommit=True) as listener,
        psycopg.connect(conninfo) as writer,
    ):
        listener.execute(f"LISTEN {FEED_CHANNEL}")
        _lock_event(writer, "t")
        _lock_event(writer, "t")
        assert [n for n in listener.notifies(timeout=0.3)] == []  # not before it commits
        writer.commit()
        assert [n.channel for n in listener.notifies(timeout=2, stop_after=1)] == [FEED_CHANNEL]
        assert [n for n in listener.notifies(timeout=0.3)] == []  # one for the transaction
        _lock_event(writer, "t")
        writer.rollback()
        assert [n for n in listener.notifies(timeout=0.5)] == []


def test_lock_events_carry_the_principal_their_commit_ran_as(clean_db: str, tmp_path: Path) -> None:
    """A commit made for a principal (the service's) records it on its lock events too; the feed says
    so (a forced release names its operator in the data)."""
    from paimon_meta.commit.coordinator import CommitCoordinator

    catalog = paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK)
    try:
        table = catalog.create_table("db.t", SCHEMA)
        row = catalog.registry.get_table_row("db", "t")
        wb = table.new_batch_write_builder()
        write = wb.new_write()
        write.write_arrow(pa.table({"k": pa.array([1], pa.int64())}))
        guard = catalog._guard(row, table.snapshot_manager, principal="etl")
        CommitCoordinator(table, guard, commit_user="u").commit(write.prepare_commit(), 1)
        write.close()
        start = Position(0, 0, 0)
        events: list[FeedEvent] = []
        while True:  # the horizon may hold recent events back while other transactions run
            page, start = read_feed(catalog.engine, catalog_key=KEY, after=start, limit=1000)
            events += page
            if {e.kind for e in events if e.log == "lock"} >= {"acquired", "released"}:
                break
        locks = [e for e in events if e.log == "lock"]
        assert locks and all(e.principal == "etl" for e in locks), locks
        assert all(e.principal == "etl" for e in events if e.log == "commit")
    finally:
        catalog.close()
