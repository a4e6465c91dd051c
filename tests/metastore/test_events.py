"""The event log: typed appends, queries, and the invariants the database enforces."""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.metastore.events import (
    MESSAGES_COMPRESS_ABOVE,
    Aborted,
    CommitEventType,
    CommitRef,
    ConflictChecked,
    EventLog,
    External,
    Failed,
    Prepared,
    Recovered,
    Retried,
    SnapshotPublished,
)
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages
from tests.commit.helpers import append_msg, data_file

pytestmark = pytest.mark.postgres

_table_ids = itertools.count(1_000_000 + uuid.uuid4().int % 1_000_000)


def _ref(table_id: int | None = None, identifier: int = 7) -> CommitRef:
    tid = next(_table_ids) if table_id is None else table_id
    return CommitRef.new(
        table_id=tid,
        table_identifier=f"db.t{tid}",
        commit_user="user-1",
        commit_identifier=identifier,
        commit_kind=CommitKind.APPEND,
    )


def _prepared(ref: CommitRef, attempt: int = 1) -> Prepared:
    return Prepared(ref=ref, attempt=attempt, messages=b"\x00\x01msg", messages_version=14, duration_ms=1.5)


def test_append_and_read_back_in_order(pg_engine: Engine) -> None:
    log = EventLog(pg_engine)
    ref = _ref()
    with pg_engine.begin() as conn:
        first = log.append(conn, _prepared(ref))
        log.append(conn, ConflictChecked(ref=ref, conflict=True, base_snapshot_id=4, reason="LSM"))
        log.append(conn, Retried(ref=ref, reason="conflict", wait_ms=10.0))
        log.append(conn, ConflictChecked(ref=ref, attempt=2, conflict=False, base_snapshot_id=5))
        last = log.append(conn, SnapshotPublished(ref=ref, attempt=2, snapshot_id=6, payload={"added": 3}))
    assert last > first
    events = log.events_for_commit(ref.commit_id)
    assert [e.event_type for e in events] == [
        CommitEventType.PREPARED,
        CommitEventType.CONFLICT_CHECKED,
        CommitEventType.RETRIED,
        CommitEventType.CONFLICT_CHECKED,
        CommitEventType.SNAPSHOT_PUBLISHED,
    ]
    assert events[0].messages == b"\x00\x01msg" and events[0].messages_version == 14
    assert events[0].ref == ref
    assert events[1].payload == {"conflict": True, "base_snapshot_id": 4, "reason": "LSM"}
    assert events[4].snapshot_id == 6 and events[4].payload == {"added": 3}
    found = log.find_published(ref.table_id, "user-1", 7, CommitKind.APPEND)
    assert found is not None and found.snapshot_id == 6
    assert log.find_published(ref.table_id, "user-1", 8, CommitKind.APPEND) is None


def test_pending_commits(pg_engine: Engine) -> None:
    log = EventLog(pg_engine)
    table_id = next(_table_ids)
    open_one, published, failed, aborted, recovered = (_ref(table_id, i) for i in range(5))
    with pg_engine.begin() as conn:
        for ref in (open_one, published, failed, aborted, recovered):
            log.append(conn, _prepared(ref))
        log.append(conn, Retried(ref=open_one, reason="io", wait_ms=5.0))
        log.append(conn, _prepared(open_one, attempt=2))
        log.append(conn, SnapshotPublished(ref=published, snapshot_id=1))
        log.append(conn, Failed(ref=failed, reason="retries exhausted", error_type="CommitFailedError"))
        log.append(conn, Aborted(ref=aborted, reason="caller"))
        log.append(conn, Recovered(ref=recovered, resolution="published", snapshot_id=1))
    pending = log.pending_commits(table_id)
    assert [p.prepared.ref.commit_id for p in pending] == [open_one.commit_id]
    assert pending[0].prepared.attempt == 2  # the latest prepared event
    assert pending[0].attempts == 2
    assert pending[0].last_event_type is CommitEventType.PREPARED
    assert log.pending_commits(next(_table_ids)) == []


def test_a_snapshot_cannot_be_published_twice(pg_engine: Engine) -> None:
    log = EventLog(pg_engine)
    a = _ref()
    b = _ref(a.table_id, identifier=8)
    with pg_engine.begin() as conn:
        log.append(conn, SnapshotPublished(ref=a, snapshot_id=3))
    for event in (
        SnapshotPublished(ref=b, snapshot_id=3),
        External(ref=b, snapshot_id=3),
        SnapshotPublished(ref=a, snapshot_id=4),  # one commit publishes at most once
    ):
        with pytest.raises(IntegrityError), pg_engine.begin() as conn:
            log.append(conn, event)
    with pg_engine.begin() as conn:  # another table may use the same snapshot id
        log.append(conn, SnapshotPublished(ref=_ref(), snapshot_id=3))


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE {t} SET created_at = now()",
        "DELETE FROM {t}",
        "DELETE FROM {t} WHERE false",
        "TRUNCATE {t}",
    ],
)
@pytest.mark.parametrize("table", ["paimon_commit_events", "paimon_lock_events"])
def test_event_tables_are_append_only(pg_engine: Engine, statement: str, table: str) -> None:
    with pg_engine.begin() as conn:
        conn.execute(text("INSERT INTO paimon_lock_events (lock_id, event_type) VALUES ('x', 'acquired')"))
        EventLog.append(conn, _prepared(_ref()))
    with pytest.raises(DBAPIError, match="append-only") as info, pg_engine.begin() as conn:
        conn.execute(text(statement.format(t=table)))
    assert getattr(info.value.orig, "sqlstate", None) == "23001"


