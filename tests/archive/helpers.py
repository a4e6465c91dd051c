"""Seeding a commit log through the commit path, reading the audit views and the archive back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine, text

import paimon_meta
from paimon_meta.archive.table import IDENTIFIER
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import CommitConflictError
from paimon_meta.metastore.catalogs import EVENTS_RETENTION, Catalogs
from paimon_meta.metastore.events import CommitRef, ConflictChecked, EventLog, Failed, Prepared, Retried
from paimon_meta.model.snapshot import CommitKind

SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
FAST_LOCK = {"lock.lease-seconds": "5", "lock.acquire-timeout-seconds": "30"}
VIEWS = {
    "paimon_commit_history": "commit_id",
    "paimon_commit_conflicts": "event_id",
    "paimon_commit_retries": "event_id",
}


def make_catalog(
    url: str, warehouse: str, name: str, *, retention: str | None = None, key: str | None = None
) -> MetastoreCatalog:
    """A catalog row of the metastore (with ``retention``) and a connection to it."""
    from paimon_meta.catalog.metastore import connect_catalog
    from paimon_meta.db.engine import make_engine

    engine = make_engine(url)
    try:
        options = {} if retention is None else {EVENTS_RETENTION: retention}
        Catalogs(engine).create(name, warehouse, catalog_key=key, options=options)
    finally:
        engine.dispose()
    return connect_catalog(url, None, FAST_LOCK, migrate=False, catalog=name)


def db_now(engine: Engine) -> datetime:
    with engine.connect() as c:
        value: datetime = c.execute(text("SELECT clock_timestamp()")).scalar_one()
    return value


def seed(catalog: MetastoreCatalog, identifier: str, start: int) -> None:
    """Commits through the commit path: two appends, a commit refused by the conflict check (the same
    files added twice), and a commit that retried (a lost race is not cheap to cause: its events are
    appended through the event log's API, as the guard writes them, then settled as failed)."""
    if not catalog.registry.database_exists(identifier.split(".", maxsplit=1)[0]):
        catalog.create_database(identifier.split(".", maxsplit=1)[0])
    try:
        table = catalog.get_table(identifier)
    except Exception:
        table = catalog.create_table(identifier, SCHEMA, options={"bucket": "1", "bucket-key": "k"})
    for n in range(2):
        builder = table.new_batch_write_builder()
        w = builder.new_write()
        ks = list(range(start + 10 * n, start + 10 * n + 5))
        w.write_arrow(pa.table({"k": pa.array(ks, pa.int32()), "v": [f"v{k}" for k in ks]}))
        builder.new_commit().commit(w.prepare_commit())
    sb = table.new_stream_write_builder().with_commit_user(f"dup-{uuid.uuid4()}")
    w = sb.new_write()
    w.write_arrow(pa.table({"k": pa.array([start], pa.int32()), "v": ["x"]}))
    messages = w.prepare_commit()
    sb.new_commit().commit(messages, 1)
    again = catalog.get_table(identifier).new_stream_write_builder().with_commit_user(f"dup2-{uuid.uuid4()}")
    with pytest.raises(CommitConflictError):
        again.new_commit().commit(messages, 1)
    ref = CommitRef.new(
        table_id=catalog.registry.get_table_row(*identifier.split(".")).table_id,
        table_identifier=identifier,
        commit_user="racer",
        commit_identifier=start,
        commit_kind=CommitKind.APPEND,
    )
    with catalog.engine.begin() as conn:
        EventLog.append(conn, Prepared(ref=ref, messages=b"m", messages_version=14, duration_ms=1.5))
        EventLog.append(conn, ConflictChecked(ref=ref, conflict=False, duration_ms=0.5))
        EventLog.append(conn, Retried(ref=ref, reason="lost the race for snapshot 9", wait_ms=12.5))
        # settled, as a real writer's commit is (a pending one keeps its partition: event_partitions.drop)
        EventLog.append(
            conn, Failed(ref=ref, reason="gave up after the lost race", error_type="CommitFailedError")
        )


def normal(value: Any) -> Any:
    """A view's value as the twins give it: UTC without a zone, numbers as floats, ids as text."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a))
    return bool(a == b)


def view_rows(engine: Engine, view: str) -> dict[Any, dict[str, Any]]:
    key = VIEWS[view]
    with engine.connect() as c:
        rows = c.execute(text(f"SELECT * FROM {view}")).mappings().all()  # noqa: S608 (a known view)
    return {normal(r[key]): {k: normal(v) for k, v in r.items()} for r in rows}


def live_events(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as c:
        rows = c.execute(text("SELECT * FROM paimon_commit_events ORDER BY event_id")).mappings().all()
    return [dict(r) for r in rows]


def archived_rows(catalog: MetastoreCatalog) -> list[dict[str, Any]]:
    table = catalog.get_table(IDENTIFIER)
    rb = table.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(data.to_pylist(), key=lambda r: int(r["event_id"]))


def assert_same_rows(
    expected: dict[Any, dict[str, Any]], got: dict[Any, dict[str, Any]], columns: Sequence[str]
) -> None:
    assert sorted(map(str, got)) == sorted(map(str, expected))
    for key, row in expected.items():
        other = got[key]
        for column in columns:
            got_value = other[column]
            assert close(normal(row[column]), normal(got_value)), (key, column, row[column], got_value)


@contextmanager
def connected(url: str, warehouse: str) -> Iterator[MetastoreCatalog]:
    catalog = paimon_meta.connect(url, warehouse, **FAST_LOCK)
    try:
        yield catalog
    finally:
        catalog.close()
