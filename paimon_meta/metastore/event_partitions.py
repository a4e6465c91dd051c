"""The commit log's partitions by time (migration 0024): made ahead, listed, archived, dropped.

``paimon_commit_events`` is partitioned ``BY RANGE (created_at)``: one partition per period (7 days by
default, aligned on Mondays 00:00 UTC; the first one, ``paimon_commit_events_p0``, holds everything from
before the migration). Nothing else of the metastore sees the partitions: every read and write names the
parent.

* **Made ahead** (:meth:`EventPartitions.ensure_ahead`): the service (``paimon-meta serve``) keeps
  [now, now + ``periods`` periods) covered, at start and then periodically; ``paimon-meta events
  make-partitions`` does it by hand. Partitions are contiguous: each new one starts where the last one
  ends, with the period in force when it is made (a period change applies to partitions made after it).
  There is no DEFAULT partition: with one, every later partition creation would have to scan it (and
  fail if it held a row of the new range), so an event at a time no partition covers is refused instead
  (:class:`~paimon_meta.errors.EventLogPartitionMissingError`), which covering two periods ahead makes a
  matter of the service being down for more than a period.
* **Archived** (``paimon_meta.archive``, which streams :meth:`EventPartitions.rows` of each catalog of
  :meth:`EventPartitions.catalogs_in` into the catalog's ``system.commit_log`` and then calls
  :meth:`EventPartitions.mark_archived`).
* **Dropped** (:meth:`EventPartitions.drop`), only once every catalog with events in the partition is
  archived with the partition's own row count, and only for a range wholly in the past.

Audit: every partition made, archive recorded and partition dropped is a row of ``paimon_event_partitions``
(``created_at``/``created_by``, ``dropped_at``/``dropped_by``) or ``paimon_event_archives`` (``archived_at``
/``archived_by``); those rows are never deleted.

Which catalog an event belongs to: its ``table_id``'s catalog in ``paimon_tables``, else in the recycle bin
(``paimon_dropped_tables``), else the catalog the table had when it left them (``paimon_removed_tables``,
kept by triggers since migration 0025: a purged table's events are archived into its own catalog). An
event whose table was purged before 0025, or whose catalog was dropped since, is attributed to
:data:`PURGED_CATALOG`, a key no catalog can have, so such events are never lost silently: the partition
is not dropped until they are archived (or an operator marks them so) like any catalog's.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from paimon_meta.db.models import TERMINAL_COMMIT_EVENT_TYPES
from paimon_meta.errors import (
    EventPartitionArchiveConflictError,
    EventPartitionInUseError,
    EventPartitionNotArchivedError,
    EventPartitionNotFoundError,
    ValidationError,
)

log = logging.getLogger(__name__)

LOG = "paimon_commit_events"
#: The default period, and the anchor periods are aligned on (a Monday, 00:00 UTC): migration 0024 made
#: its partitions with these.
DEFAULT_PERIOD = timedelta(days=7)
ANCHOR = datetime(2000, 1, 3, tzinfo=UTC)
#: The catalog key of events whose table is neither in the registry nor in the recycle bin (purged).
PURGED_CATALOG = "(purged)"
#: The advisory lock every partition creation takes in its transaction (two replicas making the same
#: partitions at once: the second waits, then finds them made).
_ENSURE_LOCK = "paimon_meta.event_partitions.ensure"
#: How long a partition creation waits for the log's SHARE UPDATE EXCLUSIVE lock (held by another DDL on
#: it); the service retries at its next round.
_LOCK_TIMEOUT = "10s"

#: The live partitions of the log with their bounds (MINVALUE: NULL), detaching ones included.
_LIVE = text(
    r"""
    SELECT c.relname AS name,
           CASE WHEN b[1] = 'MINVALUE' THEN NULL ELSE CAST(b[1] AS timestamptz) END AS range_start,
           CAST(b[2] AS timestamptz) AS range_end,
           i.inhdetachpending AS detaching,
           GREATEST(c.reltuples, 0)::bigint AS rows_estimate
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
     CROSS JOIN LATERAL regexp_match(
           pg_get_expr(c.relpartbound, c.oid), 'FROM \(''?([^)'']*)''?\) TO \(''?([^)'']*)''?\)') AS b
     WHERE i.inhparent = CAST(:log AS regclass)
     ORDER BY range_start NULLS FIRST
    """
)


@dataclass(frozen=True)
class EventPartition:
    """One partition of the commit log: its range [``start``, ``end``) (``start`` None: MINVALUE), the
    catalogs whose events in it were archived (catalog key -> snapshot id of the catalog's
    ``system.commit_log``), and when it was dropped (None: live)."""

    name: str
    start: datetime | None
    end: datetime
    archived: Mapping[str, int]
    dropped_at: datetime | None
    rows_estimate: int = field(default=0, compare=False)


def partition_name(start: datetime) -> str:
    """The name of the partition starting at ``start`` (its UTC date; with the time if not midnight)."""
    start = start.astimezone(UTC)
    if start.time() == datetime.min.time():
        return f"{LOG}_p{start:%Y%m%d}"
    return f"{LOG}_p{start:%Y%m%d_%H%M%S}"


def period_start(at: datetime, period: timedelta) -> datetime:
    """The start of the period (aligned on :data:`ANCHOR`) that contains ``at``."""
    return ANCHOR + ((at - ANCHOR) // period) * period


#: Prepared commits of a partition (``{partition}``) with no terminal event in any partition.
_UNSETTLED_SQL = (
    "SELECT count(*) AS n, min(p.commit_id::text) AS ex FROM {partition} p "  # noqa: S608 (our constants)
    "WHERE p.event_type = 'prepared' AND NOT EXISTS (SELECT 1 FROM paimon_commit_events t "
    "WHERE t.commit_id = p.commit_id AND t.event_type IN ("
    + ", ".join(f"'{t.value}'" for t in sorted(TERMINAL_COMMIT_EVENT_TYPES))
    + "))"
)


def is_partition_missing(error: BaseException) -> bool:
    """Whether ``error`` (a driver error, or SQLAlchemy's around one) is Postgres refusing a row of the
    commit log no partition covers (SQLSTATE 23514, ``no partition of relation ... found for row``)."""
    orig = getattr(error, "orig", None) or error
    return getattr(orig, "sqlstate", None) == "23514" and "no partition of relation" in str(orig)


def _not_found(name: str) -> EventPartitionNotFoundError:
    return EventPartitionNotFoundError(f"no partition {name!r} of the commit log", partition=name)


def _default_actor() -> str:
    return f"paimon-meta@{socket.gethostname()}:{os.getpid()}"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class EventPartitions:
    """The lifecycle of the commit log's partitions (module docstring)."""

    def __init__(
        self, engine: Engine, *, period: timedelta = DEFAULT_PERIOD, actor: str | None = None
    ) -> None:
        if period <= timedelta(0):
            raise ValidationError(f"the event partition period must be positive, not {period}", period=period)
        self._engine = engine
        self.period = period
        self._actor = actor or _default_actor()

    # -- made ahead ----------------------------------------------------------------------------------

    def ensure_ahead(self, *, now: datetime | None = None, periods: int = 2) -> list[str]:
        """Make the partitions missing for [now, now + ``periods`` periods) to be covered (``now``:
        the database's clock); returns the names made, oldest first. Idempotent; two callers at once
        serialise on an advisory lock (the second makes nothing)."""
        if periods < 1:
            raise ValidationError(f"periods must be at least 1, not {periods}", periods=periods)
        made: list[str] = []
        with self._engine.begin() as conn:
            conn.execute(text(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'"))
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": _ENSURE_LOCK})
            at = now if now is not None else conn.execute(text("SELECT clock_timestamp()")).scalar_one()
            horizon = at + periods * self.period
            live = conn.execute(_LIVE, {"log": LOG}).mappings().all()
            # Contiguous: the next partition starts where the last ends (the first ever, at the period of
            # now). Invariant: no gap below the horizon, so every time up to it lies in one partition.
            start: datetime = live[-1]["range_end"] if live else period_start(at, self.period)
            while start < horizon:
                end = start + self.period
                name = partition_name(start)
                self._create(conn, name, start, end)
                made.append(name)
                start = end
        for name in made:
            log.info("commit log partition %s made", name)
        return made

    def _create(self, conn: Connection, name: str, start: datetime, end: datetime) -> None:
        # Made standalone then attached: ATTACH takes SHARE UPDATE EXCLUSIVE on the log (commits keep
        # writing and reading it), where CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE. The
        # CHECK spares the ATTACH its scan (of an empty table anyway) and is dropped after.
        q = _quoted(name)
        lo, hi = start.isoformat(), end.isoformat()
        conn.exec_driver_sql(
            f"CREATE TABLE {q} (LIKE {LOG} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)"
        )
        conn.exec_driver_sql(
            f"ALTER TABLE {q} ADD CONSTRAINT ck_range CHECK (created_at >= '{lo}' AND created_at < '{hi}')"
        )
        conn.exec_driver_sql(f"ALTER TABLE {LOG} ATTACH PARTITION {q} FOR VALUES FROM ('{lo}') TO ('{hi}')")
        conn.exec_driver_sql(f"ALTER TABLE {q} DROP CONSTRAINT ck_range")
        # The log's append-only trigger is a statement trigger: it fires only for statements naming the
        # parent, so each partition has its own (a DELETE sent to a partition is refused too).
        conn.exec_driver_sql(
            f"CREATE TRIGGER trg_{LOG}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {q} "
            "FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()"
        )
        conn.execute(
            text(
                "INSERT INTO paimon_event_partitions (name, range_start, range_end, created_by) "
                "VALUES (:n, :s, :e, :by)"
            ),
            {"n": name, "s": start, "e": end, "by": self._actor},
        )

    # -- listed ---------------------------------------------------------------------------------------

    def partitions(self) -> list[EventPartition]:
        """The live partitions, oldest first, with the catalogs archived from each."""
        with self._engine.connect() as conn:
            live = conn.execute(_LIVE, {"log": LOG}).mappings().all()
            archived = self._archived(conn, [str(p["name"]) for p in live])
        return [
            EventPartition(
                name=str(p["name"]),
                start=p["range_start"],
                end=p["range_end"],
                archived=archived.get(str(p["name"]), {}),
                dropped_at=None,
                rows_estimate=int(p["rows_estimate"]),
            )
            for p in live
        ]

    def dropped(self) -> list[EventPartition]:
        """The partitions dropped so far (the registry's record), oldest first."""
        with self._engine.connect() as conn:
            rows = (
                conn.execute(
                    text(
                        "SELECT name, range_start, range_end, dropped_at FROM paimon_event_partitions "
                        "WHERE dropped_at IS NOT NULL ORDER BY range_end"
                    )
                )
                .mappings()
                .all()
            )
            archived = self._archived(conn, [str(r["name"]) for r in rows])
        return [
            EventPartition(
                name=str(r["name"]),
                start=r["range_start"],
                end=r["range_end"],
                archived=archived.get(str(r["name"]), {}),
                dropped_at=r["dropped_at"],
            )
            for r in rows
        ]

    @staticmethod
    def _archived(conn: Connection, names: list[str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for name, catalog, snapshot in conn.execute(
            text(
                "SELECT partition_name, catalog_key, snapshot_id FROM paimon_event_archives "
                "WHERE partition_name = ANY(:n) ORDER BY partition_name, catalog_key"
            ),
            {"n": names},
        ):
            out.setdefault(str(name), {})[str(catalog)] = int(snapshot)
        return out

    def _live(self, conn: Connection, name: str) -> Mapping[str, Any] | None:
        for p in conn.execute(_LIVE, {"log": LOG}).mappings():
            if p["name"] == name:
                return dict(p)
        return None

    def _require_live(self, conn: Connection, name: str) -> Mapping[str, Any]:
        p = self._live(conn, name)
        if p is None:
            raise EventPartitionNotFoundError(f"no live partition {name!r} of the commit log", partition=name)
        return p

    # -- read for archiving ---------------------------------------------------------------------------

    def catalogs_in(self, name: str) -> list[str]:
        """The catalog keys with events in partition ``name`` (module docstring: which catalog an event
        belongs to), sorted."""
        with self._engine.connect() as conn:
            self._require_live(conn, name)
            return [str(k) for k in conn.execute(text(self._catalogs_sql(name))).scalars()]

    @staticmethod
    def _catalogs_sql(name: str) -> str:
        return (
            f"SELECT {_CATALOG_OF} AS catalog_key FROM (SELECT DISTINCT table_id FROM {_quoted(name)}) e "  # noqa: S608
            f"{_CATALOG_JOINS} GROUP BY 1 ORDER BY 1"
        )

    def _counts(self, conn: Connection, name: str) -> dict[str, int]:
        sql = (
            f"SELECT {_CATALOG_OF} AS catalog_key, sum(e.n)::bigint FROM "  # noqa: S608
            f"(SELECT table_id, count(*) AS n FROM {_quoted(name)} GROUP BY table_id) e "
            f"{_CATALOG_JOINS} GROUP BY 1"
        )
        return {str(k): int(n) for k, n in conn.execute(text(sql))}

    def rows(
        self, name: str, *, catalog_key: str, after_event_id: int | None, limit: int
    ) -> list[Mapping[str, Any]]:
        """Every column of partition ``name``'s events of catalog ``catalog_key`` with an event id above
        ``after_event_id`` (None: from the first), in event id order, at most ``limit``."""
        if limit < 1:
            raise ValidationError(f"limit must be at least 1, not {limit}", limit=limit)
        sql = (
            f"SELECT e.* FROM {_quoted(name)} e {_CATALOG_JOINS} "  # noqa: S608
            f"WHERE {_CATALOG_OF} = :catalog AND e.event_id > :after ORDER BY e.event_id LIMIT :limit"
        )
        with self._engine.connect() as conn:
            self._require_live(conn, name)
            result = conn.execute(
                text(sql),
                {
                    "catalog": catalog_key,
                    "after": -1 if after_event_id is None else after_event_id,
                    "limit": limit,
                },
            )
            return [dict(r) for r in result.mappings()]

    # -- archived -------------------------------------------------------------------------------------

    def mark_archived(
        self, name: str, *, catalog_key: str, snapshot_id: int, row_count: int, archived_by: str
    ) -> None:
        """Record that catalog ``catalog_key``'s events of partition ``name`` (``row_count`` of them) are
        in snapshot ``snapshot_id`` of its ``system.commit_log``. Idempotent; a second, different record
        for the same partition and catalog is refused (:class:`EventPartitionArchiveConflictError`)."""
        with self._engine.begin() as conn:
            if self._live(conn, name) is None:
                dropped = conn.execute(
                    text("SELECT 1 FROM paimon_event_partitions WHERE name = :n"), {"n": name}
                ).first()
                if dropped is None:
                    raise _not_found(name)
            conn.execute(
                text(
                    "INSERT INTO paimon_event_archives "
                    "(partition_name, catalog_key, snapshot_id, row_count, archived_by) "
                    "VALUES (:n, :c, :s, :r, :by) ON CONFLICT (partition_name, catalog_key) DO NOTHING"
                ),
                {"n": name, "c": catalog_key, "s": snapshot_id, "r": row_count, "by": archived_by},
            )
            existing = conn.execute(
                text(
                    "SELECT snapshot_id, row_count FROM paimon_event_archives "
                    "WHERE partition_name = :n AND catalog_key = :c"
                ),
                {"n": name, "c": catalog_key},
            ).one()
        if (int(existing[0]), int(existing[1])) != (snapshot_id, row_count):
            raise EventPartitionArchiveConflictError(
                f"catalog {catalog_key!r}'s events of partition {name!r} were archived already, into "
                f"snapshot {existing[0]} ({existing[1]} rows), not {snapshot_id} ({row_count} rows)",
                partition=name,
                catalog=catalog_key,
                snapshot_id=int(existing[0]),
                row_count=int(existing[1]),
            )
        log.info(
            "commit log partition %s: catalog %s archived in snapshot %s", name, catalog_key, snapshot_id
        )

    # -- dropped --------------------------------------------------------------------------------------

    def drop(self, name: str, *, operator: str, now: datetime | None = None) -> None:
        """Drop partition ``name`` once every catalog with events in it is archived (with the
        partition's row count) and its range lies wholly in the past (``now``: the database's clock;
        tests pass a later one); idempotent for a dropped one.

        Invariant (the ledger): the rows of ``paimon_published_snapshots`` of the partition's range go
        with it, so the ledger is as bounded as the log. For snapshot ids below an archived range "no
        snapshot id is published twice" then rests where it always rested first: the table's snapshot
        pointer moves only by compare-and-set under the lock's fencing token, and a snapshot file is
        written only if absent (``If-None-Match: *``): a second publish of such an id fails there.
        """
        with self._engine.begin() as conn:
            registered = (
                conn.execute(
                    text(
                        "SELECT range_start, range_end, dropped_at FROM paimon_event_partitions "
                        "WHERE name = :n"
                    ),
                    {"n": name},
                )
                .mappings()
                .first()
            )
            live = self._live(conn, name)
            if live is None:
                if registered is None:
                    raise _not_found(name)
                # Dropped already (or dropped by a call that stopped before recording it): finish.
                self._finish(conn, name, registered["range_start"], registered["range_end"], operator)
                return
            end: datetime = live["range_end"]
            if not live["detaching"]:
                at = now if now is not None else conn.execute(text("SELECT clock_timestamp()")).scalar_one()
                if end > at:
                    raise EventPartitionInUseError(
                        f"partition {name!r} of the commit log holds events up to {end.isoformat()}, "
                        "not wholly in the past: it cannot be dropped",
                        partition=name,
                        end=end,
                    )
                # SHARE waits for the transactions writing into the partition: after it none can (an
                # event's created_at is its insert's clock, past the partition's end from now on).
                conn.exec_driver_sql(f"LOCK TABLE {_quoted(name)} IN SHARE MODE")
                counts = self._counts(conn, name)
                archived = {
                    str(c): int(n)
                    for c, n in conn.execute(
                        text(
                            "SELECT catalog_key, row_count FROM paimon_event_archives "
                            "WHERE partition_name = :n"
                        ),
                        {"n": name},
                    )
                }
                missing = sorted(c for c, n in counts.items() if archived.get(c) != n)
                if missing:
                    raise EventPartitionNotArchivedError(
                        f"partition {name!r} of the commit log holds events of catalogs not archived (or "
                        f"archived with another row count): {', '.join(missing)}",
                        partition=name,
                        catalogs=missing,
                    )
                # Invariant: a commit still pending (prepared, no terminal event in any partition)
                # keeps its partition: its `prepared` event carries the CommitMessages recovery needs
                # to finish or abort it. `paimon-meta recover` (or serve's background recovery) settles
                # it first.
                unsettled = conn.execute(text(_UNSETTLED_SQL.format(partition=_quoted(name)))).one()
                if unsettled.n:
                    raise EventPartitionInUseError(
                        f"partition {name!r} of the commit log holds {unsettled.n} prepared commit(s) not "
                        f"settled (e.g. {unsettled.ex}): their messages are what recovery finishes "
                        "them from; run `paimon-meta recover` first",
                        partition=name,
                        pending=int(unsettled.n),
                    )
        self._detach(name, pending=bool(live["detaching"]))
        with self._engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {_quoted(name)}")
            self._finish(conn, name, live["range_start"], end, operator)
        log.info("commit log partition %s dropped by %s", name, operator)

    def _detach(self, name: str, *, pending: bool) -> None:
        """DETACH CONCURRENTLY (outside a transaction: commits keep writing the log) when possible, plain
        DETACH otherwise; FINALIZE a concurrent detach that was interrupted."""
        q = _quoted(name)
        with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if pending:
                conn.exec_driver_sql(f"ALTER TABLE {LOG} DETACH PARTITION {q} FINALIZE")
                return
            try:
                conn.exec_driver_sql(f"ALTER TABLE {LOG} DETACH PARTITION {q} CONCURRENTLY")
            except DBAPIError as error:
                if getattr(error.orig, "sqlstate", None) not in ("0A000", "25001"):
                    raise
                conn.exec_driver_sql(f"ALTER TABLE {LOG} DETACH PARTITION {q}")

    @staticmethod
    def _finish(conn: Connection, name: str, start: datetime | None, end: datetime, operator: str) -> None:
        conn.execute(
            text(
                "DELETE FROM paimon_published_snapshots WHERE created_at < :e "
                "AND (CAST(:s AS timestamptz) IS NULL OR created_at >= :s)"
            ),
            {"s": start, "e": end},
        )
        conn.execute(
            text(
                "INSERT INTO paimon_event_partitions (name, range_start, range_end, dropped_at, dropped_by) "
                "VALUES (:n, :s, :e, now(), :by) ON CONFLICT (name) DO UPDATE "
                "SET dropped_at = now(), dropped_by = :by WHERE paimon_event_partitions.dropped_at IS NULL"
            ),
            {"n": name, "s": start, "e": end, "by": operator},
        )


def table_catalog_joins(e: str) -> str:
    """The joins giving an event's table (``e``: the alias of a relation with ``table_id``) its catalog
    key, registered (``t``), in the recycle bin (``d``) or as it was when the table left them (``r``,
    ``paimon_removed_tables``, migration 0025): :data:`TABLE_CATALOG_KEY`. Each is unique on ``table_id``,
    so the joins never multiply a row."""
    return (
        f"LEFT JOIN paimon_tables t ON t.table_id = {e}.table_id "
        f"LEFT JOIN paimon_dropped_tables d ON d.table_id = {e}.table_id "
        f"LEFT JOIN paimon_removed_tables r ON r.table_id = {e}.table_id"
    )


#: The catalog key of an event's table over :func:`table_catalog_joins` (NULL: purged before 0025).
TABLE_CATALOG_KEY = "COALESCE(t.catalog_key, d.catalog_key, r.catalog_key)"

#: An event's catalog for archiving: its table's (:data:`TABLE_CATALOG_KEY`) if that catalog still exists
#: or the table is registered or in the bin, else PURGED_CATALOG (purged before 0025, or its catalog
#: dropped since: archived into the default catalog).
_CATALOG_OF = f"COALESCE(t.catalog_key, d.catalog_key, rc.catalog_key, '{PURGED_CATALOG}')"
_CATALOG_JOINS = f"{table_catalog_joins('e')} LEFT JOIN paimon_catalogs rc ON rc.catalog_key = r.catalog_key"