def test_check_constraints(pg_engine: Engine) -> None:
    ref = _ref()
    base = (
        "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type, commit_user,"
        " commit_identifier, commit_kind, snapshot_id, messages, messages_version) VALUES"
        " (:c, 1, 'db.t', :type, 'u', 1, :kind, :snap, :msg, :ver)"
    )
    good = {"c": ref.commit_id, "type": "retried", "kind": "APPEND", "snap": None, "msg": None, "ver": None}
    with pg_engine.begin() as conn:
        conn.execute(text(base), good)
    for bad in (
        {"type": "published"},  # not an event type
        {"kind": "append"},  # kinds are upper case, as in Snapshot JSON
        {"type": "snapshot_published"},  # without a snapshot id
        {"type": "prepared"},  # without messages
        {"msg": b"x"},  # messages without a version
        {"snap": 0},
    ):
        with pytest.raises(IntegrityError), pg_engine.begin() as conn:
            conn.execute(text(base), {**good, **bad})


def test_event_validation() -> None:
    ref = _ref()
    with pytest.raises(ValidationError):
        Retried(ref=ref, reason="x", wait_ms=1, payload={"reason": "dup"}).to_row()
    with pytest.raises(ValidationError):
        Aborted(ref=ref, reason="x", payload={"bad": object()}).to_row()
    with pytest.raises(ValidationError):
        Aborted(ref=ref, reason="x", attempt=0).to_row()
    with pytest.raises(ValidationError):
        Aborted(ref=ref, reason="x", duration_ms=-1).to_row()


def _messages(files: int) -> list[CommitMessage]:
    return [append_msg(0, 0, data_file(rows=i + 1)) for i in range(files)]


@pytest.mark.parametrize("files", [1, 40])
def test_prepared_messages_round_trip_compressed_when_large(pg_engine: Engine, files: int) -> None:
    """Bodies above MESSAGES_COMPRESS_ABOVE are stored zstd-compressed with their codec and plain size
    in the payload; small ones stay the plain Java serializer bytes. Both decode to the same messages."""
    log = EventLog(pg_engine)
    ref = _ref()
    messages = _messages(files)
    body = serialize_commit_messages(messages, CURRENT_VERSION)
    event = Prepared.of(ref=ref, messages=body, messages_version=CURRENT_VERSION, payload={"added_files": 1})
    with pg_engine.begin() as conn:
        log.append(conn, event)
    [stored] = log.events_for_commit(ref.commit_id)
    assert stored.commit_messages() == messages
    if len(body) > MESSAGES_COMPRESS_ABOVE:
        assert stored.payload == {"added_files": 1, "messages_codec": "zstd", "messages_size": len(body)}
        assert stored.messages is not None and len(stored.messages) < len(body) // 4
    else:
        assert stored.payload == {"added_files": 1} and stored.messages == body


@pytest.mark.parametrize(
    "damage",
    [
        {"messages": b"not zstd at all"},
        {"payload": {"messages_codec": "zstd", "messages_size": -1}},
        {"payload": {"messages_codec": "brotli", "messages_size": 10}},
        {"payload": {"messages_codec": "zstd", "messages_size": 10}},  # wrong size
        {"payload": {"messages_codec": "zstd", "messages_size": (1 << 31) - 1}},  # a bomb claim
    ],
)
def test_damaged_compressed_messages_are_corrupt_metadata(pg_engine: Engine, damage: dict[str, Any]) -> None:
    body = serialize_commit_messages(_messages(40), CURRENT_VERSION)
    event = Prepared.of(ref=_ref(), messages=body, messages_version=CURRENT_VERSION, payload={})
    log = EventLog(pg_engine)
    with pg_engine.begin() as conn:
        log.append(conn, event)
    [stored] = log.events_for_commit(event.ref.commit_id)
    changes: dict[str, Any] = {"payload": {**stored.payload, **damage.get("payload", {})}}
    if "messages" in damage:
        changes["messages"] = damage["messages"]
    with pytest.raises(CorruptMetadataError, match=f"prepared event of commit {event.ref.commit_id}"):
        dataclasses.replace(stored, **changes).commit_messages()
