"""The commit log partitioned by time (migration 0024, paimon_meta.metastore.event_partitions): the
migration keeps every event, id, commit and feed position; partitions are made ahead, idempotently and
by two replicas at once; a partition is dropped only when archived and past, taking its ledger rows and
never the event id sequence; the log stays append-only and its two uniqueness invariants hold."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy.exc
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

import paimon_meta
from paimon_meta.db import migrate
from paimon_meta.db.engine import make_engine
from paimon_meta.errors import (
    EventLogPartitionMissingError,
    EventPartitionArchiveConflictError,
    EventPartitionInUseError,
    EventPartitionNotArchivedError,
    EventPartitionNotFoundError,
)
from paimon_meta.metastore.event_partitions import (
    PURGED_CATALOG,
    EventPartitions,
    is_partition_missing,
)
from paimon_meta.metastore.events import CommitRef, ConflictChecked, EventLog
from paimon_meta.metastore.feed import read_feed
from paimon_meta.model.snapshot import CommitKind
from tests.fixtures.postgres import DbFactory
from tests.fixtures.service import FAST_LOCK

pytestmark = pytest.mark.postgres

P0 = "paimon_commit_events_p0"
UQ_SNAPSHOT = "uq_paimon_commit_events_table_snapshot"
UQ_COMMIT = "uq_paimon_commit_events_commit_published"
SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])


def _event(
    conn: Connection,
    table_id: int,
    *,
    kind: str = "conflict_checked",
    snapshot: int | None = None,
    commit_id: uuid.UUID | None = None,
    at: datetime | None = None,
    identifier: str = "db.t",
) -> int:
    columns = {
        "commit_id": commit_id or uuid.uuid4(),
        "table_id": table_id,
        "table_identifier": identifier,
        "event_type": kind,
        "commit_user": "u",
        "commit_identifier": 1,
        "commit_kind": "APPEND",
        "snapshot_id": snapshot,
    }
    if at is not None:
        columns["created_at"] = at
    names = ", ".join(columns)
    values = ", ".join(f":{c}" for c in columns)
    return int(
        conn.execute(
            text(f"INSERT INTO paimon_commit_events ({names}) VALUES ({values}) RETURNING event_id"),  # noqa: S608
            columns,
        ).scalar_one()
    )


def _table(conn: Connection, catalog: str, name: str) -> int:
    return int(
        conn.execute(
            text(
                "INSERT INTO paimon_tables (catalog_key, database_name, table_name) VALUES (:c, 'db', :n) "
                "RETURNING table_id"
            ),
            {"c": catalog, "n": name},
        ).scalar_one()
    )


def _until(condition: Any, what: str, deadline: float = 60.0) -> Any:
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _write(catalog: Any, identifier: str, keys: list[int]) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array(keys, pa.int64())}))
    commit.commit(write.prepare_commit())
    write.close()


def test_migration_keeps_events_ids_commits_and_feed(pg_db_factory: DbFactory, tmp_path: Path) -> None:
    url = pg_db_factory(migrated=False)
    migrate.upgrade(url, "0023")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            tid = _table(conn, "jdbc", "t")
            before = [_event(conn, tid) for _ in range(3)]
            published = uuid.uuid4()
            before.append(_event(conn, tid, kind="snapshot_published", snapshot=1, commit_id=published))

        # the feed reads below the horizon of the cluster's running transactions: wait for it
        def first_read() -> tuple[list[int], Any] | None:
            events, end = read_feed(engine, catalog_key="jdbc", limit=1000)
            ids = [e.position.event_id for e in events if e.log == "commit"]
            return (ids, end) if ids == before else None

        first, position = _until(first_read, "the feed to show the events before the migration")
        assert first == before
        with engine.begin() as conn:
            after_position = [_event(conn, tid) for _ in range(2)]
        engine.dispose()

        migrate.upgrade(url)
        with engine.connect() as conn:
            assert (
                conn.execute(
                    text("SELECT relkind FROM pg_class WHERE relname = 'paimon_commit_events'")
                ).scalar_one()
                == "p"
            )
            ids = conn.execute(text("SELECT event_id FROM paimon_commit_events ORDER BY event_id")).scalars()
            assert list(ids) == before + after_position
            # the views read the parent, not p0 alone
            assert conn.execute(text("SELECT count(*) FROM paimon_commit_history")).scalar_one() == 6
            assert (
                conn.execute(
                    text("SELECT count(*) FROM paimon_published_snapshots WHERE commit_id = :c"),
                    {"c": published},
                ).scalar_one()
                == 1
            )
        # the ledger holds the events published before the migration: a second publish is refused
        with (
            pytest.raises(IntegrityError, match=UQ_SNAPSHOT),
            engine.begin() as conn,
        ):
            _event(conn, tid, kind="external", snapshot=1)
        with (
            pytest.raises(IntegrityError, match=UQ_COMMIT),
            engine.begin() as conn,
        ):
            _event(conn, tid, kind="snapshot_published", snapshot=2, commit_id=published)

        # commits continue, with event ids after the old ones
        catalog = paimon_meta.connect(url, str(tmp_path / "wh"), **FAST_LOCK)
        try:
            catalog.create_table("db.n", SCHEMA)
            _write(catalog, "db.n", [1])
            _write(catalog, "db.n", [2])
            latest = catalog.get_table("db.n").latest_snapshot()
            assert latest is not None and latest.id == 2
        finally:
            catalog.close()
        with engine.connect() as conn:
            new_ids = list(
                conn.execute(
                    text("SELECT event_id FROM paimon_commit_events WHERE table_identifier = 'db.n'")
                ).scalars()
            )
        assert new_ids and min(new_ids) > max(after_position)

        # the feed resumes from the position taken before the migration: the rest, once each
        def resumed() -> list[int]:
            events, _ = read_feed(engine, catalog_key="jdbc", after=position, limit=1000)
            ids = [e.position.event_id for e in events if e.log == "commit"]
            return ids if set(new_ids) <= set(ids) else []

        ids = _until(resumed, "the feed to show the commits after the migration")
        assert ids[: len(after_position)] == after_position
        assert len(ids) == len(set(ids)) and not set(ids) & set(before)

        # downgrade: one plain table again, with every event
        engine.dispose()
        migrate.downgrade(url, "0023")
        with engine.connect() as conn:
            assert (
                conn.execute(
                    text("SELECT relkind FROM pg_class WHERE relname = 'paimon_commit_events'")
                ).scalar_one()
                == "r"
            )
            count = conn.execute(text("SELECT count(*) FROM paimon_commit_events")).scalar_one()
            assert count == len(before) + len(after_position) + len(new_ids)
        with (
            pytest.raises(IntegrityError, match=UQ_SNAPSHOT),
            engine.begin() as conn,
        ):
            _event(conn, tid, kind="external", snapshot=1)
        engine.dispose()
        migrate.upgrade(url)
        assert [migrate.current(url)] == migrate.heads()
    finally:
        engine.dispose()


def test_ensure_ahead_is_idempotent_concurrent_and_contiguous(clean_engine: Engine) -> None:
    day = EventPartitions(clean_engine, period=timedelta(days=1), actor="test")
    with clean_engine.connect() as conn:
        now: datetime = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    made: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            made.append(day.ensure_ahead(periods=20))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(len(m) for m in made)[0] == 0  # the second found them made
    assert day.ensure_ahead(periods=20) == []
    live = day.partitions()
    assert live[0].name == P0 and live[0].start is None
    for a, b in itertools.pairwise(live):
        assert a.end == b.start  # contiguous
    assert live[-1].end >= now + timedelta(days=20)
    # the period in force applies to the partitions made after it (the migration's were 7 days)
    assert all(p.end - p.start == timedelta(days=1) for p in live if p.name in made[0] + made[1] and p.start)
    with clean_engine.connect() as conn:
        registered = conn.execute(
            text("SELECT count(*) FROM paimon_event_partitions WHERE created_by = 'test'")
        ).scalar_one()
    assert registered == len(made[0]) + len(made[1])


def test_an_event_no_partition_covers_is_a_typed_error(clean_engine: Engine) -> None:
    # Made impossible in practice by ensure_ahead; made possible here by taking away the current one.
    with clean_engine.begin() as conn:
        tid = _table(conn, "jdbc", "t")
    with pytest.raises(IntegrityError) as raised, clean_engine.begin() as conn:
        _event(conn, tid, at=datetime.now(UTC) + timedelta(days=3650))
    assert is_partition_missing(raised.value)
    with clean_engine.begin() as conn:
        conn.execute(text(f"ALTER TABLE paimon_commit_events DETACH PARTITION {P0}"))
    ref = CommitRef.new(
        table_id=tid,
        table_identifier="db.t",
        commit_user="u",
        commit_identifier=1,
        commit_kind=CommitKind.APPEND,
    )
    with pytest.raises(EventLogPartitionMissingError, match="no partition"), clean_engine.begin() as conn:
        EventLog.append(conn, ConflictChecked(ref=ref, conflict=False))


def test_the_log_is_append_only_on_the_parent_and_every_partition(clean_engine: Engine) -> None:
    EventPartitions(clean_engine).ensure_ahead(periods=3)
    with clean_engine.begin() as conn:
        _event(conn, _table(conn, "jdbc", "t"))
        partitions = list(
            conn.execute(
                text(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE i.inhparent = 'paimon_commit_events'::regclass"
                )
            ).scalars()
        )
    assert P0 in partitions and len(partitions) >= 4
    for relation in ["paimon_commit_events", *partitions]:
        for statement in (
            f"UPDATE {relation} SET attempt = 2",  # noqa: S608 - names from pg_class
            f"DELETE FROM {relation}",  # noqa: S608
            f"TRUNCATE {relation}",
        ):
            with pytest.raises(sqlalchemy.exc.DBAPIError, match="append-only"), clean_engine.begin() as conn:
                conn.execute(text(statement))
    with clean_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM paimon_commit_events")).scalar_one() == 1


def test_one_publish_per_snapshot_and_per_commit_across_partitions(clean_engine: Engine) -> None:
    EventPartitions(clean_engine).ensure_ahead(periods=3)
    later = datetime.now(UTC) + timedelta(days=8)  # another partition than now's
    with clean_engine.begin() as conn:
        tid = _table(conn, "jdbc", "t")
        commit = uuid.uuid4()
        _event(conn, tid, kind="snapshot_published", snapshot=1, commit_id=commit)
    with (
        pytest.raises(IntegrityError, match=UQ_SNAPSHOT),
        clean_engine.begin() as conn,
    ):
        _event(conn, tid, kind="snapshot_published", snapshot=1, at=later)
    with (
        pytest.raises(IntegrityError, match=UQ_COMMIT),
        clean_engine.begin() as conn,
    ):
        _event(conn, tid, kind="snapshot_published", snapshot=2, commit_id=commit, at=later)
    with clean_engine.begin() as conn:  # another branch, another timeline: other snapshots
        conn.execute(
            text(
                "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type, "
                "commit_user, commit_identifier, commit_kind, snapshot_id, branch) VALUES "
                "(:c, :t, 'db.t', 'snapshot_published', 'u', 2, 'APPEND', 1, 'b1')"
            ),
            {"c": uuid.uuid4(), "t": tid},
        )
        _event(conn, tid, kind="snapshot_published", snapshot=2, at=later)
        assert conn.execute(text("SELECT count(*) FROM paimon_published_snapshots")).scalar_one() == 3


def test_drop_only_archived_past_partitions(clean_engine: Engine) -> None:
    parts = EventPartitions(clean_engine, actor="test")
    parts.ensure_ahead(periods=3)
    with clean_engine.begin() as conn:
        a = _table(conn, "a", "t")
        b = _table(conn, "b", "t")
        conn.execute(
            text(
                "INSERT INTO paimon_dropped_tables (catalog_key, database_name, table_name, table_id, "
                "table_row, purge_after) SELECT 'c', 'db', 'gone', :b + 1000, '{}'::jsonb, now()"
            ),
            {"b": b},
        )
        a_ids = [_event(conn, a) for _ in range(5)]
        _event(conn, a, kind="snapshot_published", snapshot=1)
        _event(conn, b, kind="snapshot_published", snapshot=1)
        _event(conn, b + 1000)  # a table in the recycle bin
        _event(conn, b + 2000)  # a table purged since
        # an event of a later partition, and its ledger row, stay
        _event(conn, a, kind="snapshot_published", snapshot=2, at=datetime.now(UTC) + timedelta(days=8))
    assert parts.catalogs_in(P0) == sorted([PURGED_CATALOG, "a", "b", "c"])

    # rows: every column, keyset by event id, one catalog
    page1 = parts.rows(P0, catalog_key="a", after_event_id=None, limit=4)
    page2 = parts.rows(P0, catalog_key="a", after_event_id=page1[-1]["event_id"], limit=4)
    rows = page1 + page2
    assert [r["event_id"] for r in rows][:5] == a_ids and len(rows) == 6
    assert {"commit_id", "payload", "created_at", "txid", "branch"} <= set(rows[0])
    assert parts.rows(P0, catalog_key="a", after_event_id=rows[-1]["event_id"], limit=4) == []

    p0 = next(p for p in parts.partitions() if p.name == P0)
    past = p0.end + timedelta(hours=1)
    with pytest.raises(EventPartitionInUseError, match=P0):
        parts.drop(P0, operator="op")  # the database's clock: p0 holds now
    with pytest.raises(EventPartitionNotArchivedError) as refused:
        parts.drop(P0, operator="op", now=past)
    assert refused.value.fields["catalogs"] == sorted([PURGED_CATALOG, "a", "b", "c"])
    assert all(k in str(refused.value) for k in ("a", "b", "c", PURGED_CATALOG))

    parts.mark_archived(P0, catalog_key="a", snapshot_id=7, row_count=6, archived_by="archiver")
    parts.mark_archived(P0, catalog_key="a", snapshot_id=7, row_count=6, archived_by="archiver")  # again
    with pytest.raises(EventPartitionArchiveConflictError):
        parts.mark_archived(P0, catalog_key="a", snapshot_id=8, row_count=6, archived_by="archiver")
    parts.mark_archived(P0, catalog_key="b", snapshot_id=3, row_count=1, archived_by="archiver")
    parts.mark_archived(P0, catalog_key="c", snapshot_id=3, row_count=1, archived_by="archiver")
    parts.mark_archived(P0, catalog_key=PURGED_CATALOG, snapshot_id=1, row_count=5, archived_by="op")
    with pytest.raises(EventPartitionNotArchivedError, match=PURGED_CATALOG):  # wrong count: refused
        parts.drop(P0, operator="op", now=past)
    with clean_engine.begin() as conn:  # an operator corrects the record by hand
        conn.execute(
            text("UPDATE paimon_event_archives SET row_count = 1 WHERE catalog_key = :k"),
            {"k": PURGED_CATALOG},
        )
    assert next(p for p in parts.partitions() if p.name == P0).archived == {
        PURGED_CATALOG: 1,
        "a": 7,
        "b": 3,
        "c": 3,
    }
    with clean_engine.connect() as conn:
        ledger_before = conn.execute(text("SELECT count(*) FROM paimon_published_snapshots")).scalar_one()
    parts.drop(P0, operator="op", now=past)
    parts.drop(P0, operator="op", now=past)  # idempotent

    assert P0 not in [p.name for p in parts.partitions()]
    [dropped] = parts.dropped()
    assert dropped.name == P0 and dropped.dropped_at is not None and dropped.archived["a"] == 7
    with clean_engine.begin() as conn:
        assert conn.execute(text("SELECT to_regclass(:n)"), {"n": P0}).scalar_one() is None
        # the ledger rows of p0's range went with it; the later partition's stayed
        ledger = conn.execute(text("SELECT snapshot_id FROM paimon_published_snapshots")).scalars().all()
        assert ledger_before == 3 and ledger == [2]
        who = conn.execute(
            text("SELECT dropped_by FROM paimon_event_partitions WHERE name = :n"), {"n": P0}
        ).scalar_one()
        assert who == "op"
        # the event id sequence survived the drop and still numbers events
        assert conn.execute(text("SELECT to_regclass('paimon_commit_events_event_id_seq')")).scalar_one()
        later = _event(conn, a, at=datetime.now(UTC) + timedelta(days=8))
    assert later > max(a_ids)
    with pytest.raises(EventPartitionNotFoundError):
        parts.drop("paimon_commit_events_p19990101", operator="op")
    with pytest.raises(EventPartitionNotFoundError):
        parts.catalogs_in(P0)


def _detach_ahead(engine: Engine) -> list[str]:
    """Take away the (empty) partitions the migration made ahead of now's: p0 alone covers now."""
    parts = EventPartitions(engine)
    ahead = [p.name for p in parts.partitions() if p.name != P0]
    with engine.begin() as conn:
        for name in ahead:
            conn.execute(text(f"ALTER TABLE paimon_commit_events DETACH PARTITION {name}"))
            conn.execute(text(f"DROP TABLE {name}"))
        conn.execute(text("DELETE FROM paimon_event_partitions WHERE name = ANY(:n)"), {"n": ahead})
    return ahead


