"""Commit and lock metrics computed from the event log, in the Prometheus text format (0.0.4).

Everything is derived on each scrape from ``paimon_commit_events`` (through the ``paimon_commit_history``
view), ``paimon_lock_events`` and ``paimon_distributed_locks``: no process has to stay up to count, and
every writer (Python, Spark, recovery) is included. Counters are totals since the log began; histograms
are computed in SQL over the whole log (fine for millions of events; a very long log would want a
time-windowed view).

Every family about tables, locks or maintenance carries a ``catalog`` label (issue 35): the name of the
table's catalog (``paimon_catalogs``; the catalog key when the metastore records none; '' for a table
purged since), so ``db.t`` of two catalogs are two series. Its values are catalogs operators created: the
label adds no cardinality beyond the ``table`` and ``lock`` labels the series already had.

``paimon-meta metrics`` prints one scrape; ``paimon-meta metrics --serve PORT`` answers ``GET /metrics``
on 127.0.0.1.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import Connection, Engine, text

from paimon_meta.metastore.event_partitions import TABLE_CATALOG_KEY, table_catalog_joins

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

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


@dataclass(frozen=True, slots=True)
class Sample:
    suffix: str  # "" or _bucket/_sum/_count
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(slots=True)
class MetricFamily:
    name: str
    kind: str  # counter | gauge | histogram
    help: str
    samples: list[Sample] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: Any) -> None:
        self.samples.append(Sample(suffix, tuple((k, str(v)) for k, v in labels.items()), float(value)))


# ---- queries (constant SQL; the only parameters are bound) ----------------------------------------------

# The catalog of an event's table (``{e}``: the alias of a relation with ``table_id``): registered, in
# its recycle bin, or the one it had when it was purged (``event_partitions.table_catalog_joins``); its
# name, else its catalog key (a metastore with no catalog recorded), else '' (purged before 0025). Lock
# ids start with the catalog key.
_TABLE_CATALOG = (
    table_catalog_joins("{e}") + f" LEFT JOIN paimon_catalogs c ON c.catalog_key = {TABLE_CATALOG_KEY}"
)
_CATALOG = f"coalesce(c.name, {TABLE_CATALOG_KEY}, '')"
_LOCK_CATALOG = "LEFT JOIN paimon_catalogs c ON c.catalog_key = split_part({e}.lock_id, '.', 1)"
_LOCK_CATALOG_NAME = "coalesce(c.name, split_part({e}.lock_id, '.', 1))"

_COMMITS = text(
    f"SELECT {_CATALOG} AS catalog, h.table_identifier AS table, coalesce(h.commit_kind, '') AS kind, "  # noqa: S608
    "h.outcome, count(*) AS n, coalesce(sum(h.attempts), 0) AS attempts, "
    "coalesce(sum(h.retries), 0) AS retries "
    f"FROM paimon_commit_history h {_TABLE_CATALOG.format(e='h')} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
)
_CONFLICTS = text(
    f"SELECT {_CATALOG} AS catalog, x.table_identifier AS table, coalesce(x.reason, 'unknown') AS reason, "  # noqa: S608
    f"count(*) AS n FROM paimon_commit_conflicts x {_TABLE_CATALOG.format(e='x')} "
    "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
_LOCK_EVENTS = text(
    f"SELECT {_LOCK_CATALOG_NAME.format(e='l')} AS catalog, l.lock_id, l.event_type, count(*) AS n "  # noqa: S608
    f"FROM paimon_lock_events l {_LOCK_CATALOG.format(e='l')} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
_LOCKS = text(
    f"SELECT {_LOCK_CATALOG_NAME.format(e='l')} AS catalog, l.lock_id, l.owner IS NULL AS java, "  # noqa: S608
    "(l.expire_time_seconds - EXTRACT(EPOCH FROM AGE(NOW(), l.acquired_at)))::float8 AS lease_left "
    f"FROM paimon_distributed_locks l {_LOCK_CATALOG.format(e='l')} ORDER BY l.lock_id"
)
_MAINTENANCE_JOBS = text(
    "SELECT coalesce(c.name, j.catalog_key) AS catalog, j.kind, j.state, count(*) AS n "
    "FROM paimon_maintenance_jobs j LEFT JOIN paimon_catalogs c ON c.catalog_key = j.catalog_key "
    "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
_MAINTENANCE_RUNS = text(
    f"SELECT {_CATALOG} AS catalog, coalesce(m.payload ->> 'kind', '') AS kind, "  # noqa: S608
    "coalesce(m.payload ->> 'outcome', m.event_type) AS outcome, "
    "count(*) AS n, coalesce(sum((m.payload ->> 'duration_ms')::float8), 0) / 1000.0 AS seconds "
    f"FROM paimon_maintenance_events m {_TABLE_CATALOG.format(e='m')} "
    "WHERE m.operation = 'maintain' AND m.event_type <> 'started' "
    "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
_MAINTENANCE_DEBTS = text(
    "SELECT coalesce(c.name, t.catalog_key) AS catalog, d.table_identifier AS table, "
    "coalesce((d.debt ->> 'max_sorted_runs')::float8, 0) AS runs, "
    "coalesce((d.debt ->> 'max_small_files')::float8, 0) AS small, "
    "coalesce((d.debt ->> 'snapshots')::float8, 0) AS snapshots, "
    "coalesce((d.debt ->> 'files')::float8, 0) AS files, "
    "coalesce((d.debt ->> 'buckets_over_stop_trigger')::float8, 0) AS stopped "
    "FROM paimon_maintenance_debts d "
    "JOIN paimon_tables t ON t.table_id = d.table_id "
    "LEFT JOIN paimon_catalogs c ON c.catalog_key = t.catalog_key ORDER BY 1, d.table_identifier"
)
# (catalog, label, seconds) rows per histogram; each is wrapped by _HISTOGRAM below.
_COMMIT_SECONDS = (
    f"SELECT {_CATALOG} AS catalog, h.table_identifier AS label, h.elapsed_ms / 1000.0 AS seconds "  # noqa: S608
    f"FROM paimon_commit_history h {_TABLE_CATALOG.format(e='h')} "
    "WHERE h.outcome <> 'pending' AND h.elapsed_ms IS NOT NULL"
)
_CHECK_SECONDS = (
    f"SELECT {_CATALOG} AS catalog, e.table_identifier AS label, e.duration_ms / 1000.0 AS seconds "  # noqa: S608
    f"FROM paimon_commit_events e {_TABLE_CATALOG.format(e='e')} "
    "WHERE e.event_type = 'conflict_checked' AND e.duration_ms IS NOT NULL"
)
_LOCK_WAIT_SECONDS = (
    f"SELECT {_LOCK_CATALOG_NAME.format(e='l')} AS catalog, l.lock_id AS label, "  # noqa: S608
    f"l.wait_ms / 1000.0 AS seconds FROM paimon_lock_events l {_LOCK_CATALOG.format(e='l')} "
    "WHERE l.event_type = 'acquired' AND l.wait_ms IS NOT NULL"
)
_LOCK_HOLD_SECONDS = (
    f"SELECT {_LOCK_CATALOG_NAME.format(e='l')} AS catalog, l.lock_id AS label, "  # noqa: S608
    f"l.held_ms / 1000.0 AS seconds FROM paimon_lock_activity l {_LOCK_CATALOG.format(e='l')} "
    "WHERE l.held_ms IS NOT NULL"
)
_HISTOGRAM = (
    "WITH v AS ({inner}) "
    "SELECT v.catalog, v.label, b.le, count(*) FILTER (WHERE v.seconds <= b.le) AS n, "
    "sum(v.seconds) AS total, count(*) AS cnt "
    "FROM v CROSS JOIN unnest(CAST(:buckets AS double precision[])) AS b(le) "
    "GROUP BY v.catalog, v.label, b.le ORDER BY v.catalog, v.label, b.le"
)


def _histogram(
    conn: Connection, family: MetricFamily, inner: str, label: str, buckets: Sequence[float]
) -> None:
    # ``inner`` is one of this module's constants above, never user input.
    statement = text(_HISTOGRAM.format(inner=inner))
    per_label: dict[tuple[str, str], tuple[float, int]] = {}
    for r in conn.execute(statement, {"buckets": list(buckets)}):
        family.add(int(r.n), "_bucket", catalog=r.catalog, **{label: r.label, "le": _number(float(r.le))})
        per_label[(r.catalog, r.label)] = (float(r.total or 0.0), int(r.cnt))
    for (catalog, value), (total, count) in per_label.items():
        family.add(count, "_bucket", catalog=catalog, **{label: value, "le": "+Inf"})
        family.add(total, "_sum", catalog=catalog, **{label: value})
        family.add(count, "_count", catalog=catalog, **{label: value})


def collect(engine: Engine, *, buckets: Sequence[float] = DURATION_BUCKETS) -> list[MetricFamily]:
    """One consistent read of every metric (a REPEATABLE READ transaction)."""
    commits = MetricFamily("paimon_meta_commits_total", "counter", "Commits by table, kind and outcome.")
    attempts = MetricFamily("paimon_meta_commit_attempts_total", "counter", "Commit attempts (tries).")
    retries = MetricFamily(
        "paimon_meta_commit_retries_total", "counter", "Commit attempts that were retried."
    )
    conflicts = MetricFamily(
        "paimon_meta_commit_conflicts_total", "counter", "Failed conflict checks by table and reason."
    )
    pending = MetricFamily("paimon_meta_commits_pending", "gauge", "Prepared commits without an outcome.")
    duration = MetricFamily(
        "paimon_meta_commit_duration_seconds", "histogram", "Time from prepared to outcome per commit."
    )
    check = MetricFamily(
        "paimon_meta_commit_conflict_check_seconds", "histogram", "Duration of each conflict check."
    )
    lock_events = MetricFamily(
        "paimon_meta_lock_events_total",
        "counter",
        "Lock events (acquired, released, expiry_takeover, force_released, lost) per lock.",
    )
    lock_wait = MetricFamily("paimon_meta_lock_wait_seconds", "histogram", "Time waited to acquire a lock.")
    lock_hold = MetricFamily("paimon_meta_lock_hold_seconds", "histogram", "Time a lock was held.")
    held = MetricFamily("paimon_meta_locks_held", "gauge", "Lock rows present now, by holder kind.")
    stale = MetricFamily("paimon_meta_locks_stale", "gauge", "Lock rows whose lease has expired.")
    lease_left = MetricFamily("paimon_meta_lock_lease_left_seconds", "gauge", "Lease left per held lock.")
    queue = MetricFamily(
        "paimon_meta_maintenance_jobs",
        "gauge",
        "Jobs of the maintenance queue by kind and state (queued, running, dead: the dead letter).",
    )
    runs = MetricFamily(
        "paimon_meta_maintenance_runs_total",
        "counter",
        "Maintenance runs by kind and outcome (done, nothing_due, gone, retry, dead: the last two failed).",
    )
    run_seconds = MetricFamily(
        "paimon_meta_maintenance_run_seconds_total", "counter", "Time spent in maintenance runs, by kind."
    )
    debt_runs = MetricFamily(
        "paimon_meta_maintenance_debt_sorted_runs",
        "gauge",
        "Most sorted runs of any bucket of a table (primary key) as last measured.",
    )
    debt_small = MetricFamily(
        "paimon_meta_maintenance_debt_small_files",
        "gauge",
        "Most small files of any bucket, as last measured.",
    )
    debt_snapshots = MetricFamily(
        "paimon_meta_maintenance_debt_snapshots", "gauge", "Snapshots a table keeps, as last measured."
    )
    debt_files = MetricFamily(
        "paimon_meta_maintenance_debt_files", "gauge", "Live data files of a table, as last measured."
    )
    debt_stopped = MetricFamily(
        "paimon_meta_maintenance_debt_buckets_over_stop_trigger",
        "gauge",
        "Buckets of a primary-key table with more sorted runs than num-sorted-run.stop-trigger (where Java "
        "writers would wait for compaction), as last measured.",
    )

    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        # per table of a catalog: ``db.t`` of two catalogs are two tables
        per_table_attempts: dict[tuple[str, str], float] = {}
        per_table_retries: dict[tuple[str, str], float] = {}
        per_table_pending: dict[tuple[str, str], float] = {}
        for r in conn.execute(_COMMITS):
            commits.add(r.n, catalog=r.catalog, table=r.table, kind=r.kind, outcome=r.outcome)
            key = (r.catalog, r.table)
            per_table_attempts[key] = per_table_attempts.get(key, 0) + float(r.attempts)
            per_table_retries[key] = per_table_retries.get(key, 0) + float(r.retries)
            per_table_pending.setdefault(key, 0)
            if r.outcome == "pending":
                per_table_pending[key] += float(r.n)
        for (c, t), v in per_table_attempts.items():
            attempts.add(v, catalog=c, table=t)
            retries.add(per_table_retries[(c, t)], catalog=c, table=t)
            pending.add(per_table_pending[(c, t)], catalog=c, table=t)
        for r in conn.execute(_CONFLICTS):
            conflicts.add(r.n, catalog=r.catalog, table=r.table, reason=r.reason)
        _histogram(conn, duration, _COMMIT_SECONDS, "table", buckets)
        _histogram(conn, check, _CHECK_SECONDS, "table", buckets)
        for r in conn.execute(_LOCK_EVENTS):
            lock_events.add(r.n, catalog=r.catalog, lock=r.lock_id, event=r.event_type)
        _histogram(conn, lock_wait, _LOCK_WAIT_SECONDS, "lock", buckets)
        _histogram(conn, lock_hold, _LOCK_HOLD_SECONDS, "lock", buckets)
        counts = {"java": 0, "paimon_meta": 0}
        n_stale = 0
        for r in conn.execute(_LOCKS):
            counts["java" if r.java else "paimon_meta"] += 1
            n_stale += 1 if r.lease_left < 0 else 0
            lease_left.add(r.lease_left, catalog=r.catalog, lock=r.lock_id)
        for r in conn.execute(_MAINTENANCE_JOBS):
            queue.add(r.n, catalog=r.catalog, kind=r.kind, state=r.state)
        per_kind_seconds: dict[tuple[str, str], float] = {}
        for r in conn.execute(_MAINTENANCE_RUNS):
            runs.add(r.n, catalog=r.catalog, kind=r.kind, outcome=r.outcome)
            key = (r.catalog, r.kind)
            per_kind_seconds[key] = per_kind_seconds.get(key, 0.0) + float(r.seconds)
        for (c, kind), seconds in per_kind_seconds.items():
            run_seconds.add(seconds, catalog=c, kind=kind)
        for r in conn.execute(_MAINTENANCE_DEBTS):
            debt_runs.add(r.runs, catalog=r.catalog, table=r.table)
            debt_small.add(r.small, catalog=r.catalog, table=r.table)
            debt_snapshots.add(r.snapshots, catalog=r.catalog, table=r.table)
            debt_files.add(r.files, catalog=r.catalog, table=r.table)
            debt_stopped.add(r.stopped, catalog=r.catalog, table=r.table)
        conn.rollback()
    for kind, n in counts.items():
        held.add(n, holder=kind)
    stale.add(n_stale)
    return [
        commits,
        attempts,
        retries,
        conflicts,
        pending,
        duration,
        check,
        lock_events,
        lock_wait,
        lock_hold,
        held,
        stale,
        lease_left,
        queue,
        runs,
        run_seconds,
        debt_runs,
        debt_small,
        debt_snapshots,
        debt_files,
        debt_stopped,
    ]


# ---- text format ------------------------------------------------------------------------------------------


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render(families: Iterable[MetricFamily]) -> str:
    """The Prometheus text exposition of ``families``."""
    lines: list[str] = []
    for f in families:
        lines.append(f"# HELP {f.name} {f.help}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for s in f.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels)
            lines.append(
                f"{f.name}{s.suffix}{{{labels}}} {_number(s.value)}"
                if labels
                else f"{f.name}{s.suffix} {_number(s.value)}"
            )
    return "\n".join(lines) + "\n"


def scrape(engine: Engine) -> str:
    """:func:`collect` + :func:`render`."""
    return render(collect(engine))


# ---- a tiny HTTP endpoint --------------------------------------------------------------------------------


class MetricsServer:
    """``GET /metrics`` on ``host:port`` (port 0 picks a free one; see :attr:`port`)."""

    def __init__(self, engine: Engine, port: int, host: str = "127.0.0.1") -> None:
        self.engine = engine

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404, "try /metrics")
                    return
                try:
                    body = scrape(engine).encode()
                except Exception as e:  # a scrape failure is reported, never fatal to the server
                    log.exception("metrics scrape failed")
                    self.send_error(500, f"scrape failed: {type(e).__name__}")
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("metrics: " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> MetricsServer:
        """Serve on a daemon thread (for tests and embedding)."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="paimon-meta-metrics", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
