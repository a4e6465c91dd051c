"""The data-access log (migration 0004): who was handed storage credentials for which table, allowing
what, until when; and (0018) whose commit the service refused for want of a write grant. Append-only;
the credentials themselves are never written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, insert, select

from paimon_meta.db.models import AccessEventRecord, AccessEventType, AccessLevel


@dataclass(frozen=True, slots=True)
class CredentialsVended:
    """One answer of ``GET .../token``: ``payload`` holds what storage's audit log can be matched on
    (the STS role session name) and whether earlier credentials were reused (``cached``)."""

    principal: str
    table_id: int
    table_identifier: str
    level: AccessLevel
    actions: Sequence[str]
    expires_at: datetime
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredAccessEvent:
    event_id: int
    event_type: str
    principal: str
    table_identifier: str
    level: str
    actions: list[str]
    expires_at: datetime | None
    payload: dict[str, Any]
    created_at: datetime


def append_vended(engine: Engine, event: CredentialsVended) -> int:
    """Record ``event`` in its own transaction; its ``event_id``."""
    row = {
        "event_type": AccessEventType.CREDENTIALS_VENDED.value,
        "principal": event.principal,
        "table_id": event.table_id,
        "table_identifier": event.table_identifier,
        "access_level": event.level.value,
        "actions": list(event.actions),
        "expires_at": event.expires_at,
        "payload": dict(event.payload),
    }
    statement = insert(AccessEventRecord).returning(AccessEventRecord.event_id)
    with engine.begin() as conn:
        return int(conn.execute(statement, row).scalar_one())


def append_commit_refused(
    engine: Engine, *, principal: str, table_id: int, table_identifier: str, payload: Mapping[str, Any]
) -> int:
    """Record that ``principal``'s commit to the table was refused (no write grant) in its own
    transaction; its ``event_id``. ``payload``: the route and the refusal's message."""
    row = {
        "event_type": AccessEventType.COMMIT_REFUSED.value,
        "principal": principal,
        "table_id": table_id,
        "table_identifier": table_identifier,
        "access_level": AccessLevel.WRITE.value,  # what was asked for
        "actions": ["commit"],
        "expires_at": None,
        "payload": dict(payload),
    }
    statement = insert(AccessEventRecord).returning(AccessEventRecord.event_id)
    with engine.begin() as conn:
        return int(conn.execute(statement, row).scalar_one())


def access_events(
    engine: Engine,
    *,
    table_id: int | None = None,
    table_identifier: str | None = None,
    principal: str | None = None,
    limit: int = 100,
) -> list[StoredAccessEvent]:
    """The newest ``limit`` events, newest first, of one table (by id, or by its ``db.table`` name,
    which reaches a dropped table's history too) and/or one principal."""
    r = AccessEventRecord
    query = select(r.__table__).order_by(r.event_id.desc()).limit(limit)
    if table_id is not None:
        query = query.where(r.table_id == table_id)
    if table_identifier is not None:
        query = query.where(r.table_identifier == table_identifier)
    if principal is not None:
        query = query.where(r.principal == principal)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        StoredAccessEvent(
            event_id=row.event_id,
            event_type=row.event_type,
            principal=row.principal,
            table_identifier=row.table_identifier,
            level=row.access_level,
            actions=list(row.actions),
            expires_at=row.expires_at,
            payload=dict(row.payload),
            created_at=row.created_at,
        )
        for row in rows
    ]