def test_serve_makes_partitions_ahead_and_survives_failures(
    clean_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paimon_meta.service import state as service_state
    from paimon_meta.service.state import ServiceSettings, ServiceState

    catalog = paimon_meta.connect(clean_db, str(tmp_path / "w"), **FAST_LOCK)
    _detach_ahead(catalog.engine)
    calls: list[int] = []
    real = EventPartitions.ensure_ahead

    def flaky(self: EventPartitions, **kwargs: Any) -> list[str]:
        calls.append(1)
        if len(calls) <= 2:  # the metastore unreachable: logged, tried again
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))
        return real(self, **kwargs)

    monkeypatch.setattr(EventPartitions, "ensure_ahead", flaky)
    monkeypatch.setattr(service_state, "EVENT_PARTITIONS_RETRY_SECONDS", 0.05)
    # p0 covers up to the Monday after the template's migration (up to 7 days ahead): 8 periods of a day
    # ahead reach past it whatever the weekday
    monkeypatch.setattr(service_state, "EVENT_PARTITIONS_AHEAD", 8)
    settings = ServiceSettings(recovery_interval_seconds=0, event_partition_days=1)
    state = ServiceState(settings, catalog)
    try:
        live = _until(
            lambda: [p for p in EventPartitions(catalog.engine).partitions() if p.name != P0],
            "the service to make the partitions ahead",
        )
        assert len(calls) >= 3
        p0_end = next(p.end for p in EventPartitions(catalog.engine).partitions() if p.name == P0)
        # the period in force (1 day) for the partitions made now, contiguous from p0's end
        assert live[0].start == p0_end and all(p.end - p.start == timedelta(days=1) for p in live if p.start)
        assert state._partitioner is not None and state._partitioner.is_alive()
        state.begin_drain()
        thread = state._partitioner
        _until(lambda: not thread.is_alive(), "the drain to stop it")
    finally:
        state.close()
        catalog.close()


