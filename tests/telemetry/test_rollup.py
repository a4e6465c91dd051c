"""The event log's metrics rollup (issue 39): folded chunk by chunk, it says what the whole-log
aggregates over the commit-history and lock-activity views say; exactly once across concurrent folds and
transactions that commit out of order; bounded series per table; folded again under another layout."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Connection, text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import LockEventType, MaintenanceEventType, MaintenanceOperation
from paimon_meta.metastore.event_partitions import TABLE_CATALOG_KEY, table_catalog_joins
from paimon_meta.metastore.events import (
    Aborted,
    CommitEvent,
    CommitRef,
    ConflictChecked,
    EventLog,
    External,
    Failed,
    LockEvent,
    MaintenanceEvent,
    Prepared,
    Recovered,
    Retried,
    SnapshotPublished,
)
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.ops import metrics
from paimon_meta.telemetry import rollup
from tests.fixtures.horizon import wait_for_horizon

pytestmark = pytest.mark.postgres

_CATALOG = f"coalesce(c.name, {TABLE_CATALOG_KEY}, '')"
_TABLE_CATALOG = (
    table_catalog_joins("{e}") + f" LEFT JOIN paimon_catalogs c ON c.catalog_key = {TABLE_CATALOG_KEY}"
)
_LOCK_CATALOG = "LEFT JOIN paimon_catalogs c ON c.catalog_key = split_part({e}.lock_id, '.', 1)"
_LOCK_NAME = "coalesce(c.name, split_part({e}.lock_id, '.', 1))"

# The oracle: the whole log aggregated through the views, as every scrape did before the rollup.
_COMMITS = (
    f"SELECT {_CATALOG} AS catalog, h.table_identifier AS subject, coalesce(h.commit_kind, '') AS kind, "  # noqa: S608
    "h.outcome, count(*) AS n, sum(h.attempts) AS attempts, "
    "EXTRACT(EPOCH FROM sum(h.last_event_at - h.first_event_at))::float8 AS seconds "
    f"FROM paimon_commit_history h {_TABLE_CATALOG.format(e='h')} GROUP BY 1, 2, 3, 4"
)
_ELAPSED = (
    f"SELECT {_CATALOG} AS catalog, h.table_identifier AS subject, "  # noqa: S608
    "EXTRACT(EPOCH FROM h.last_event_at - h.first_event_at)::float8 AS seconds "
    f"FROM paimon_commit_history h {_TABLE_CATALOG.format(e='h')} WHERE h.outcome <> 'pending'"
)
_EVENTS = (
    f"SELECT {_CATALOG} AS catalog, e.table_identifier AS subject, e.event_type, "  # noqa: S608
    "e.payload @> '{\"conflict\": true}' AS conflict, coalesce(e.payload ->> 'reason', 'unknown') AS reason, "
    "e.duration_ms FROM paimon_commit_events e " + _TABLE_CATALOG.format(e="e")
)
_LOCKS = (
    f"SELECT {_LOCK_NAME.format(e='l')} AS catalog, l.lock_id AS subject, l.event_type, l.wait_ms "  # noqa: S608
    f"FROM paimon_lock_events l {_LOCK_CATALOG.format(e='l')}"
)
_HOLDS = (
    f"SELECT {_LOCK_NAME.format(e='l')} AS catalog, l.lock_id AS subject, l.held_ms "  # noqa: S608
    f"FROM paimon_lock_activity l {_LOCK_CATALOG.format(e='l')} WHERE l.held_ms IS NOT NULL"
)
_RUNS = (
    f"SELECT {_CATALOG} AS catalog, coalesce(m.payload ->> 'kind', '') AS kind, "  # noqa: S608
    "coalesce(m.payload ->> 'outcome', m.event_type) AS outcome, "
    "coalesce((m.payload ->> 'duration_ms')::float8, 0) / 1000.0 AS seconds "
    f"FROM paimon_maintenance_events m {_TABLE_CATALOG.format(e='m')} "
    "WHERE m.operation = 'maintain' AND m.event_type <> 'started'"
)


def _key(name: str, **labels: str) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


class _Expected:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def add(self, name: str, value: float, **labels: str) -> None:
        key = _key(name, **labels)
        self.values[key] = self.values.get(key, 0.0) + value

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        for bound in rollup.DURATION_BUCKETS:
            self.add(f"{name}_bucket", 1 if seconds <= bound else 0, **labels, le=metrics._number(bound))
        self.add(f"{name}_bucket", 1, **labels, le="+Inf")
        self.add(f"{name}_sum", seconds, **labels)
        self.add(f"{name}_count", 1, **labels)


def oracle(conn: Connection) -> dict[str, float]:
    """What the rollup must say (table series uncapped), from the whole log through the views."""
    x = _Expected()
    for r in conn.execute(text(_COMMITS)):
        if r.outcome == "pending":
            x.add("paimon_meta_commits_pending", r.n, catalog=r.catalog, table=r.subject)
            continue
        labels = {"catalog": r.catalog, "table": r.subject}
        x.add("paimon_meta_commits_total", r.n, **labels, kind=r.kind, outcome=r.outcome)
        x.add("paimon_meta_commit_attempts_total", float(r.attempts or 0), **labels)
    for r in conn.execute(text(_ELAPSED)):
        x.observe("paimon_meta_commit_duration_seconds", r.seconds, catalog=r.catalog, table=r.subject)
    for r in conn.execute(text(_EVENTS)):
        labels = {"catalog": r.catalog, "table": r.subject}
        if r.event_type == "retried":
            x.add("paimon_meta_commit_retries_total", 1, **labels)
        if r.event_type == "conflict_checked":
            if r.conflict:
                x.add("paimon_meta_commit_conflicts_total", 1, **labels, reason=r.reason)
            if r.duration_ms is not None:
                x.observe("paimon_meta_commit_conflict_check_seconds", r.duration_ms / 1000.0, **labels)
    for r in conn.execute(text(_LOCKS)):
        labels = {"catalog": r.catalog, "lock": r.subject}
        x.add("paimon_meta_lock_events_total", 1, **labels, event=r.event_type)
        if r.event_type == "acquired" and r.wait_ms is not None:
            x.observe("paimon_meta_lock_wait_seconds", r.wait_ms / 1000.0, **labels)
    for r in conn.execute(text(_HOLDS)):
        x.observe(
            "paimon_meta_lock_hold_seconds", float(r.held_ms) / 1000.0, catalog=r.catalog, lock=r.subject
        )
    for r in conn.execute(text(_RUNS)):
        x.add("paimon_meta_maintenance_runs_total", 1, catalog=r.catalog, kind=r.kind, outcome=r.outcome)
        x.add("paimon_meta_maintenance_run_seconds_total", r.seconds, catalog=r.catalog, kind=r.kind)
    return {k: v for k, v in x.values.items() if v}


_FOLDED = (
    "paimon_meta_commits_total",
    "paimon_meta_commits_pending",
    "paimon_meta_commit_attempts_total",
    "paimon_meta_commit_retries_total",
    "paimon_meta_commit_conflicts_total",
    "paimon_meta_commit_duration_seconds",
    "paimon_meta_commit_conflict_check_seconds",
    "paimon_meta_lock_events_total",
    "paimon_meta_lock_wait_seconds",
    "paimon_meta_lock_hold_seconds",
    "paimon_meta_maintenance_runs_total",
    "paimon_meta_maintenance_run_seconds_total",
)


def folded_samples(exposition: str) -> dict[str, float]:
    """The nonzero samples of the folded families in ``exposition``."""
    out: dict[str, float] = {}
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        family = name.split("{", 1)[0]
        for suffix in ("_bucket", "_sum", "_count"):
            family = family.removesuffix(suffix)
        if family in _FOLDED and float(value):
            out[name] = float(value)
    return out


def settled_scrape(catalog: MetastoreCatalog, **kwargs: Any) -> str:
    """A scrape once every event written is below the horizon (what a scrape folds)."""
    wait_for_horizon(catalog.engine)
    return metrics.scrape(catalog.engine, **kwargs)


def assert_agrees(catalog: MetastoreCatalog, exposition: str) -> None:
    with catalog.engine.connect() as conn:
        expected = oracle(conn)
    got = folded_samples(exposition)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-6), key


class _Writer:
    """A random but well-formed log: commits interleaved (each event its own transaction, as the commit
    path writes them), lock acquisitions and their ends, maintenance runs."""

    def __init__(self, catalog: MetastoreCatalog, seed: int) -> None:
        self.catalog = catalog
        self.rng = random.Random(seed)
        schema = pa.schema([pa.field("k", pa.int32(), nullable=False)])
        self.tables: list[tuple[int, str]] = []
        for name in ("db.a", "db.b", "other.c"):
            catalog.create_table(name, schema)
            self.tables.append((catalog.table_row(name).table_id, name))
        self.tables.append((987_654_321, "gone.t"))  # a table no catalog knows (purged before 0025)
        self.snapshots: dict[int, int] = {}
        self.in_flight: list[tuple[CommitRef, int]] = []
        self.holds: list[tuple[str, int]] = []
        self.token = 1_000

    def _append(self, event: CommitEvent) -> None:
        with self.catalog.engine.begin() as conn:
            EventLog.append(conn, event)

    def _lock(self, event: LockEvent) -> None:
        with self.catalog.engine.begin() as conn:
            EventLog.append_lock(conn, event)

    def _snapshot(self, table_id: int) -> int:
        self.snapshots[table_id] = self.snapshots.get(table_id, 0) + 1
        return self.snapshots[table_id]

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.25 or not self.in_flight:
            table_id, name = rng.choice(self.tables)
            kind = rng.choice([CommitKind.APPEND, CommitKind.COMPACT, CommitKind.OVERWRITE])
            ref = CommitRef.new(
                table_id=table_id,
                table_identifier=name,
                commit_user="u",
                commit_identifier=rng.randrange(1 << 30),
                commit_kind=kind,
            )
            self._append(Prepared.of(ref=ref, messages=b"", messages_version=3, payload={}))
            self.in_flight.append((ref, 1))
        elif roll < 0.55:
            i = rng.randrange(len(self.in_flight))
            ref, attempt = self.in_flight[i]
            if rng.random() < 0.5:
                conflict = rng.random() < 0.4
                self._append(
                    ConflictChecked(
                        ref=ref,
                        attempt=attempt,
                        duration_ms=rng.choice([None, rng.uniform(0.1, 90_000)]),
                        conflict=conflict,
                        reason=rng.choice(["delete_of_absent_file", None]) if conflict else None,
                    )
                )
            else:
                self._append(Retried(ref=ref, attempt=attempt, reason="snapshot moved", wait_ms=5.0))
                self.in_flight[i] = (ref, attempt + 1)
        elif roll < 0.8:
            ref, attempt = self.in_flight.pop(self.rng.randrange(len(self.in_flight)))
            end = rng.choice(["published", "published", "failed", "aborted", "recovered", "pending"])
            if end == "published":
                self._append(
                    SnapshotPublished(ref=ref, attempt=attempt, snapshot_id=self._snapshot(ref.table_id))
                )
            elif end == "failed":
                self._append(Failed(ref=ref, attempt=attempt, reason="conflict"))
            elif end == "aborted":
                self._append(Aborted(ref=ref, attempt=attempt, reason="caller"))
            elif end == "recovered":
                self._append(Recovered(ref=ref, attempt=attempt, resolution="rolled_forward"))
            # "pending": never concluded (a crashed writer recovery has not settled yet)
        elif roll < 0.85:
            table_id, name = rng.choice(self.tables)
            ref = CommitRef.new(
                table_id=table_id,
                table_identifier=name,
                commit_user="java",
                commit_identifier=rng.randrange(1 << 30),
                commit_kind=CommitKind.APPEND,
            )
            self._append(External(ref=ref, snapshot_id=self._snapshot(table_id)))
        elif roll < 0.95:
            lock_id = "jdbc." + rng.choice(["db.a", "db.b", "other.c"])
            if self.holds and rng.random() < 0.5:
                held_id, token = self.holds.pop(rng.randrange(len(self.holds)))
                how = rng.choice(list(LockEventType)[1:])
                if how in (LockEventType.RELEASED, LockEventType.LOST):
                    self._lock(LockEvent(lock_id=held_id, event_type=how, fencing_token=token, owner="w"))
                else:
                    self.token += 1
                    self._lock(
                        LockEvent(
                            lock_id=held_id,
                            event_type=how,
                            fencing_token=self.token,
                            previous_fencing_token=token,
                            operator="ops",
                            reason="stuck",
                        )
                    )
            else:
                self.token += 1
                self._lock(
                    LockEvent(
                        lock_id=lock_id,
                        event_type=LockEventType.ACQUIRED,
                        fencing_token=self.token,
                        owner="w",
                        wait_ms=rng.choice([None, rng.uniform(0, 70_000)]),
                    )
                )
                self.holds.append((lock_id, self.token))
        else:
            table_id, name = rng.choice(self.tables)
            run = uuid.uuid4()
            for step in (
                MaintenanceEventType.STARTED,
                rng.choice([MaintenanceEventType.FINISHED, MaintenanceEventType.FAILED]),
            ):
                payload: dict[str, Any] = {"kind": rng.choice(["compact", "expire"])}
                if step != MaintenanceEventType.STARTED:
                    payload |= {"outcome": rng.choice(["done", "retry"]), "duration_ms": rng.uniform(1, 5000)}
                EventLog(self.catalog.engine).append_maintenance(
                    MaintenanceEvent(
                        run_id=run,
                        table_id=table_id,
                        table_identifier=name,
                        operation=MaintenanceOperation.MAINTAIN,
                        event_type=step,
                        operator="service",
                        dry_run=False,
                        payload=payload,
                    )
                )


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"))
    try:
        yield cat
    finally:
        cat.close()


@pytest.fixture
def writer(catalog: MetastoreCatalog) -> Iterator[_Writer]:
    yield _Writer(catalog, seed=39)


def test_folded_chunk_by_chunk_the_rollup_says_what_the_whole_log_says(
    catalog: MetastoreCatalog, writer: _Writer
) -> None:
    """Commits, conflicts, retries, pending commits, lock holds and maintenance runs, folded at random
    points in chunks of 1-4 events (so commits and holds span folds): every sample equals the whole-log
    aggregate over the views, buckets, sums and counts included."""
    rng = random.Random(7)
    for _ in range(400):
        writer.step()
        if rng.random() < 0.1:
            rollup.fold(catalog.engine, chunk=rng.randint(1, 4), table_series=1000)
    exposition = settled_scrape(catalog, table_series=1000)
    assert_agrees(catalog, exposition)
    assert "paimon_meta_event_log_metrics_caught_up 1" in exposition
    # commits still open are kept, concluded ones are not
    with catalog.engine.connect() as conn:
        opened = conn.execute(text("SELECT count(*) FROM paimon_metric_open_commits")).scalar_one()
        pending = conn.execute(
            text("SELECT count(*) FROM paimon_commit_history WHERE outcome = 'pending'")
        ).scalar_one()
    assert opened == pending > 0
    # more events later: only those are read, and the rollup still agrees
    for _ in range(100):
        writer.step()
    assert_agrees(catalog, settled_scrape(catalog, table_series=1000))


def test_each_event_is_folded_once_by_concurrent_folds(catalog: MetastoreCatalog, writer: _Writer) -> None:
    """Three folders (as three replicas, or a scrape and the background fold) fold one event at a time
    while the log grows: nothing is folded twice or skipped."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def folder() -> None:
        try:
            while not stop.is_set():
                rollup.fold(catalog.engine, chunk=1, max_events=5, table_series=1000)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=folder) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(150):
            writer.step()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert_agrees(catalog, settled_scrape(catalog, table_series=1000))


