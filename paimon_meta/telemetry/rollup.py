"""The event log's metrics folded as the log grows: a rollup in Postgres that each fold advances by the
events written since the last one (migration 0027; issue 39, ``/metrics`` flat in the size of the log).

Before, every scrape aggregated the whole commit, lock and maintenance logs (the commit-history view
grouped by commit, the lock-activity view joined each acquisition to its end): 529 s and 173 MB per scrape
at 2x10^7 events and 10^5 tables. Now:

* **Positions.** ``paimon_metric_folds`` holds, per log, the feed position (``txid``, ``event_id``) the
  rollup has folded through. A fold reads each log's events after it, in feed order, below the horizon
  (``pg_snapshot_xmin``: the change feed's rule, :mod:`paimon_meta.metastore.feed`), through the log's
  feed index. Invariant: every event below the horizon is already visible or never will be, so a fold
  that resumes after its position misses no event and folds none twice, whatever order transactions
  commit in.
* **Exactly once.** A fold's chunk is one transaction under an advisory lock: the series it adds to,
  the open commits and lock acquisitions it opens and closes, the subjects it gives a series, and the
  positions it advances commit together or not at all. Two replicas (or a scrape and the background
  folder) never fold the same chunk: the second waits for the first, then folds after its position.
* **Commits and acquisitions that span chunks.** A commit's duration runs from its first event
  (``prepared``) to its outcome, written by later transactions (so after it in feed order); a lock's hold
  from ``acquired`` to what ended it. The fold keeps what it needs of each commit prepared and not yet
  concluded (``paimon_metric_open_commits``) and each acquisition not yet ended
  (``paimon_metric_open_locks``): both as small as the commits and holds in flight, plus those a crash
  left for recovery. The ``commits_pending`` gauge is the open commits.
* **Counters count from the first fold.** A commit is counted once, at its first outcome event (a counter
  cannot take a commit back, so a second outcome event of one commit counts as another); attempts are
  those of concluded commits. The old scrape agreed with this on every log the commit path writes
  (tests/telemetry: the fold compared with the views' aggregates). Partitions the archiver drops are
  forgotten by the log, not by the counters: they stay monotonic.
* **Bounded cardinality.** A table (or lock) gets series of its own when the fold first meets it, while
  fewer than ``table_series`` tables (locks) have them; every other one is counted in its catalog's
  ``(other)`` series (no table name has no dot: a name cannot collide with it). Which tables have series
  is kept (``paimon_metric_subjects``), so a table's series never move: no counter of one series jumps
  because another table was promoted. Replicas configured with different caps converge on the largest.
* **Layout.** The rollup records the version of this fold and its histogram bounds; a fold that finds
  another layout starts the rollup again from the log (counters reset, which Prometheus handles).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, TextClause, text
from sqlalchemy.exc import OperationalError

from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.metastore.event_partitions import TABLE_CATALOG_KEY, table_catalog_joins

log = logging.getLogger(__name__)

#: Seconds; commit durations and lock waits from a few ms (uncontended) to a minute (lock timeout).
DURATION_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
#: The fold's definition: a rollup written under another one is folded again from the log.
LAYOUT = "v1:" + ",".join(repr(b) for b in DURATION_BUCKETS)
#: The series every table (lock) beyond the cap is counted in, per catalog.
OTHER = "(other)"
#: Tables (and, apart, locks) given series of their own by default.
TABLE_SERIES = 100
#: Events read per log and transaction.
CHUNK = 5000
LOGS = ("commit", "lock", "maintenance")
_FOLD_LOCK = "paimon_meta.telemetry.rollup.fold"

#: Commit event types that end a commit, and the outcome each records (the commit-history view's names).
OUTCOMES = {
    "snapshot_published": "published",
    "external": "external",
    "recovered": "recovered",
    "failed": "failed",
    "aborted": "aborted",
}
_ENDED_BY_TOKEN = frozenset({"released", "lost"})
_ENDED_BY_PREVIOUS = frozenset({"expiry_takeover", "force_released"})


@dataclass(frozen=True, slots=True)
class Family:
    """A family of the rollup: its code in ``paimon_metric_series``, the label of its subject ('' for
    none) and the names of its other labels, in order."""

    code: str
    subject: str
    labels: tuple[str, ...] = ()
    histogram: bool = False


COMMITS = Family("commits", "table", ("kind", "outcome"))
ATTEMPTS = Family("attempts", "table")
RETRIES = Family("retries", "table")
CONFLICTS = Family("conflicts", "table", ("reason",))
COMMIT_SECONDS = Family("commit_seconds", "table", histogram=True)
CHECK_SECONDS = Family("check_seconds", "table", histogram=True)
LOCK_EVENTS = Family("lock_events", "lock", ("event",))
LOCK_WAIT_SECONDS = Family("lock_wait_seconds", "lock", histogram=True)
LOCK_HOLD_SECONDS = Family("lock_hold_seconds", "lock", histogram=True)
MAINTENANCE_RUNS = Family("maintenance_runs", "", ("kind", "outcome"))
MAINTENANCE_SECONDS = Family("maintenance_seconds", "", ("kind",))
FAMILIES = {
    f.code: f
    for f in (
        COMMITS,
        ATTEMPTS,
        RETRIES,
        CONFLICTS,
        COMMIT_SECONDS,
        CHECK_SECONDS,
        LOCK_EVENTS,
        LOCK_WAIT_SECONDS,
        LOCK_HOLD_SECONDS,
        MAINTENANCE_RUNS,
        MAINTENANCE_SECONDS,
    )
}

# ---- the chunk reads: constant SQL, each log in feed order after its position, below the horizon --------

_AFTER = (
    "WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon) "
    "SELECT {columns} FROM h, {log} e "
    "WHERE (e.txid, e.event_id) > (:txid, :event_id) AND e.txid < h.horizon "
    "ORDER BY e.txid, e.event_id LIMIT :n"
)


#: What the fold's reads of the logs start with: an operator (or a test) tells them from the change feed's
#: reads in ``pg_stat_activity``.
FOLD_QUERY_TAG = "/* paimon-meta: metrics fold */ "


def _chunk_sql(log: str, columns: str, *, of_table: bool) -> TextClause:
    """The read of a chunk of ``log``; ``of_table``: with each event's table's catalog key."""
    inner = _AFTER.format(log=log, columns=columns)
    if not of_table:
        return text(FOLD_QUERY_TAG + inner)
    return text(
        f"{FOLD_QUERY_TAG}SELECT x.*, {TABLE_CATALOG_KEY} AS catalog_key FROM ({inner}) x "  # noqa: S608 - constants
        f"{table_catalog_joins('x')} ORDER BY x.txid, x.event_id"
    )


_COMMIT_CHUNK = _chunk_sql(
    "paimon_commit_events",
    "e.txid, e.event_id, e.table_id, e.table_identifier, e.commit_id, e.commit_kind, e.event_type, "
    "e.attempt, e.duration_ms, e.created_at, e.payload @> '{\"conflict\": true}' AS conflict, "
    "e.payload ->> 'reason' AS reason",
    of_table=True,
)
_LOCK_CHUNK = _chunk_sql(
    "paimon_lock_events",
    "e.txid, e.event_id, e.lock_id, split_part(e.lock_id, '.', 1) AS catalog_key, e.event_type, "
    "e.fencing_token, e.previous_fencing_token, e.wait_ms, e.created_at",
    of_table=False,
)
_MAINTENANCE_CHUNK = _chunk_sql(
    "paimon_maintenance_events",
    "e.txid, e.event_id, e.table_id, e.operation, e.event_type, e.payload ->> 'kind' AS kind, "
    "e.payload ->> 'outcome' AS outcome, (e.payload ->> 'duration_ms')::float8 AS duration_ms",
    of_table=True,
)
_CHUNKS = {"commit": _COMMIT_CHUNK, "lock": _LOCK_CHUNK, "maintenance": _MAINTENANCE_CHUNK}

_ADD = text(
    "INSERT INTO paimon_metric_series AS s (family, catalog_key, subject, labels, value, buckets) "
    "VALUES (:family, :catalog_key, :subject, CAST(:labels AS text[]), :value, "
    "CAST(:buckets AS float8[])) "
    "ON CONFLICT (family, catalog_key, subject, labels) DO UPDATE SET value = s.value + EXCLUDED.value, "
    "buckets = CASE WHEN s.buckets IS NULL THEN EXCLUDED.buckets ELSE ARRAY("
    "SELECT u.a + u.b FROM unnest(s.buckets, EXCLUDED.buckets) WITH ORDINALITY AS u(a, b, i) "
    "ORDER BY u.i) END"
)


@dataclass(slots=True)
class _Open:
    catalog_key: str
    subject: str
    kind: str
    at: datetime
    attempt: int


@dataclass(slots=True)
class _Histogram:
    counts: list[float]
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += seconds


@dataclass(slots=True)
class _Chunk:
    """What one transaction adds to the rollup."""

    subjects: dict[str, set[tuple[str, str]]]
    cap: int
    counters: dict[tuple[str, str, str, tuple[str, ...]], float] = field(default_factory=dict)
    histograms: dict[tuple[str, str, str], _Histogram] = field(default_factory=dict)
    new_subjects: list[tuple[str, str, str]] = field(default_factory=list)

    def subject(self, kind: str, catalog_key: str, name: str) -> str:
        """``name``, or :data:`OTHER` when the cap of ``kind``'s subjects is reached without it."""
        known = self.subjects.setdefault(kind, set())
        key = (catalog_key, name)
        if key in known:
            return name
        if len(known) < self.cap:
            known.add(key)
            self.new_subjects.append((kind, catalog_key, name))
            return name
        return OTHER

    def add(self, family: Family, catalog_key: str, subject: str, value: float, *labels: str) -> None:
        key = (family.code, catalog_key, subject, labels)
        self.counters[key] = self.counters.get(key, 0.0) + value

    def observe(self, family: Family, catalog_key: str, subject: str, seconds: float) -> None:
        key = (family.code, catalog_key, subject)
        h = self.histograms.get(key)
        if h is None:
            h = self.histograms[key] = _Histogram([0.0] * (len(DURATION_BUCKETS) + 1))
        h.observe(max(0.0, seconds))

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {
                "family": f,
                "catalog_key": c,
                "subject": s,
                "labels": list(labels),
                "value": v,
                "buckets": None,
            }
            for (f, c, s, labels), v in self.counters.items()
        ]
        out += [
            {"family": f, "catalog_key": c, "subject": s, "labels": [], "value": h.total, "buckets": h.counts}
            for (f, c, s), h in self.histograms.items()
        ]
        return out


