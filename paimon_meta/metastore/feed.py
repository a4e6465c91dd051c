"""The change feed: the commit, lock, maintenance and governance logs read as one ordered stream that a
reader can resume from any position without losing or repeating an event.

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

Governance events (``paimon_governance_events``, migration 0022: grants, revocations, policies, role
memberships; issue 36 item 2) are the fourth log. They belong to their row's ``catalog_key``; a row naming
none (NULL: role memberships, and the CLI's changes without ``--catalog``) belongs to the service's
default catalog (``default=True`` of a read), as assignments do. Their ``subject`` is the resource the
change is about (``TABLE db.t``, ``DATABASE db``, ``CATALOG``; a membership's: the group or role), not a
table: a ``table`` or ``database`` filter keeps none of them; the kind ``governance`` keeps all of them.
Who may see one: :func:`may_see_governance` (GRANT reaching its resource, as the management routes'
listing requires; ALTER on the table also for a policy's; never because the caller is the event's target).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, TextClause, text

from paimon_meta.db.models import CommitEventType, GovernanceEventType, LockEventType
from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Resource, ResourceType
from paimon_meta.metastore.principals import Access
from paimon_meta.metastore.registry import Within

#: The channel a transaction that writes events NOTIFYs (a trigger of migration 0011; no payload): a
#: reader LISTENing on it reads the log at once instead of at its next poll.
FEED_CHANNEL = "paimon_meta_feed"
#: The logs, in their order within one transaction's events.
LOGS = ("commit", "lock", "maintenance", "governance")
#: The governance log's rank.
GOVERNANCE = LOGS.index("governance")
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
    """One event of the feed: ``log`` (commit, lock, maintenance, governance), ``kind`` (its event type;
    for a maintenance run ``<operation>.<event type>``), ``subject`` (``database.table``; a governance
    event's: its resource, ``TABLE db.t``, or the group or role of a membership), when, who, and
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
    """What to keep: ``subject`` one table (``db.t``), ``database``, ``kinds`` (event types, any log; a
    log's name, e.g. ``governance``: every event of that log), ``principal``, a time range (``since``
    inclusive, ``until`` exclusive)."""

    subject: str | None = None
    database: str | None = None
    kinds: Sequence[str] = ()
    principal: str | None = None
    since: datetime | None = None
    until: datetime | None = None


# Each log read in position order from the cursor, below the horizon; the three merged, and at most
# :scan rows of the merge read (the scan cap: what a request may cost whatever its filters keep).
#
# The cursor is a row comparison over the log's index: the rank is a constant of each branch, so
# ``(txid, rank, event_id) > (:t, :r, :e)`` is, in the branch of rank R, ``(txid, event_id) > (:t, b)``
# with ``b`` = :e (R = :r), -1 (R > :r: every event of transaction :t) or the largest bigint (R < :r:
# none of it); ``_bounds`` computes the three. A row comparison is an index range bound (the ``OR`` it
# replaces was not: each batch re-scanned the log from its start).
#
# Lanes (what each branch reads): every event of the catalog (``all``), or only the events of some
# tables (``subjects``) and databases (``databases``), each key one index range on (key, txid, event_id)
# (migration 0015), so a reader of one quiet table reads that table's events and nothing else. A read of
# every event filtered by kinds reads, per table log, one range of its kind index (kind, txid, event_id)
# (migration 0026) for each kind the log can have, and skips a log that can have none (``kinds``): a
# rare kind (``failed``) from an old position reads the events it keeps, not the scan cap's worth of
# others.
_MAX_ID = 2**63 - 1

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


_GOVERNANCE = (
    "e.subject, e.event_type AS kind, e.created_at AS time, e.principal, "
    "jsonb_build_object('eventType', e.event_type, 'resource', e.subject, 'target', e.target, "
    "'reason', e.reason, 'payload', e.payload) AS data"
)
#: A governance event's catalog: its key, or none (NULL) in the default catalog (module docstring).
_GOVERNANCE_OF_CATALOG = "(e.catalog_key = :catalog_key OR (:default_catalog AND e.catalog_key IS NULL))"


@dataclass(frozen=True, slots=True)
class _Log:
    rank: int
    table: str
    select: str
    #: The condition of each lane (``k.key``: the lane's key); each one an index's leading columns.
    every: str
    subject: str
    database: str
    #: The event's feed kind as the log's kind index has it (its leading column: migration 0026).
    kind: str = "e.event_type"

    def has_kind(self, kind: str) -> bool:
        """Whether an event of this log can have feed kind ``kind``."""
        if self.rank == 0:
            return kind in _COMMIT_KINDS
        if self.rank == 1:
            return kind in _LOCK_KINDS
        return "." in kind  # maintenance: <operation>.<event type>


#: The commit and maintenance logs name tables by id and ``db.t``, not by catalog: an event is of the
#: catalog whose table (registered, or in its recycle bin) has its id. Invariant: a feed read for one
#: catalog never returns another catalog's event (the lock log's ids start with the catalog key); the
#: events of a table purged from the recycle bin are in no catalog's feed any more.
#: Checked per event read, on the table-id keys (an EXISTS of a UNION ALL stays a per-row probe): an
#: ``IN (SELECT ...)`` of the catalog's tables was planned as a hash join that read every table of the
#: catalog and every event after the position, then sorted them (issue 39: 0.5 s a batch at 10^6
#: events and 10^4 tables), instead of reading the feed's index from the position.
_OF_CATALOG = (
    "EXISTS (SELECT 1 FROM paimon_tables t WHERE t.table_id = e.table_id AND t.catalog_key = :catalog_key"
    " UNION ALL SELECT 1 FROM paimon_dropped_tables d WHERE d.table_id = e.table_id"
    " AND d.catalog_key = :catalog_key)"
)

_COMMIT_KINDS = frozenset(CommitEventType)
_LOCK_KINDS = frozenset(LockEventType)

_LOGS = (
    _Log(
        0,
        "paimon_commit_events",
        _COMMIT,
        _OF_CATALOG,
        f"e.table_identifier = k.key AND {_OF_CATALOG}",
        f"split_part(e.table_identifier, '.', 1) = k.key AND {_OF_CATALOG}",
    ),
    _Log(
        1,
        "paimon_lock_events",
        _LOCK,
        "split_part(e.lock_id, '.', 1) = :catalog_key",
        "e.lock_id = :catalog_key || '.' || k.key",
        "split_part(e.lock_id, '.', 1) = :catalog_key AND split_part(e.lock_id, '.', 2) = k.key",
    ),
    _Log(
        2,
        "paimon_maintenance_events",
        _MAINTENANCE,
        _OF_CATALOG,
        f"e.table_identifier = k.key AND {_OF_CATALOG}",
        f"split_part(e.table_identifier, '.', 1) = k.key AND {_OF_CATALOG}",
        "(e.operation || '.' || e.event_type)",
    ),
)
#: The governance log has one lane, every event of the catalog (its index (txid, event_id)), each decided
#: by the caller's grants (:func:`may_see_governance`); its events are about grants, not tables.
_GOVERNANCE_LOG = _Log(
    GOVERNANCE, "paimon_governance_events", _GOVERNANCE, _GOVERNANCE_OF_CATALOG, "false", "false"
)


@dataclass(frozen=True, slots=True)
class Lanes:
    """What a read of the feed reads: every table event of the catalog (``every``), or only the events
    of the tables ``subjects`` (``db.t``) and of the databases ``databases``; and (``governance``) every
    governance event of the catalog; none of them: nothing."""

    every: bool = False
    subjects: tuple[str, ...] = ()
    databases: tuple[str, ...] = ()
    governance: bool = False
    #: With ``every``: the feed kinds each table log (by rank) is read for, one index range per kind on
    #: its kind index (an empty tuple: that log is not read); ``()``: every kind of every log.
    kinds: tuple[tuple[str, ...], ...] = ()

    def kinds_of(self, rank: int) -> tuple[str, ...] | None:
        """The kinds table log ``rank`` is read for under ``every`` (None: every kind)."""
        return self.kinds[rank] if self.kinds else None

    @property
    def tables(self) -> bool:
        """Whether any log of table events is read."""
        every = self.every and (not self.kinds or any(self.kinds))
        return bool(every or self.subjects or self.databases)

    @property
    def empty(self) -> bool:
        return not (self.tables or self.governance)


EVERY = Lanes(every=True, governance=True)
#: The most keys (tables and databases) read as lanes; a caller reaching more reads every event of the
#: catalog, its grants checked on each (bounded by the scan cap all the same).
MAX_LANES = 32


@dataclass(frozen=True, slots=True)
class Reach:
    """The tables a caller may read (its assignments giving ``SELECT``: on the ``CATALOG_ALL`` scope,
    on ``DATABASE_ALL`` scopes, on tables or their column ranges): the whole catalog, some databases,
    some tables (``(database, table)``); and ``governs``: whether it may see some governance event (it
    holds ``GRANT``, ``ALTER`` or ``ALL`` on something). A superset is harmless: each event is decided
    again."""

    catalog: bool
    databases: frozenset[str] = frozenset()
    tables: frozenset[tuple[str, str]] = frozenset()
    governs: bool = False

    def allows(self, database: str, table: str) -> bool:
        return self.catalog or database in self.databases or (database, table) in self.tables

    def within(self, *, max_databases: int = 256) -> Within | None:
        """What a listing of tables of this reach reads (``Registry.table_rows_page``): the databases
        and tables reached; None (the registry in order, each row checked) for the whole catalog or
        more than ``max_databases`` databases."""
        if self.catalog or len(self.databases) > max_databases:
            return None
        return Within(tuple(sorted(self.databases)), tuple(sorted(self.tables)))

    @classmethod
    def of(cls, access: Access, at: datetime | None = None) -> Reach:
        """What ``access``'s assignments active at ``at`` (now) let it read."""
        when = at or datetime.now(UTC)
        reading = [
            a.resource
            for a in access.assignments
            if a.access in (PermissionAccess.SELECT, PermissionAccess.ALL) and a.active(when)
        ]
        governing = (PermissionAccess.GRANT, PermissionAccess.ALTER, PermissionAccess.ALL)
        return cls(
            governs=any(a.access in governing and a.active(when) for a in access.assignments),
            catalog=any(r.type is ResourceType.CATALOG_ALL for r in reading),
            databases=frozenset(
                r.database for r in reading if r.type is ResourceType.DATABASE_ALL and r.database is not None
            ),
            tables=frozenset(
                (r.database, r.object)
                for r in reading
                if r.type in (ResourceType.TABLE, ResourceType.COLUMN)
                and r.database is not None
                and r.object is not None
            ),
        )


def lanes_for(keep: FeedFilter, reach: Reach | None) -> Lanes:
    """The lanes that hold every event ``keep`` keeps that ``reach`` (None: everything) allows."""
    reach = reach or Reach(catalog=True, governs=True)
    tables = _table_lanes(keep, reach) if _keeps_log(keep, "table") else Lanes()
    governance = (
        reach.governs and keep.subject is None and keep.database is None and _keeps_log(keep, "governance")
    )
    return replace(tables, governance=governance) if governance else tables


def _keeps_log(keep: FeedFilter, which: str) -> bool:
    """Whether ``keep``'s kinds may keep events of the governance log (``which`` = governance) or of the
    table logs (``table``): a governance event's kind is a governance event type or ``governance``."""
    if not keep.kinds:
        return True
    governance = set(GovernanceEventType) | {"governance"}
    if which == "governance":
        return any(k in governance for k in keep.kinds)
    return any(k not in governance for k in keep.kinds)


def _table_lanes(keep: FeedFilter, reach: Reach) -> Lanes:
    if keep.subject is not None:
        database, _, table = keep.subject.partition(".")
        inside = keep.database is None or keep.database == database
        return Lanes(subjects=(keep.subject,)) if inside and reach.allows(database, table) else Lanes()
    if keep.database is not None:
        if reach.catalog or keep.database in reach.databases:
            return Lanes(databases=(keep.database,))
        tables = sorted(f"{d}.{t}" for d, t in reach.tables if d == keep.database)
        lanes = Lanes(subjects=tuple(tables))
    elif reach.catalog:
        return Lanes(every=True, kinds=_kind_lanes(keep.kinds))
    else:
        databases = tuple(sorted(reach.databases))
        tables = sorted(f"{d}.{t}" for d, t in reach.tables if d not in reach.databases)
        lanes = Lanes(subjects=tuple(tables), databases=databases)
    if len(lanes.subjects) + len(lanes.databases) > MAX_LANES:
        return Lanes(every=True)
    return lanes


def _kind_lanes(kinds: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """The kinds each table log is read for when ``kinds`` filters a read of every event (module
    docstring of the lanes): a log named by ``kinds`` is read whole; otherwise only the kinds it can
    have, each one index range, and not at all when it can have none of them (``kind=failed`` reads the
    commit log's failed events, not every event of the three logs up to the scan cap). ``()``: no
    filter."""
    if not kinds:
        return ()
    if any(LOGS[log.rank] in kinds for log in _LOGS):
        return ()  # a whole log is wanted: every log is read whole (bounded by the scan cap), as before
    out = tuple(tuple(sorted({k for k in kinds if log.has_kind(k)})) for log in _LOGS)
    if sum(len(k) for k in out) > MAX_LANES:
        return ()  # too many branches: every event, each checked (bounded by the scan cap)
    return out


def _branch(log: _Log, lanes: Lanes) -> str:
    if log.rank == GOVERNANCE:
        lanes = Lanes(every=lanes.governance)
    rank = log.rank
    inner = (
        f"SELECT {rank} AS rank, e.event_id, e.txid, {log.select} FROM {log.table} e "  # noqa: S608 - constants
        f"WHERE {{lane}} AND (e.txid, e.event_id) > (:txid, :bound_{rank}) AND e.txid < h.horizon "
        "ORDER BY e.txid, e.event_id LIMIT :scan"
    )
    parts: list[str] = []
    kinds = lanes.kinds_of(rank) if rank != GOVERNANCE else None
    if lanes.every and kinds is not None:
        # one range of the log's kind index per kind, each row checked for its catalog; the kind a
        # parameter of its own branch, planned with its value (KIND_READS): a rare kind reads its
        # index range, a common one may read the feed index and filter (its LIMIT fills at once)
        for i in range(len(kinds)):
            by_kind = inner.format(lane=f"{log.kind} = :kind_{rank}_{i} AND {log.every}")
            parts.append(f"(SELECT x.* FROM h, LATERAL ({by_kind}) x)")  # noqa: S608 - constants
    elif lanes.every:
        parts.append(f"(SELECT x.* FROM h, LATERAL ({inner.format(lane=log.every)}) x)")  # noqa: S608
    if lanes.subjects:
        parts.append(
            "(SELECT x.* FROM h, unnest(CAST(:subjects AS text[])) k(key), "  # noqa: S608 - constants
            f"LATERAL ({inner.format(lane=log.subject)}) x)"
        )
    if lanes.databases:
        parts.append(
            "(SELECT x.* FROM h, unnest(CAST(:databases AS text[])) k(key), "  # noqa: S608 - constants
            f"LATERAL ({inner.format(lane=log.database)}) x)"
        )
    return " UNION ALL ".join(parts)


def _branches(lanes: Lanes) -> str:
    logs = [*(_LOGS if lanes.tables else ()), *((_GOVERNANCE_LOG,) if lanes.governance else ())]
    # a log no kind of the filter can come from has no branch (its lane would be empty)
    return " UNION ALL ".join(b for log in logs if (b := _branch(log, lanes)))


def _feed_sql(lanes: Lanes, keep: FeedFilter) -> TextClause:
    """The statement reading up to :scan events of ``lanes`` after the cursor: each row's position, and
    ``hit`` whether ``keep`` keeps it (its fields only then)."""
    hit = ["true"]
    if keep.subject is not None:
        hit.append("s.subject = :f_subject")
    if keep.database is not None:
        hit.append("split_part(s.subject, '.', 1) = :f_database")
    if keep.kinds:
        hit.append(
            "(s.kind = ANY(CAST(:f_kinds AS text[])) OR (CAST(:f_logs AS text[]))[s.rank + 1]"
            " = ANY(CAST(:f_kinds AS text[])))"
        )
    if keep.principal is not None:
        hit.append("s.principal = :f_principal")
    if keep.since is not None:
        hit.append("s.time >= :f_since")
    if keep.until is not None:
        hit.append("s.time < :f_until")
    condition = " AND ".join(hit)
    return text(
        "WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon), "  # noqa: S608 - constants
        "s AS (SELECT * FROM (" + _branches(lanes) + ") f ORDER BY f.txid, f.rank, f.event_id LIMIT :scan) "  # noqa: S608 - constants
        f"SELECT s.txid, s.rank, s.event_id, ({condition}) AS hit, "
        f"CASE WHEN {condition} THEN s.subject END AS subject, "
        f"CASE WHEN {condition} THEN s.kind END AS kind, "
        f"CASE WHEN {condition} THEN s.time END AS time, "
        f"CASE WHEN {condition} THEN s.principal END AS principal, "
        f"CASE WHEN {condition} THEN s.data END AS data "
        "FROM s ORDER BY s.txid, s.rank, s.event_id"
    )


#: The plan setting of a read with kind lanes: :data:`ORDERED_READS`, each execution planned with its
#: parameters' values (``plan_cache_mode``: never a generic plan of a prepared statement). A lane's kind
#: is a parameter; planned without its value, Postgres estimates every kind at the average kind's share
#: of the log and may read the log's feed index filtering by kind, every event after the position for a
#: kind that is rare or absent, instead of the kind's own index range.
KIND_READS = text(
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), "
    "set_config('plan_cache_mode', 'force_custom_plan', true)"
)


def reads_of(lanes: Lanes) -> TextClause:
    """The plan setting a read of ``lanes`` runs first in its transaction."""
    return KIND_READS if any(lanes.kinds) else ORDERED_READS


def kind_params(lanes: Lanes) -> dict[str, str]:
    """The kind lanes' parameters of :func:`_feed_sql`'s statement (``kind_<rank>_<i>``)."""
    return {
        f"kind_{rank}_{i}": kind for rank, kinds in enumerate(lanes.kinds) for i, kind in enumerate(kinds)
    }


def _bounds(after: Position) -> dict[str, int]:
    """Each branch's bound on (txid, event_id) for ``(txid, rank, event_id) > after`` (see above)."""
    return {
        f"bound_{rank}": after.event_id if rank == after.rank else (-1 if rank > after.rank else _MAX_ID)
        for rank in range(len(LOGS))
    }


#: Rows read per statement while filling a page with events the filter and the caller's grants keep.
_BATCH = 1000


@dataclass(frozen=True, slots=True)
class FeedPage:
    """What one read of the feed found: ``events`` in feed order, ``position`` to resume from (the last
    event read, kept or not: the events skipped are never read again), and ``capped`` whether the read
    stopped at its scan cap with more of the log possibly after ``position`` (the caller continues at
    once instead of waiting for new events)."""

    events: list[FeedEvent]
    position: Position
    capped: bool
    scanned: int


def scan_feed(
    engine: Engine,
    *,
    catalog_key: str,
    default: bool = False,
    after: Position = START,
    limit: int = 100,
    keep: FeedFilter = FeedFilter(),
    visible: Callable[[FeedEvent], bool] | None = None,
    reach: Reach | None = None,
    scan_rows: int | None = None,
) -> FeedPage:
    """Up to ``limit`` events after ``after`` that ``keep`` keeps and ``visible(event)`` (the caller's
    grants; None: all) allows, in feed order, reading at most ``scan_rows`` events of the log (None: no
    cap) and only those of the tables ``reach`` (the same grants, as SQL can use them; None: all) lets
    the caller read. ``default``: ``catalog_key`` is the service's default catalog (its governance
    events include those naming no catalog)."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if scan_rows is not None and scan_rows < 1:
        raise ValueError("scan_rows must be at least 1")
    lanes = lanes_for(keep, reach)
    out: list[FeedEvent] = []
    cursor, scanned = after, 0
    if lanes.empty:
        return FeedPage(out, cursor, False, 0)
    statement = _feed_sql(lanes, keep)
    filters: dict[str, Any] = {
        "f_subject": keep.subject,
        "f_database": keep.database,
        "f_kinds": list(keep.kinds),
        "f_logs": list(LOGS),
        "f_principal": keep.principal,
        "f_since": keep.since,
        "f_until": keep.until,
        "subjects": list(lanes.subjects),
        "databases": list(lanes.databases),
        **kind_params(lanes),
        "catalog_key": catalog_key,
        "default_catalog": default,
    }
    while len(out) < limit:
        batch = _BATCH if scan_rows is None else min(_BATCH, scan_rows - scanned)
        if batch <= 0:
            return FeedPage(out, cursor, True, scanned)
        params = {**filters, **_bounds(cursor), "txid": cursor.txid, "scan": batch}
        with engine.connect() as conn:
            conn.execute(reads_of(lanes))
            rows = conn.execute(statement, params).mappings().all()
        scanned += len(rows)
        for row in rows:
            position = Position(int(row["txid"]), int(row["rank"]), int(row["event_id"]))
            cursor = position
            if not row["hit"]:
                continue
            event = FeedEvent(
                position=position,
                log=LOGS[position.rank],
                kind=row["kind"],
                subject=row["subject"],
                time=row["time"],
                principal=row["principal"],
                data={k: v for k, v in dict(row["data"]).items() if v is not None},
            )
            if kept(event, keep) and (visible is None or visible(event)):
                out.append(event)
                if len(out) == limit:
                    return FeedPage(out, cursor, False, scanned)
        if len(rows) < batch:
            break
    return FeedPage(out, cursor, False, scanned)


def read_feed(
    engine: Engine,
    *,
    catalog_key: str,
    default: bool = False,
    after: Position = START,
    limit: int = 100,
    keep: FeedFilter = FeedFilter(),
    visible: Callable[[FeedEvent], bool] | None = None,
) -> tuple[list[FeedEvent], Position]:
    """Up to ``limit`` events after ``after`` that ``keep`` keeps and ``visible(event)`` (the caller's
    grants; None: all) allows, in feed order; and the position to resume from (the last event read,
    kept or not: the events skipped are never read again). :func:`scan_feed` with no scan cap."""
    page = scan_feed(
        engine,
        catalog_key=catalog_key,
        default=default,
        after=after,
        limit=limit,
        keep=keep,
        visible=visible,
    )
    return page.events, page.position


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
        and (not keep.kinds or event.kind in keep.kinds or event.log in keep.kinds)
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


#: A governance event's resource types whose resource names an object of a database.
_OBJECTS = frozenset({ResourceType.TABLE, ResourceType.COLUMN, ResourceType.VIEW, ResourceType.FUNCTION})
#: The governance events about a table's data policies (ALTER on the table also shows them).
_POLICY_EVENTS = frozenset({GovernanceEventType.POLICY_CREATED, GovernanceEventType.POLICY_DROPPED})


def governed_resource(event: FeedEvent) -> Resource | None:
    """The resource a governance event is about (a ``COLUMN`` range's: its table), from its payload's
    locators or its subject (``TYPE db.name``); None when it names none (a role's membership) or the
    subject cannot be split without guessing (a database or object name holding a dot, and no locators
    in the payload)."""
    try:
        return _resource_of(event)
    except (ValueError, ValidationError):  # not a resource this service writes: the strictest rule
        return None


def _resource_of(event: FeedEvent) -> Resource | None:
    kind, _, name = event.subject.partition(" ")
    rtype = ResourceType(kind)
    if rtype in (ResourceType.CATALOG, ResourceType.CATALOG_ALL):
        return Resource(rtype) if not name else None
    if rtype in (ResourceType.DATABASE, ResourceType.DATABASE_ALL):
        return Resource(rtype, name) if name else None
    payload = event.data.get("payload") or {}
    database, obj = payload.get("database"), payload.get("object")
    if not (isinstance(database, str) and isinstance(obj, str) and f"{database}.{obj}" == name):
        if name.count(".") != 1:
            return None
        database, obj = name.split(".")
    if rtype is ResourceType.COLUMN:
        rtype = ResourceType.TABLE
    return Resource(rtype, database, obj) if rtype in _OBJECTS else None


def may_see_governance(access: Access, event: FeedEvent, at: datetime | None = None) -> bool:
    """Whether ``access`` may see the governance event ``event`` (the rule, conservative on purpose: an
    event says who holds what and, for a policy, which rows and columns are hidden from whom):

    * about a resource (a grant, a revocation, a policy, an object's drop or rename moving assignments):
      ``GRANT`` reaching that resource (who may list its assignments through the management routes),
      for a policy of a table also ``ALTER`` on the table (who may list its policies);
    * about a membership, or a resource that cannot be told without guessing: ``GRANT`` on the whole
      catalog (``CATALOG_ALL``);
    * never because the caller is the event's target or its author: seeing one's own grant's event
      would show who granted it, why, and the rest of its payload, which the grantee may not list.
    """
    resource = governed_resource(event)
    if resource is None:
        return access.may(PermissionAccess.GRANT, Resource.catalog_all(), at=at)
    if access.may(PermissionAccess.GRANT, resource, at=at):
        return True
    return (
        event.kind in _POLICY_EVENTS
        and resource.type is ResourceType.TABLE
        and access.may(PermissionAccess.ALTER, resource, at=at)
    )