def test_an_event_of_a_transaction_that_commits_late_is_not_skipped(catalog: MetastoreCatalog) -> None:
    """The horizon: an event written by a transaction that began first but commits after a later one's
    event was folded is still folded (a position by event id alone would have passed it)."""
    early = catalog.engine.connect()
    tx = early.begin()
    EventLog.append_lock(
        early, LockEvent(lock_id="jdbc.db.x", event_type=LockEventType.ACQUIRED, fencing_token=1)
    )
    with catalog.engine.begin() as conn:
        EventLog.append_lock(
            conn, LockEvent(lock_id="jdbc.db.x", event_type=LockEventType.ACQUIRED, fencing_token=2)
        )
    held_back = rollup.fold(catalog.engine)
    assert held_back.events == 0  # the later event waits behind the open transaction
    tx.commit()
    early.close()
    s = folded_samples(settled_scrape(catalog))
    assert s['paimon_meta_lock_events_total{catalog="jdbc",lock="jdbc.db.x",event="acquired"}'] == 2


def test_tables_beyond_the_cap_are_counted_in_their_catalogs_other_series(
    catalog: MetastoreCatalog, writer: _Writer
) -> None:
    """With series for one table (and one lock), the first met keeps its own; the others' counts are in
    ``(other)`` of their catalog, and every family's total over its series is the log's."""
    for _ in range(300):
        writer.step()
    capped = folded_samples(settled_scrape(catalog, table_series=1))
    with catalog.engine.connect() as conn:
        expected = oracle(conn)
        [[first_table]] = conn.execute(
            text("SELECT subject FROM paimon_metric_subjects WHERE kind = 'table'")
        ).all()
        [[first_lock]] = conn.execute(
            text("SELECT subject FROM paimon_metric_subjects WHERE kind = 'lock'")
        ).all()

    def tables(samples: dict[str, float], family: str) -> set[str]:
        return {k.split('table="', 1)[1].split('"', 1)[0] for k in samples if k.startswith(family + "{")}

    def total(samples: dict[str, float], family: str) -> float:
        return sum(v for k, v in samples.items() if k.startswith(family + "{"))

    assert tables(capped, "paimon_meta_commits_total") <= {first_table, rollup.OTHER}
    assert rollup.OTHER in tables(capped, "paimon_meta_commits_total")
    assert {k.split('lock="', 1)[1].split('"', 1)[0] for k in capped if "lock=" in k} <= {
        first_lock,
        rollup.OTHER,
    }
    for family in (
        "paimon_meta_commits_total",
        "paimon_meta_commit_attempts_total",
        "paimon_meta_commit_retries_total",
        "paimon_meta_commit_conflicts_total",
        "paimon_meta_commits_pending",
        "paimon_meta_commit_duration_seconds_count",
        "paimon_meta_lock_events_total",
        "paimon_meta_lock_hold_seconds_count",
    ):
        assert total(capped, family) == pytest.approx(total(expected, family)), family
    # the first table's own series are exactly its share of the log
    mine = {k: v for k, v in expected.items() if f'table="{first_table}"' in k}
    assert mine and all(capped[k] == pytest.approx(v) for k, v in mine.items())
    # a larger cap later gives new tables series; the ones already in (other) stay counted there
    writer.step()
    settled_scrape(catalog, table_series=1)
    with catalog.engine.connect() as conn:
        assert (
            conn.execute(
                text("SELECT count(*) FROM paimon_metric_subjects WHERE kind = 'table'")
            ).scalar_one()
            == 1
        )