def test_cli_lists_and_makes_partitions(
    clean_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli.helpers import Cli

    engine = make_engine(clean_db)
    try:
        _detach_ahead(engine)
    finally:
        engine.dispose()
    cli = Cli(clean_db, str(tmp_path / "w"), capsys)
    listed = cli.json("events", "partitions")
    assert [r["name"] for r in listed] == [P0] and listed[0]["start"] == "MINVALUE"
    # p0 covers up to the Monday after the template's migration (up to 7 days ahead): 5 periods of 2 days
    # reach at least 3 days past it whatever the weekday, so at least 2 partitions are made
    made = cli.json("events", "make-partitions", "--periods", "5", "--event-partition-days", "2")["made"]
    assert len(made) >= 2
    assert (
        cli.json("events", "make-partitions", "--periods", "5", "--event-partition-days", "2")["made"] == []
    )
    listed = cli.json("events", "partitions")
    assert [r["name"] for r in listed] == [P0, *made]
    code, out, _ = cli.run("events", "partitions")
    assert code == 0 and P0 in out and "MINVALUE" in out


def _drop_partitions_ahead(engine: Engine) -> datetime:
    """The log's partitions after the one covering now taken away (and unregistered), as if no replica
    had made any for weeks; returns where the coverage now ends."""
    with engine.begin() as conn:
        now: datetime = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        ahead = (
            conn.execute(
                text(
                    "SELECT name FROM paimon_event_partitions WHERE range_start > :now AND dropped_at IS NULL"
                ),
                {"now": now},
            )
            .scalars()
            .all()
        )
        for name in ahead:
            conn.execute(text(f"ALTER TABLE paimon_commit_events DETACH PARTITION {name}"))
            conn.execute(text(f"DROP TABLE {name}"))
        conn.execute(text("DELETE FROM paimon_event_partitions WHERE name = ANY(:n)"), {"n": list(ahead)})
    live = EventPartitions(engine).partitions()
    assert ahead and live[-1].end < now + timedelta(days=8), (ahead, live)
    return live[-1].end


def test_the_library_makes_partitions_ahead_when_it_opens_and_hourly_on_commit(
    clean_db: str, clean_engine: Engine, tmp_path: Path
) -> None:
    # A process committing through the library alone (no serve) must never run out of partitions.
    ended = _drop_partitions_ahead(clean_engine)
    catalog = paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK)
    try:
        live = EventPartitions(clean_engine).partitions()
        assert live[-1].end >= ended + timedelta(days=7)  # opening the catalog made them
        catalog.create_database("db")
        catalog.create_table("db.t", SCHEMA)

        def commit(k: int) -> None:
            table = catalog.get_table("db.t")
            builder = table.new_batch_write_builder()
            write = builder.new_write()
            write.write_arrow(pa.table({"k": pa.array([k], pa.int64())}, schema=SCHEMA))
            builder.new_commit().commit(write.prepare_commit())

        commit(1)
        ended = _drop_partitions_ahead(clean_engine)
        commit(2)  # checked within the hour: nothing made
        assert EventPartitions(clean_engine).partitions()[-1].end == ended
        catalog._partitions_checked_at -= 3601  # an hour later
        commit(3)
        assert EventPartitions(clean_engine).partitions()[-1].end >= ended + timedelta(days=7)
    finally:
        catalog.close()


