"""The change feed: the commit, lock and maintenance logs read as one ordered stream that a reader can
resume from any position without losing or repeating an event.

Order and the horizon (the invariant): an event's position is (``txid``, log, event id), ``txid`` being
the id of the transaction that wrote it (migration 0010). A read returns only events whose ``txid`` is
below the *horizon*, the oldest transaction id still running when the read's snapshot was taken
(``pg_snapshot_xmin(pg_current_snapshot())``). Every transaction below the horizon has ended, so every
event at a position below it is already visible or never will be (rolled back); an event that becomes
visible later was written by a transaction at or above the horizon, so its position is after every
position a reader was given. Hence a reader that resumes after the last position it received misses
nothing and sees nothing twice, whatever order transactions commit in. (Ordering by event id alone would
skip an event whose transaction took its id early and committed late.) The price: an event is held back
while an older transaction is still running (milliseconds for the commit path's short transactions).

Lock events belong to a table through their lock id (``<catalog key>.<database>.<table>``); only this
catalog key's locks are read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, text

from paimon_meta.errors import ValidationError

#: The channel a transaction that writes events NOTIFYs (a trigger of migration 0011; no payload): a
#: reader LISTENing on it reads the log at once instead of at its next poll.
FEED_CHANNEL = "paimon_meta_feed"
#: The logs, in their order within one transaction's events.
LOGS = ("commit", "lock", "maintenance")
_RANK = {name: i for i, name in enumerate(LOGS)}


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where an event is in the feed (see the module docstring); its text form is the event's id in the
    feed and the resume token: ``<txid>.<log rank>.<event id>``."""

    txid: int
    rank: int
    event_id: int

    def token(self) -> str:
        return f"{self.txid}.{self.rank}.{self.event_id}"

    @classmethod
    def parse(cls, token: str, *, field: str = "pageToken") -> Position:
        parts = token.split(".")
        if (
            len(parts) != 3
            or not all(p.isdigit() and len(p) <= 19 for p in parts)
            or int(parts[1]) >= len(LOGS)
        ):
            raise ValidationError(f"{field}: {token!r} is not a position this feed issued", field=field)
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))


#: Before every event.
START = Position(0, 0, 0)
#: CloudEvents' ``source`` of a catalog's events (the service's catalog name, or ``--catalog-key``).
SOURCE_PREFIX = "/paimon-meta/catalogs/"