@dataclass(frozen=True, slots=True)
class FoldReport:
    """``events`` folded by one :func:`fold`; ``caught_up``: it reached the horizon of every log (else it
    stopped at ``max_events`` or because another fold held the rollup for longer than it would wait)."""

    events: int
    caught_up: bool


def fold(
    engine: Engine,
    *,
    max_events: int | None = None,
    table_series: int = TABLE_SERIES,
    chunk: int = CHUNK,
    wait_seconds: float = 10.0,
) -> FoldReport:
    """Fold the events written since the last fold into the rollup, up to about ``max_events`` (None: until
    caught up), a chunk of up to ``chunk`` events per log and transaction. Waits up to ``wait_seconds``
    for a fold under way elsewhere (then folds after it)."""
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    if table_series < 0:
        raise ValueError("table_series must be at least 0")
    total = 0
    while True:
        size = chunk if max_events is None else max(1, min(chunk, max_events - total))
        try:
            folded, caught_up = _fold_chunk(engine, size, table_series, wait_seconds)
        except OperationalError as e:
            if "lock timeout" in str(e.orig) or "LockNotAvailable" in type(e.orig).__name__:
                log.info("event-log metrics: another fold holds the rollup; not folded this time")
                return FoldReport(total, False)
            raise
        total += folded
        if caught_up:
            return FoldReport(total, True)
        if max_events is not None and total >= max_events:
            return FoldReport(total, False)