def _keys(catalog: Any) -> list[int]:
    rb = catalog.get_table("db.t").new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())


def test_a_commit_with_no_partition_for_now_fails_typed_and_publishes_nothing(
    clean_db: str, clean_engine: Engine, tmp_path: Path
) -> None:
    """The log's partition for now taken away (impossible while the service and the library make them
    ahead; an operator's DETACH): a commit fails with the typed, retryable error naming it, before
    anything is published; the table stays readable and commits again once the partition is back."""
    catalog = paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK)
    try:
        catalog.create_database("db")
        catalog.create_table("db.t", SCHEMA)
        table = catalog.get_table("db.t")

        def commit(k: int) -> None:
            builder = catalog.get_table("db.t").new_batch_write_builder()
            write = builder.new_write()
            write.write_arrow(pa.table({"k": pa.array([k], pa.int64())}, schema=SCHEMA))
            builder.new_commit().commit(write.prepare_commit())

        commit(1)
        with clean_engine.begin() as conn:
            now = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        [current] = [
            p
            for p in EventPartitions(clean_engine).partitions()
            if (p.start is None or p.start <= now) and now < p.end
        ]
        with clean_engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE paimon_commit_events DETACH PARTITION {current.name}"))
        with pytest.raises(EventLogPartitionMissingError, match="no partition"):
            commit(2)
        assert table.snapshot_manager.latest_snapshot_id() == 1
        assert _keys(catalog) == [1]
        bounds = "FROM (MINVALUE)" if current.start is None else f"FROM ('{current.start.isoformat()}')"
        with clean_engine.begin() as conn:
            conn.execute(
                text(
                    f"ALTER TABLE paimon_commit_events ATTACH PARTITION {current.name} "
                    f"FOR VALUES {bounds} TO ('{current.end.isoformat()}')"
                )
            )
        commit(3)
        assert _keys(catalog) == [1, 3]
    finally:
        catalog.close()