@dataclass(frozen=True, slots=True)
class FeedEvent:
    """One event of the feed: ``log`` (commit, lock, maintenance), ``kind`` (its event type; for a
    maintenance run ``<operation>.<event type>``), ``subject`` (``database.table``), when, who, and
    ``data`` (the row's fields that say what happened)."""

    position: Position
    log: str
    kind: str
    subject: str
    time: datetime
    principal: str | None
    data: dict[str, Any]

    @property
    def database(self) -> str:
        return self.subject.split(".", 1)[0]

    @property
    def table(self) -> str:
        return self.subject.split(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class FeedFilter:
    """What to keep: ``subject`` one table (``db.t``), ``database``, ``kinds`` (event types, any log),
    ``principal``, a time range (``since`` inclusive, ``until`` exclusive)."""

    subject: str | None = None
    database: str | None = None
    kinds: Sequence[str] = ()
    principal: str | None = None
    since: datetime | None = None
    until: datetime | None = None


# Each log read in position order from the cursor, below the horizon; the three merged. The rank is a
# constant of each branch, so each branch's condition is an index range on (txid, event_id).
def _branch(rank: int, select: str, table: str, extra: str = "") -> str:
    return (
        f"(SELECT {rank} AS rank, e.event_id, e.txid, {select} FROM {table} e, h "  # noqa: S608 - constants
        f"WHERE e.txid < h.horizon {extra} AND (e.txid > :txid OR (e.txid = :txid AND "
        f"({rank} > :rank OR ({rank} = :rank AND e.event_id > :event_id)))) "
        "ORDER BY e.txid, e.event_id LIMIT :limit)"
    )


_COMMIT = (
    "e.table_identifier AS subject, e.event_type AS kind, e.created_at AS time, e.principal, "
    "jsonb_build_object('commitId', e.commit_id, 'snapshotId', e.snapshot_id, 'commitUser', e.commit_user, "
    "'commitIdentifier', e.commit_identifier, 'commitKind', e.commit_kind, 'attempt', e.attempt, "
    "'branch', e.branch, 'durationMs', e.duration_ms, 'tableId', e.table_id, "
    "'recordCount', e.payload->'totalRecordCount', 'deltaRecordCount', e.payload->'deltaRecordCount', "
    "'reason', e.payload->'reason') AS data"
)
_LOCK = (
    "substr(e.lock_id, length(:catalog_key) + 2) AS subject, e.event_type AS kind, e.created_at AS time, "
    "e.principal, jsonb_build_object('lockId', e.lock_id, 'owner', e.owner, "
    "'fencingToken', e.fencing_token, 'hostname', e.hostname, 'pid', e.pid, 'reason', e.reason, "
    "'operator', e.operator, 'previousOwner', e.previous_owner, 'waitMs', e.wait_ms) AS data"
)
_MAINTENANCE = (
    "e.table_identifier AS subject, e.operation || '.' || e.event_type AS kind, e.created_at AS time, "
    "e.principal, jsonb_build_object('runId', e.run_id, 'operation', e.operation, 'tableId', e.table_id, "
    "'operator', e.operator, 'dryRun', e.dry_run, 'payload', e.payload) AS data"
)
_FEED_SQL = text(
    "WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon) "  # noqa: S608 - constants
    "SELECT * FROM ("
    + _branch(0, _COMMIT, "paimon_commit_events")
    + " UNION ALL "
    + _branch(1, _LOCK, "paimon_lock_events", "AND starts_with(e.lock_id, :catalog_key || '.')")
    + " UNION ALL "
    + _branch(2, _MAINTENANCE, "paimon_maintenance_events")
    + ") f ORDER BY f.txid, f.rank, f.event_id LIMIT :limit"
)
#: Rows read per round while filling a page with events the filter and the caller's grants keep.
_BATCH = 500


def read_feed(
    engine: Engine,
    *,
    catalog_key: str,
    after: Position = START,
    limit: int = 100,
    keep: FeedFilter = FeedFilter(),
    visible: Callable[[FeedEvent], bool] | None = None,
) -> tuple[list[FeedEvent], Position]:
    """Up to ``limit`` events after ``after`` that ``keep`` keeps and ``visible(event)`` (the caller's
    grants; None: all) allows, in feed order; and the position to resume from (the last event read,
    kept or not: the events skipped are never read again)."""
    out: list[FeedEvent] = []
    cursor = after
    while len(out) < limit:
        params = {
            "txid": cursor.txid,
            "rank": cursor.rank,
            "event_id": cursor.event_id,
            "limit": _BATCH,
            "catalog_key": catalog_key,
        }
        with engine.connect() as conn:
            rows = conn.execute(_FEED_SQL, params).mappings().all()
        for row in rows:
            event = FeedEvent(
                position=Position(int(row["txid"]), int(row["rank"]), int(row["event_id"])),
                log=LOGS[int(row["rank"])],
                kind=row["kind"],
                subject=row["subject"],
                time=row["time"],
                principal=row["principal"],
                data={k: v for k, v in dict(row["data"]).items() if v is not None},
            )
            cursor = event.position
            if kept(event, keep) and (visible is None or visible(event)):
                out.append(event)
                if len(out) == limit:
                    return out, cursor
        if len(rows) < _BATCH:
            break
    return out, cursor


def feed_head(engine: Engine) -> Position:
    """A position at about now: after every event already visible or rolled back, before every event of
    a transaction still open or yet to start (``(horizon, 0, 0)``: the module docstring's rule), so a
    reader starting there misses nothing that commits from now on."""
    with engine.connect() as conn:
        horizon = int(conn.execute(_HORIZON_SQL).scalar_one())
    return Position(horizon, 0, 0)


_HORIZON_SQL = text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")


def kept(event: FeedEvent, keep: FeedFilter) -> bool:
    """Whether ``keep`` keeps ``event``."""
    return (
        (keep.subject is None or event.subject == keep.subject)
        and (keep.database is None or event.database == keep.database)
        and (not keep.kinds or event.kind in keep.kinds)
        and (keep.principal is None or event.principal == keep.principal)
        and (keep.since is None or event.time >= keep.since)
        and (keep.until is None or event.time < keep.until)
    )


def cloud_event(event: FeedEvent, catalog: str) -> dict[str, Any]:
    """``event`` as a CloudEvents 1.0 JSON object: ``id`` its position (resume after it), ``type``
    ``org.paimon.<log>.<kind>``, ``subject`` the table, ``data`` what happened with the log and the row's
    event id."""
    return {
        "specversion": "1.0",
        "id": event.position.token(),
        "source": SOURCE_PREFIX + catalog,
        "type": f"org.paimon.{event.log}.{event.kind}",
        "subject": event.subject,
        "time": event.time,
        "datacontenttype": "application/json",
        "data": {
            "log": event.log,
            "eventId": event.position.event_id,
            "principal": event.principal,
            **event.data,
        },
    }