def _fold_chunk(engine: Engine, size: int, cap: int, wait_seconds: float) -> tuple[int, bool]:
    with engine.begin() as conn:
        conn.execute(
            text("SELECT set_config('lock_timeout', :t, true)"),
            {"t": f"{max(1, int(wait_seconds * 1000))}ms"},
        )
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": _FOLD_LOCK})
        conn.execute(text("SELECT set_config('lock_timeout', '0', true)"))
        positions = _positions(conn)
        conn.execute(ORDERED_READS)
        subjects: dict[str, set[tuple[str, str]]] = {}
        for kind, catalog_key, subject in conn.execute(
            text("SELECT kind, catalog_key, subject FROM paimon_metric_subjects")
        ):
            subjects.setdefault(kind, set()).add((catalog_key, subject))
        work = _Chunk(subjects, cap)
        folded, caught_up = 0, True
        for name in LOGS:
            txid, event_id = positions[name]
            rows = conn.execute(_CHUNKS[name], {"txid": txid, "event_id": event_id, "n": size}).all()
            if not rows:
                continue
            folded += len(rows)
            caught_up = caught_up and len(rows) < size
            if name == "commit":
                _fold_commits(conn, work, rows)
            elif name == "lock":
                _fold_locks(conn, work, rows)
            else:
                _fold_maintenance(work, rows)
            last = rows[-1]
            conn.execute(
                text(
                    "UPDATE paimon_metric_folds SET txid = :txid, event_id = :event_id, "
                    "events = events + :n, folded_at = now() WHERE log = :log"
                ),
                {"txid": int(last.txid), "event_id": int(last.event_id), "n": len(rows), "log": name},
            )
        series = work.rows()
        if series:
            conn.execute(_ADD, series)
        if work.new_subjects:
            conn.execute(
                text(
                    "INSERT INTO paimon_metric_subjects (kind, catalog_key, subject) "
                    "VALUES (:kind, :catalog_key, :subject) ON CONFLICT DO NOTHING"
                ),
                [{"kind": k, "catalog_key": c, "subject": s} for k, c, s in work.new_subjects],
            )
        return folded, caught_up


