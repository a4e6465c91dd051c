"""Commit and lock metrics from the event log, in the Prometheus text format (0.0.4).

The log's counters and histograms come from its rollup (:mod:`paimon_meta.telemetry.rollup`): each scrape
first folds the events written since the last fold, then reads the rollup, so a scrape costs the events
since the last one and the series shown, not the size of the log (issue 39). The live state (lock rows,
the maintenance queue and debts) is read as it is. Every writer (Python, Java through the lock's events,
Spark, recovery) is included, and no process has to stay up to count: the rollup is in the metastore.

Every family about tables, locks or maintenance carries a ``catalog`` label (issue 35): the name of the
table's catalog (``paimon_catalogs``; the catalog key when the metastore records none; '' for a table
purged before migration 0025), so ``db.t`` of two catalogs are two series. Tables and locks have series
of their own up to ``table_series`` of each (the first met); the rest are counted in their catalog's
``table="(other)"`` / ``lock="(other)"`` series, so the scrape stays bounded on a metastore of 10^5
tables.

``paimon-meta metrics`` prints one scrape; ``paimon-meta metrics --serve PORT`` answers ``GET /metrics``
on 127.0.0.1.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import Engine, text

from paimon_meta.db.models import DEBT_PRESSURE
from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.telemetry import rollup

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Events a scrape served by ``serve`` folds at most before it answers (the background fold does the
#: rest), and how long it waits for a fold under way elsewhere.
SCRAPE_FOLD_EVENTS = 20_000
SCRAPE_FOLD_WAIT_SECONDS = 2.0


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

# The live state (lock rows, the maintenance queue and debts) is read as it is now: each is as large as
# the locks held, the jobs queued and the tables, not the log. Lock ids start with the catalog key.
_LOCK_CATALOG = "LEFT JOIN paimon_catalogs c ON c.catalog_key = split_part({e}.lock_id, '.', 1)"
_LOCK_CATALOG_NAME = "coalesce(c.name, split_part({e}.lock_id, '.', 1))"

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
# The debt gauges of the tables with series (``paimon_metric_subjects``: index probes, never every
# table's debt); and per catalog, from migration 0027's indexes, the worst table's pressure (sorted runs
# or small files, whichever is more) and the tables over the stop trigger (a loose scan of the catalogs).
_MAINTENANCE_DEBTS = text(
    "SELECT coalesce(c.name, m.catalog_key) AS catalog, m.subject AS table, "
    "coalesce((d.debt ->> 'max_sorted_runs')::float8, 0) AS runs, "
    "coalesce((d.debt ->> 'max_small_files')::float8, 0) AS small, "
    "coalesce((d.debt ->> 'snapshots')::float8, 0) AS snapshots, "
    "coalesce((d.debt ->> 'files')::float8, 0) AS files, "
    "coalesce((d.debt ->> 'buckets_over_stop_trigger')::float8, 0) AS stopped "
    "FROM paimon_metric_subjects m "
    "JOIN paimon_maintenance_debts d ON d.catalog_key = m.catalog_key AND d.table_identifier = m.subject "
    "JOIN paimon_tables t ON t.table_id = d.table_id "
    "LEFT JOIN paimon_catalogs c ON c.catalog_key = m.catalog_key WHERE m.kind = 'table' ORDER BY 1, 2"
)
# a probe per debt row (as a scalar subquery: an EXISTS may be planned as a hash of every table)
_REGISTERED = "(SELECT true FROM paimon_tables t WHERE t.table_id = d.table_id)"
_CATALOG_DEBTS = text(
    "WITH RECURSIVE k(key) AS (SELECT min(catalog_key) FROM paimon_maintenance_debts UNION ALL "  # noqa: S608 - constants
    "SELECT (SELECT min(d.catalog_key) FROM paimon_maintenance_debts d WHERE d.catalog_key > k.key) "
    "FROM k WHERE k.key IS NOT NULL) "
    "SELECT coalesce(c.name, k.key) AS catalog, "
    f"(SELECT {DEBT_PRESSURE.format(d='d.')} FROM paimon_maintenance_debts d "
    f"WHERE d.catalog_key = k.key AND {_REGISTERED} "
    f"ORDER BY {DEBT_PRESSURE.format(d='d.')} DESC, d.table_identifier DESC LIMIT 1) AS pressure, "
    "(SELECT count(*) FROM paimon_maintenance_debts d WHERE d.catalog_key = k.key "
    "AND (d.debt ->> 'buckets_over_stop_trigger')::double precision > 0 "
    f"AND {_REGISTERED}) AS stopped "
    "FROM k LEFT JOIN paimon_catalogs c ON c.catalog_key = k.key WHERE k.key IS NOT NULL ORDER BY 1"
)


def _histogram(family: MetricFamily, s: rollup.Series) -> None:
    assert s.buckets is not None
    labels = {"catalog": s.catalog, s.family.subject: s.subject}
    cumulative = 0.0
    for bound, n in zip(rollup.DURATION_BUCKETS, s.buckets, strict=False):
        cumulative += n
        family.add(cumulative, "_bucket", **labels, le=_number(bound))
    count = float(sum(s.buckets))
    family.add(count, "_bucket", **labels, le="+Inf")
    family.add(s.value, "_sum", **labels)
    family.add(count, "_count", **labels)


def collect(
    engine: Engine,
    *,
    fold_events: int | None = None,
    table_series: int = rollup.TABLE_SERIES,
    fold_wait_seconds: float = 10.0,
) -> list[MetricFamily]:
    """Fold the events written since the last fold (up to about ``fold_events``; None: all of them) into
    the rollup, then read it and the live state in one consistent read (a REPEATABLE READ transaction).
    ``table_series``: the tables (and locks) given series of their own (``telemetry.rollup``)."""
    report = rollup.fold(
        engine, max_events=fold_events, table_series=table_series, wait_seconds=fold_wait_seconds
    )
    commits = MetricFamily("paimon_meta_commits_total", "counter", "Commits by table, kind and outcome.")
    attempts = MetricFamily(
        "paimon_meta_commit_attempts_total", "counter", "Attempts (tries) of the commits concluded."
    )
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
        "Most sorted runs of any bucket of a table (primary key) as last measured (tables with series).",
    )
    debt_small = MetricFamily(
        "paimon_meta_maintenance_debt_small_files",
        "gauge",
        "Most small files of any bucket, as last measured (tables with series).",
    )
    debt_snapshots = MetricFamily(
        "paimon_meta_maintenance_debt_snapshots",
        "gauge",
        "Snapshots a table keeps, as last measured (tables with series).",
    )
    debt_files = MetricFamily(
        "paimon_meta_maintenance_debt_files",
        "gauge",
        "Live data files of a table, as last measured (tables with series).",
    )
    debt_stopped = MetricFamily(
        "paimon_meta_maintenance_debt_buckets_over_stop_trigger",
        "gauge",
        "Buckets of a primary-key table with more sorted runs than num-sorted-run.stop-trigger (where Java "
        "writers would wait for compaction), as last measured (tables with series).",
    )
    pressure = MetricFamily(
        "paimon_meta_maintenance_debt_pressure_max",
        "gauge",
        "The most sorted runs or small files in any bucket of any table of the catalog, as last measured.",
    )
    over = MetricFamily(
        "paimon_meta_maintenance_tables_over_stop_trigger",
        "gauge",
        "Tables of the catalog with a bucket over num-sorted-run.stop-trigger, as last measured.",
    )
    caught_up = MetricFamily(
        "paimon_meta_event_log_metrics_caught_up",
        "gauge",
        "1 when this scrape's fold reached the head of every log (0: the rollup is still folding a backlog, "
        "e.g. the whole log after the upgrade to migration 0027; its counters lag the log meanwhile).",
    )
    folded = MetricFamily(
        "paimon_meta_event_log_metrics_folded_events_total",
        "counter",
        "Events of each log folded into the metrics rollup.",
    )
    by_code: dict[str, MetricFamily] = {
        rollup.COMMITS.code: commits,
        rollup.ATTEMPTS.code: attempts,
        rollup.RETRIES.code: retries,
        rollup.CONFLICTS.code: conflicts,
        rollup.COMMIT_SECONDS.code: duration,
        rollup.CHECK_SECONDS.code: check,
        rollup.LOCK_EVENTS.code: lock_events,
        rollup.LOCK_WAIT_SECONDS.code: lock_wait,
        rollup.LOCK_HOLD_SECONDS.code: lock_hold,
        rollup.MAINTENANCE_RUNS.code: runs,
        rollup.MAINTENANCE_SECONDS.code: run_seconds,
    }

    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        # reads of a few rows each (the rollup, index probes): planned with the debts' row estimates, a
        # compile by JIT costs more than the reads (200 ms at 10^5 tables)
        conn.execute(text("SELECT set_config('jit', 'off', true)"))
        tables: list[tuple[str, str]] = []
        for s in rollup.read_series(conn):
            family = by_code[s.family.code]
            if s.family.histogram:
                _histogram(family, s)
                continue
            labels = {"catalog": s.catalog}
            if s.family.subject:
                labels[s.family.subject] = s.subject
            labels.update(zip(s.family.labels, s.labels, strict=True))
            family.add(s.value, **labels)
            if s.family is rollup.ATTEMPTS:
                tables.append((s.catalog, s.subject))
        open_commits = rollup.read_pending(conn)
        for key in sorted({*tables, *open_commits}):
            pending.add(open_commits.get(key, 0), catalog=key[0], table=key[1])
        state = rollup.read_state(conn)
        counts = {"java": 0, "paimon_meta": 0}
        n_stale = 0
        for r in conn.execute(_LOCKS):
            counts["java" if r.java else "paimon_meta"] += 1
            n_stale += 1 if r.lease_left < 0 else 0
            lease_left.add(r.lease_left, catalog=r.catalog, lock=r.lock_id)
        for r in conn.execute(_MAINTENANCE_JOBS):
            queue.add(r.n, catalog=r.catalog, kind=r.kind, state=r.state)
        conn.execute(ORDERED_READS)
        for r in conn.execute(_CATALOG_DEBTS):
            pressure.add(r.pressure or 0, catalog=r.catalog)
            over.add(r.stopped, catalog=r.catalog)
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
    caught_up.add(1 if report.caught_up else 0)
    for name, n in sorted(state.events.items()):
        folded.add(n, log=name)
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
        pressure,
        over,
        caught_up,
        folded,
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


def scrape(
    engine: Engine,
    *,
    fold_events: int | None = None,
    table_series: int = rollup.TABLE_SERIES,
    fold_wait_seconds: float = 10.0,
) -> str:
    """:func:`collect` + :func:`render`."""
    return render(
        collect(
            engine, fold_events=fold_events, table_series=table_series, fold_wait_seconds=fold_wait_seconds
        )
    )


# ---- a tiny HTTP endpoint --------------------------------------------------------------------------------


class MetricsServer:
    """``GET /metrics`` on ``host:port`` (port 0 picks a free one; see :attr:`port`)."""

    def __init__(
        self, engine: Engine, port: int, host: str = "127.0.0.1", *, table_series: int = rollup.TABLE_SERIES
    ) -> None:
        self.engine = engine

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404, "try /metrics")
                    return
                try:
                    body = scrape(engine, table_series=table_series).encode()
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