def test_a_rollup_of_another_layout_is_folded_again_from_the_log(
    catalog: MetastoreCatalog, writer: _Writer
) -> None:
    for _ in range(120):
        writer.step()
    before = folded_samples(settled_scrape(catalog, table_series=1000))
    with catalog.engine.begin() as conn:
        conn.execute(text("UPDATE paimon_metric_folds SET layout = 'v0'"))
    after = folded_samples(settled_scrape(catalog, table_series=1000))
    assert after == pytest.approx(before)
    assert_agrees(catalog, settled_scrape(catalog, table_series=1000))


def test_fold_refuses_bad_settings(catalog: MetastoreCatalog) -> None:
    with pytest.raises(ValueError, match="chunk"):
        rollup.fold(catalog.engine, chunk=0)
    with pytest.raises(ValueError, match="table_series"):
        rollup.fold(catalog.engine, table_series=-1)


def test_the_clis_default_cap_is_the_rollups() -> None:
    from paimon_meta.cli.args import METRICS_TABLE_SERIES

    assert METRICS_TABLE_SERIES == rollup.TABLE_SERIES


def test_serve_folds_in_the_background_and_stops_with_the_service(
    catalog: MetastoreCatalog, writer: _Writer
) -> None:
    """With ``metrics_fold_seconds`` the service folds new events without a scrape (so a scrape after a
    backlog only reads), and its folding thread ends when the service closes."""
    from paimon_meta.service.state import ServiceSettings, ServiceState

    state = ServiceState(ServiceSettings(metrics_fold_seconds=0.05), catalog)
    try:
        for _ in range(60):
            writer.step()
        wait_for_horizon(catalog.engine)
        with catalog.engine.connect() as conn:
            written = conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM paimon_commit_events) + (SELECT count(*) FROM "
                    "paimon_lock_events) + (SELECT count(*) FROM paimon_maintenance_events)"
                )
            ).scalar_one()
        deadline = time.monotonic() + 300
        folded = 0
        while folded < written:
            assert time.monotonic() < deadline, f"the background fold stopped at {folded} of {written}"
            time.sleep(0.05)
            with catalog.engine.connect() as conn:
                folded = conn.execute(
                    text("SELECT coalesce(sum(events), 0) FROM paimon_metric_folds")
                ).scalar_one()
        assert folded == written
        folder = state._folder
        assert folder is not None and folder.is_alive()
    finally:
        state.close()
    assert not folder.is_alive()