def _positions(conn: Connection) -> dict[str, tuple[int, int]]:
    """Each log's folded position; the rollup emptied first when it was written under another layout."""
    rows = conn.execute(text("SELECT log, txid, event_id, layout FROM paimon_metric_folds")).all()
    if len(rows) == len(LOGS) and all(r.layout == LAYOUT for r in rows):
        return {r.log: (int(r.txid), int(r.event_id)) for r in rows}
    if rows:
        log.warning("event-log metrics: the rollup has another layout; folding the log again from its start")
    for table in (
        "paimon_metric_series",
        "paimon_metric_open_commits",
        "paimon_metric_open_locks",
        "paimon_metric_subjects",
        "paimon_metric_folds",
    ):
        conn.execute(text(f"DELETE FROM {table}"))  # noqa: S608 - constant names
    conn.execute(
        text("INSERT INTO paimon_metric_folds (log, layout) VALUES (:log, :layout)"),
        [{"log": name, "layout": LAYOUT} for name in LOGS],
    )
    return {name: (0, 0) for name in LOGS}


def _fold_commits(conn: Connection, work: _Chunk, rows: Sequence[Any]) -> None:
    opened: dict[uuid.UUID, _Open] = {}
    ending = {r.commit_id for r in rows if r.event_type in OUTCOMES}
    stored: dict[uuid.UUID, _Open] = {}
    if ending:
        for r in conn.execute(
            text(
                "SELECT commit_id, catalog_key, table_identifier, commit_kind, first_at, attempt "
                "FROM paimon_metric_open_commits WHERE commit_id = ANY(:ids)"
            ),
            {"ids": list(ending)},
        ):
            stored[r.commit_id] = _Open(
                r.catalog_key, r.table_identifier, r.commit_kind, r.first_at, r.attempt
            )
    closed: list[uuid.UUID] = []
    for r in rows:
        catalog_key = r.catalog_key or ""
        kind = r.event_type
        if kind == "prepared":
            work.subject("table", catalog_key, r.table_identifier)  # its pending commit's series
            opened.setdefault(
                r.commit_id,
                _Open(
                    catalog_key, r.table_identifier, r.commit_kind or "", r.created_at, int(r.attempt or 0)
                ),
            )
            continue
        subject = work.subject("table", catalog_key, r.table_identifier)
        if kind == "conflict_checked":
            if r.duration_ms is not None:
                work.observe(CHECK_SECONDS, catalog_key, subject, float(r.duration_ms) / 1000.0)
            if r.conflict:
                work.add(CONFLICTS, catalog_key, subject, 1, r.reason or "unknown")
        elif kind == "retried":
            work.add(RETRIES, catalog_key, subject, 1)
        elif kind in OUTCOMES:
            began = opened.pop(r.commit_id, None)
            if began is None and (began := stored.pop(r.commit_id, None)) is not None:
                closed.append(r.commit_id)
            commit_kind = r.commit_kind or (began.kind if began else "")
            attempts = max(int(r.attempt or 0), began.attempt if began else 0)
            work.add(COMMITS, catalog_key, subject, 1, commit_kind, OUTCOMES[kind])
            work.add(ATTEMPTS, catalog_key, subject, attempts)
            work.add(RETRIES, catalog_key, subject, 0)
            elapsed = (r.created_at - began.at).total_seconds() if began else 0.0
            work.observe(COMMIT_SECONDS, catalog_key, subject, elapsed)
    if closed:
        conn.execute(
            text("DELETE FROM paimon_metric_open_commits WHERE commit_id = ANY(:ids)"), {"ids": closed}
        )
    if opened:
        conn.execute(
            text(
                "INSERT INTO paimon_metric_open_commits "
                "(commit_id, catalog_key, table_identifier, commit_kind, first_at, attempt) "
                "VALUES (:id, :catalog_key, :subject, :kind, :at, :attempt) ON CONFLICT DO NOTHING"
            ),
            [
                {
                    "id": cid,
                    "catalog_key": o.catalog_key,
                    "subject": o.subject,
                    "kind": o.kind,
                    "at": o.at,
                    "attempt": o.attempt,
                }
                for cid, o in opened.items()
            ],
        )


