"""The archive's rows: every column of the event log, refused rather than cut."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from paimon_meta.archive.table import EVENT_COLUMN_NAMES, SCHEMA, to_arrow
from paimon_meta.db.models import CommitEventRecord
from paimon_meta.errors import ValidationError


def _row(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "event_id": 7,
        "txid": 99,
        "commit_id": uuid.UUID(int=5),
        "table_id": 3,
        "table_identifier": "db.t",
        "event_type": "prepared",
        "attempt": 1,
        "commit_user": "u",
        "commit_identifier": 1,
        "commit_kind": "APPEND",
        "snapshot_id": None,
        "payload": {"b": 1, "a": [True, None]},
        "messages": memoryview(b"\x00\x01"),
        "messages_version": 14,
        "created_at": datetime(2026, 11, 29, 12, 0, tzinfo=timezone(timedelta(hours=2))),
        "duration_ms": 1.5,
        "principal": None,
        "timeline": 0,
        "branch": "main",
    }
    row.update(changes)
    return row


def test_the_archive_has_every_column_of_the_event_log() -> None:
    assert set(EVENT_COLUMN_NAMES) == {c.name for c in CommitEventRecord.__table__.columns}
    assert SCHEMA.names == [*EVENT_COLUMN_NAMES, "archive_partition"]


def test_rows_convert_to_utc_json_text_and_bytes() -> None:
    (out,) = to_arrow([_row()], "p1").to_pylist()
    assert out["created_at"] == datetime(2026, 11, 29, 10, 0)  # UTC, no zone
    assert out["payload"] == '{"a":[true,null],"b":1}'
    assert out["messages"] == b"\x00\x01" and out["commit_id"] == str(uuid.UUID(int=5))
    assert out["archive_partition"] == "p1"


def test_a_row_with_a_column_the_archive_lacks_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        to_arrow([_row(catalog_key="x")], "p1")
    row = _row()
    del row["branch"]
    with pytest.raises(ValidationError, match="missing"):
        to_arrow([row], "p1")
    with pytest.raises(ValidationError, match="time zone"):
        to_arrow([_row(created_at=datetime(2026, 1, 1))], "p1")
    assert to_arrow([_row(created_at=datetime(2026, 1, 1, tzinfo=UTC))], "p").num_rows == 1