def test_debt_gauges_of_tables_with_series_and_each_catalogs_worst_table(
    catalog: MetastoreCatalog, writer: _Writer
) -> None:
    """The debt gauges name only the tables with series (never every table's debt per scrape); per
    catalog, the worst table's pressure and the tables over the stop trigger count every registered
    table, not one in the recycle bin."""
    for _ in range(40):
        writer.step()
    settled_scrape(catalog, table_series=2)
    with catalog.engine.begin() as conn:
        with_series = set(
            conn.scalars(text("SELECT subject FROM paimon_metric_subjects WHERE kind = 'table'"))
        )
        debts = {
            "db.a": {"max_sorted_runs": 3, "max_small_files": 1, "buckets_over_stop_trigger": 0},
            "db.b": {"max_sorted_runs": 9, "max_small_files": 2, "buckets_over_stop_trigger": 1},
            "other.c": {"max_sorted_runs": 0, "max_small_files": 12, "buckets_over_stop_trigger": 1},
        }
        for table_id, name in writer.tables[:3]:
            conn.execute(
                text(
                    "INSERT INTO paimon_maintenance_debts (catalog_key, table_id, table_identifier, debt) "
                    "VALUES ('jdbc', :id, :name, CAST(:debt AS jsonb))"
                ),
                {"id": table_id, "name": name, "debt": json.dumps(debts[name])},
            )
        # a dropped table's debt (kept for an undrop) counts nowhere
        conn.execute(
            text(
                "INSERT INTO paimon_maintenance_debts (catalog_key, table_id, table_identifier, debt) "
                "VALUES ('jdbc', 555555, 'db.dropped', "
                '\'{"max_sorted_runs": 99, "buckets_over_stop_trigger": 5}\')'
            )
        )
    s = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in settled_scrape(catalog, table_series=2).splitlines()
        if line.startswith("paimon_meta_maintenance_")
    }
    runs = {k: v for k, v in s.items() if k.startswith("paimon_meta_maintenance_debt_sorted_runs{")}
    expected = {
        f'paimon_meta_maintenance_debt_sorted_runs{{catalog="jdbc",table="{name}"}}': debts[name][
            "max_sorted_runs"
        ]
        for name in with_series & set(debts)
    }
    assert expected and len(expected) < len(debts)  # some tables with series, some without
    assert runs == expected
    assert s['paimon_meta_maintenance_debt_pressure_max{catalog="jdbc"}'] == 12
    assert s['paimon_meta_maintenance_tables_over_stop_trigger{catalog="jdbc"}'] == 2
    # the console's tables most in debt: the same index, most first, registered tables only
    from paimon_meta.maintenance.scheduler import most_in_debt

    assert [d["table_identifier"] for d in most_in_debt(catalog, limit=2)] == ["other.c", "db.b"]
    b_id = next(i for i, n in writer.tables if n == "db.b")
    assert [d["table_identifier"] for d in most_in_debt(catalog, limit=5, table_ids=[b_id, 555555])] == [
        "db.b"
    ]


def test_the_folds_reads_are_tagged_apart_from_the_feeds() -> None:
    """``pg_stat_activity`` tells a fold's reads of the logs from the change feed's (both start from the
    horizon): every chunk read starts with the tag, never with the feed's ``WITH h AS``."""
    for statement in (rollup._COMMIT_CHUNK, rollup._LOCK_CHUNK, rollup._MAINTENANCE_CHUNK):
        assert statement.text.startswith(rollup.FOLD_QUERY_TAG)