def _fold_locks(conn: Connection, work: _Chunk, rows: Sequence[Any]) -> None:
    opened: dict[tuple[str, int], datetime] = {}
    ends: set[tuple[str, int]] = set()
    for r in rows:
        token = _ended(r)
        if token is not None:
            ends.add((r.lock_id, token))
    stored: dict[tuple[str, int], datetime] = {}
    if ends:
        ids, tokens = zip(*ends, strict=True)
        for r in conn.execute(
            text(
                "SELECT o.lock_id, o.fencing_token, o.acquired_at FROM paimon_metric_open_locks o "
                "JOIN unnest(CAST(:ids AS text[]), CAST(:tokens AS bigint[])) k(lock_id, token) "
                "ON o.lock_id = k.lock_id AND o.fencing_token = k.token"
            ),
            {"ids": list(ids), "tokens": list(tokens)},
        ):
            stored[(r.lock_id, int(r.fencing_token))] = r.acquired_at
    closed: list[tuple[str, int]] = []
    for r in rows:
        catalog_key = r.catalog_key or ""
        subject = work.subject("lock", catalog_key, r.lock_id)
        work.add(LOCK_EVENTS, catalog_key, subject, 1, r.event_type)
        if r.event_type == "acquired":
            if r.wait_ms is not None:
                work.observe(LOCK_WAIT_SECONDS, catalog_key, subject, float(r.wait_ms) / 1000.0)
            if r.fencing_token is not None:
                opened.setdefault((r.lock_id, int(r.fencing_token)), r.created_at)
            continue
        token = _ended(r)
        if token is None:
            continue
        key = (r.lock_id, token)
        at = opened.pop(key, None)
        if at is None and (at := stored.pop(key, None)) is not None:
            closed.append(key)
        if at is not None:
            work.observe(LOCK_HOLD_SECONDS, catalog_key, subject, (r.created_at - at).total_seconds())
    if closed:
        ids, tokens = zip(*closed, strict=True)
        conn.execute(
            text(
                "DELETE FROM paimon_metric_open_locks o USING unnest(CAST(:ids AS text[]), "
                "CAST(:tokens AS bigint[])) k(lock_id, token) "
                "WHERE o.lock_id = k.lock_id AND o.fencing_token = k.token"
            ),
            {"ids": list(ids), "tokens": list(tokens)},
        )
    if opened:
        conn.execute(
            text(
                "INSERT INTO paimon_metric_open_locks (lock_id, fencing_token, acquired_at) "
                "VALUES (:lock_id, :token, :at) ON CONFLICT DO NOTHING"
            ),
            [{"lock_id": k[0], "token": k[1], "at": at} for k, at in opened.items()],
        )