def test_a_partition_holding_an_unsettled_commit_is_not_dropped(clean_engine: Engine) -> None:
    # Its `prepared` event carries the messages recovery finishes or aborts the commit from.
    parts = EventPartitions(clean_engine, actor="test")
    commit_id = uuid.uuid4()
    with clean_engine.begin() as conn:
        tid = _table(conn, "a", "t")
        conn.execute(
            text(
                "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type, "
                "commit_user, commit_identifier, commit_kind, messages, messages_version) VALUES "
                "(:c, :t, 'db.t', 'prepared', 'u', 1, 'APPEND', '\\x00'::bytea, 3)"
            ),
            {"c": commit_id, "t": tid},
        )
    p0 = next(p for p in parts.partitions() if p.name == P0)
    past = p0.end + timedelta(hours=1)
    parts.mark_archived(P0, catalog_key="a", snapshot_id=1, row_count=1, archived_by="archiver")
    with pytest.raises(EventPartitionInUseError, match=f"1 prepared commit.*{commit_id}.*recover"):
        parts.drop(P0, operator="op", now=past)
    assert P0 in [p.name for p in parts.partitions()]
    # settled (here: aborted by recovery, in a later partition): the partition may go
    with clean_engine.begin() as conn:
        _event(conn, tid, kind="aborted", commit_id=commit_id, at=p0.end + timedelta(minutes=1))
    parts.drop(P0, operator="op", now=past)
    assert P0 not in [p.name for p in parts.partitions()]