def _ended(r: Any) -> int | None:
    """The fencing token of the acquisition lock event ``r`` ends (None: it ends none)."""
    if r.event_type in _ENDED_BY_TOKEN:
        return None if r.fencing_token is None else int(r.fencing_token)
    if r.event_type in _ENDED_BY_PREVIOUS:
        return None if r.previous_fencing_token is None else int(r.previous_fencing_token)
    return None


def _fold_maintenance(work: _Chunk, rows: Sequence[Any]) -> None:
    for r in rows:
        if r.operation != "maintain" or r.event_type == "started":
            continue
        catalog_key = r.catalog_key or ""
        kind = r.kind or ""
        work.add(MAINTENANCE_RUNS, catalog_key, "", 1, kind, r.outcome or r.event_type)
        work.add(MAINTENANCE_SECONDS, catalog_key, "", float(r.duration_ms or 0.0) / 1000.0, kind)


# ---- reading the rollup ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Series:
    """One series of the rollup: its family, catalog (name, else key, else ''), subject (a table's
    ``db.t``, a lock id, :data:`OTHER`, or '' for a family with none), other label values, and value
    (a histogram's: its sum, with ``buckets`` the count per bound of :data:`DURATION_BUCKETS` and, last,
    above the largest)."""

    family: Family
    catalog: str
    subject: str
    labels: tuple[str, ...]
    value: float
    buckets: tuple[float, ...] | None


_SERIES = text(
    "SELECT s.family, coalesce(c.name, s.catalog_key) AS catalog, s.subject, s.labels, s.value, s.buckets "
    "FROM paimon_metric_series s LEFT JOIN paimon_catalogs c ON c.catalog_key = s.catalog_key "
    "ORDER BY 1, 2, 3, 4"
)
#: Commits prepared and not concluded, per table (its subject as the fold gave it: own series or OTHER).
_PENDING = text(
    "SELECT coalesce(c.name, o.catalog_key) AS catalog, "
    "CASE WHEN m.subject IS NULL THEN :other ELSE o.table_identifier END AS subject, count(*) AS n "
    "FROM paimon_metric_open_commits o "
    "LEFT JOIN paimon_metric_subjects m ON m.kind = 'table' AND m.catalog_key = o.catalog_key "
    "AND m.subject = o.table_identifier "
    "LEFT JOIN paimon_catalogs c ON c.catalog_key = o.catalog_key GROUP BY 1, 2"
)


def read_series(conn: Connection) -> list[Series]:
    """Every series of the rollup, by family, catalog, subject and labels."""
    out: list[Series] = []
    for r in conn.execute(_SERIES):
        family = FAMILIES.get(r.family)
        if family is None:
            continue  # a family of a newer fold (a rolling upgrade): not shown by this release
        out.append(
            Series(
                family,
                r.catalog,
                r.subject,
                tuple(r.labels),
                float(r.value),
                None if r.buckets is None else tuple(float(b) for b in r.buckets),
            )
        )
    return out


def read_pending(conn: Connection) -> dict[tuple[str, str], int]:
    """Commits prepared and not concluded, by (catalog, table subject)."""
    return {(r.catalog, r.subject): int(r.n) for r in conn.execute(_PENDING, {"other": OTHER})}


@dataclass(frozen=True, slots=True)
class FoldState:
    """Where the rollup is: per log, the events folded and when the last fold of it ran."""

    events: dict[str, int]
    folded_at: dict[str, datetime | None]


def read_state(conn: Connection) -> FoldState:
    rows = conn.execute(text("SELECT log, events, folded_at FROM paimon_metric_folds")).all()
    return FoldState({r.log: int(r.events) for r in rows}, {r.log: r.folded_at for r in rows})
