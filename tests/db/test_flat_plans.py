"""Every metastore read of the log is one index range from its position (issue 39 item 5): the query
plans of the feed, the audit listings, the commit history and the console's pages, on a metastore seeded
with 10^5 or 10^6 events over a year (tests/fixtures/seeded_log.py, in SQL: seconds), from several positions.

Not a timing test: each statement is run under ``EXPLAIN (ANALYZE, FORMAT JSON)`` and its plan is
checked: every scan of an event table is an index scan with an index condition (no Seq Scan, no
bitmap scan of every event of a table), the driving scan's condition bounds the keyset columns
(``event_id``, or ``txid`` for the feed), no sort has an unbounded read of the log below it (only a
LIMIT's output, or the events of one commit or run), and the rows the statement read from the logs
(returned by the scans plus removed by their filters) stay within a small multiple of the page, the
same at the log's start, middle and end. CI seeds 10^5 events; ``PAIMON_META_SLOW=1`` 10^6 (the issue's
size for this test; its plans are the same).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from sqlalchemy import Engine, TextClause, text

from paimon_meta.db.engine import make_engine
from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.metastore import feed
from paimon_meta.metastore.event_partitions import EventPartitions
from paimon_meta.metastore.feed import FeedFilter, Lanes, Position
from paimon_meta.metastore.registry import Registry, Within
from paimon_meta.ops import activity, audit
from tests.fixtures.postgres import PgServer
from tests.fixtures.seeded_log import Seeded, partition_by_week, seed_log

#: 10^5 in CI (seeded in ~10 s); ``PAIMON_META_SLOW=1``: 10^6 (~70 s to seed at load 7).
EVENTS = 1_000_000 if os.environ.get("PAIMON_META_SLOW") == "1" else 100_000
TABLES = 10_000
CATALOG = "jdbc"
LOGS = frozenset(
    {"paimon_commit_events", "paimon_lock_events", "paimon_maintenance_events", "paimon_governance_events"}
)
#: The commit log is partitioned by week (migration 0024): its scans are of its partitions.
PARTITION_PREFIX = "paimon_commit_events_p"
#: The commit log's partitions (a year of weeks, and those made ahead), filled by the ``seeded`` fixture.
PARTITIONS: list[str] = []


def _of_log(node: Mapping[str, Any]) -> bool:
    name = str(node.get("Relation Name", ""))
    return name in LOGS or name.startswith(PARTITION_PREFIX)


#: Index conditions that bound a read to one commit's or one run's events (probes, not ranges).
PROBES = ("commit_id =", "run_id =")
NEWEST = 2**63 - 1


@pytest.fixture(scope="module")
def seeded(pg_server: PgServer, pg_template: str) -> Iterator[tuple[Engine, Seeded]]:
    name = f"paimon_meta_flat_{uuid.uuid4().hex[:10]}"
    url = pg_server.create_database(name, template=pg_template)
    engine = make_engine(url)
    try:
        partition_by_week(engine)
        PARTITIONS[:] = [p.name for p in EventPartitions(engine).partitions()]
        seeded = seed_log(engine, CATALOG, tables=TABLES, databases=100, events=EVENTS)
        with engine.connect() as conn:
            filled = [
                name
                for name in PARTITIONS
                if conn.execute(text(f"SELECT EXISTS (SELECT 1 FROM {name})")).scalar()  # noqa: S608
            ]
        assert len(filled) >= 50  # the year's events are in its weeks
        yield engine, seeded
    finally:
        engine.dispose()
        pg_server.drop_database(name)


def _nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _log_scans(plan: Mapping[str, Any], *, stop_at_limit: bool = False) -> Iterator[Mapping[str, Any]]:
    """The scans of an event table below ``plan`` (not below a Limit, with ``stop_at_limit``; never
    into a CTE's or init plan's own plan: those are checked where they are)."""
    if _of_log(plan):
        yield plan
    for child in plan.get("Plans", ()):
        if child.get("Parent Relationship") == "InitPlan" or "CTE" in str(child.get("Subplan Name", "")):
            continue
        if stop_at_limit and child["Node Type"] == "Limit":
            continue
        yield from _log_scans(child, stop_at_limit=stop_at_limit)


def _rows_read(node: Mapping[str, Any]) -> float:
    loops = node.get("Actual Loops", 1)
    return float((node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops)


def check_plan(
    engine: Engine,
    statement: TextClause,
    params: Mapping[str, Any],
    *,
    keyset: tuple[str, ...],
    budget: int,
    setup: TextClause | None = ORDERED_READS,
) -> Mapping[str, Any]:
    """Run ``statement`` under EXPLAIN ANALYZE (after ``setup``, in the same transaction, as the code
    runs it) and check its plan (module docstring); the plan."""
    with engine.connect() as conn:
        if setup is not None:
            conn.execute(setup)
        raw = conn.execute(
            text("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.text), dict(params)
        ).scalar_one()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    shown = json.dumps(plan, indent=1, default=str)[:6000]
    scans = [n for n in _nodes(plan) if _of_log(n)]
    assert scans, shown
    for scan in scans:
        assert scan["Node Type"] in ("Index Scan", "Index Only Scan"), (
            f"{scan['Node Type']} of {scan.get('Relation Name')}\n{shown}"
        )
    # no keyset: a scan of the whole log in index order, stopped by a LIMIT (the budget checks it did)
    bounded = [s for s in scans if any(k in s.get("Index Cond", "") for k in keyset)]
    assert bounded or not keyset, f"no keyset bound\n{shown}"
    for node in _nodes(plan):
        if node["Node Type"] in ("Sort", "Incremental Sort"):
            for scan in _log_scans(node, stop_at_limit=True):
                cond = scan.get("Index Cond", "")
                # The commit log's partitions: a sort of the Append of their index scans, each from the
                # position (the keyset bound), is the planner's choice where it expects few rows after
                # the position (Merge Append where many): the rows-read budget below holds it to that.
                partition = str(scan.get("Relation Name", "")).startswith(PARTITION_PREFIX)
                from_position = bool(keyset) and any(k in cond for k in keyset)
                assert any(p in cond for p in PROBES) or (partition and from_position), (
                    f"a sort over the log\n{shown}"
                )
    read = sum(_rows_read(s) for s in scans)
    # A Merge Append of the commit log's partitions reads the first row of each partition before it
    # returns one: at most one more row per partition and execution (partitions: bounded by retention).
    budget += sum(
        int(node.get("Actual Loops", 1)) * len(node.get("Plans", ()))
        for node in _nodes(plan)
        if node["Node Type"] == "Merge Append" and any(_of_log(c) for c in node.get("Plans", ()))
    )
    assert read <= budget, f"read {read} rows of the log (budget {budget})\n{shown}"
    return dict(plan)


def _positions(seeded: Seeded) -> dict[str, int]:
    """Event ids at the log's start, middle, a day before its end and its end."""
    last = seeded.commit_events
    return {"start": 1, "middle": last // 2, "a day back": last - last // 365, "end": NEWEST}


def _feed_params(
    lanes: Lanes, keep: FeedFilter, after: Position, scan: int, *, default: bool = False
) -> dict[str, Any]:
    return {
        "f_subject": keep.subject,
        "f_database": keep.database,
        "f_kinds": list(keep.kinds),
        "f_logs": list(feed.LOGS),
        "f_principal": keep.principal,
        "f_since": keep.since,
        "f_until": keep.until,
        "subjects": list(lanes.subjects),
        "databases": list(lanes.databases),
        **feed.kind_params(lanes),
        "catalog_key": CATALOG,
        "default_catalog": default,
        **feed._bounds(after),
        "txid": after.txid,
        "scan": scan,
    }


_KINDS = FeedFilter(kinds=("retried", "lost", "expire_snapshots.failed"))

FEEDS = {
    "every event": (feed.EVERY, FeedFilter()),
    # kind lanes (migration 0026): one range of a log's kind index per kind it can have
    "kind=failed": (feed.lanes_for(FeedFilter(kinds=("failed",)), None), FeedFilter(kinds=("failed",))),
    "three kinds of three logs": (
        feed.lanes_for(_KINDS, None),
        _KINDS,
    ),
    # a whole log named: every log read whole, as before (bounded by the scan cap)
    "kind=lock": (feed.lanes_for(FeedFilter(kinds=("lock",)), None), FeedFilter(kinds=("lock",))),
    "five tables": (Lanes(subjects=tuple(f"db0000.t{i * 100:06d}" for i in range(5))), FeedFilter()),
    "one database": (Lanes(databases=("db0042",)), FeedFilter(database="db0042")),
    # the governance log's one lane: every governance event of the catalog (a tenth of the log is
    # another catalog's, a tenth names none: read in the default catalog, filtered out otherwise)
    "kind=governance": (Lanes(governance=True), FeedFilter(kinds=("governance",))),
    "five tables and governance": (
        Lanes(subjects=tuple(f"db0000.t{i * 100:06d}" for i in range(5)), governance=True),
        FeedFilter(),
    ),
}


@pytest.mark.parametrize("shape", list(FEEDS))
def test_feed_reads_one_index_range_from_any_position(seeded: tuple[Engine, Seeded], shape: str) -> None:
    engine, seed = seeded
    lanes, keep = FEEDS[shape]
    statement = feed._feed_sql(lanes, keep)
    for where in (0, seed.xids // 2, seed.xids - seed.xids // 365, seed.xids - 1):
        for rank in range(len(feed.LOGS)):
            for default in (False, True):
                after = Position(seed.first_xid + where, rank, 0 if rank == 0 else 10**6)
                # each table log's branch reads at most :scan rows per lane key, each row checked once
                # for its catalog; the governance branch :scan rows of the catalog plus the other
                # catalogs' it passes (a fifth of the log here)
                kinds = sum(len(k) for k in lanes.kinds)
                keys = max(1, len(lanes.subjects) + len(lanes.databases) + kinds) if lanes.tables else 0
                governance = 1000 * 5 // 4 if lanes.governance else 0
                plan = check_plan(
                    engine,
                    statement,
                    _feed_params(lanes, keep, after, 1000, default=default),
                    keyset=("txid",),
                    budget=3 * 1000 * keys + governance + 100,
                    setup=feed.reads_of(lanes),
                )
                # every log scan that reads more than a handful of rows reads by kind, on its kind index
                # (a partition the planner expects a few rows after the position from, e.g. the week that
                # just ended on a Monday's first minutes, may be read on its feed index: 3 rows in CI)
                if kinds:
                    odd = [
                        (n.get("Relation Name"), n.get("Index Name"), _rows_read(n))
                        for n in _nodes(plan)
                        if _of_log(n) and _rows_read(n) > 10 and "event_type" not in n.get("Index Cond", "")
                    ]
                    assert not odd, odd


def _hot_table(engine: Engine) -> tuple[int, str]:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT table_id, database_name || '.' || table_name FROM paimon_tables "
                "WHERE catalog_key = :ck ORDER BY table_id LIMIT 1"
            ),
            {"ck": CATALOG},
        ).one()
    return int(row[0]), str(row[1])


def test_audit_listings_read_one_index_range_from_any_position(seeded: tuple[Engine, Seeded]) -> None:
    engine, seed = seeded
    table_id, identifier = _hot_table(engine)
    with engine.connect() as conn:
        commit_id = conn.execute(
            text("SELECT commit_id FROM paimon_commit_events WHERE table_id = :t ORDER BY event_id LIMIT 1"),
            {"t": table_id},
        ).scalar_one()
    page = 100
    for before in _positions(seed).values():
        common = {"limit": page, "before": before, "catalog_key": CATALOG}
        for by_table, by_commit, of_catalog in audit._EVENTS:
            params = {**common, "table": identifier, "commit_id": commit_id}
            check_plan(
                engine,
                audit._EVENTS[(by_table, by_commit, of_catalog)],
                params,
                keyset=("event_id",),
                budget=page * 2,
            )
        for by_lock in (True, False):
            check_plan(
                engine,
                audit._LOCK_EVENTS[by_lock],
                {**common, "lock_id": f"{CATALOG}.{identifier}"},
                keyset=("event_id",),
                budget=page * 2,
            )
        for statement in audit._MAINTENANCE.values():
            check_plan(
                engine, statement, {**common, "table": identifier}, keyset=("event_id",), budget=page * 6
            )
        check_plan(
            engine,
            audit._HISTORY,
            {"table_id": table_id, "limit": page, "before": before},
            keyset=("event_id",),
            budget=page * 20,
        )
        check_plan(
            engine,
            audit._RECORDED,
            {"table_id": table_id, "limit": page, "after": 0 if before == NEWEST else before},
            keyset=("event_id",),
            budget=page * 2,
        )


def test_console_reads_one_index_range_from_any_position(seeded: tuple[Engine, Seeded]) -> None:
    engine, seed = seeded
    table_id, _ = _hot_table(engine)
    for before in _positions(seed).values():
        params = {"table_id": table_id, "before": before, "limit": activity_page()}
        check_plan(engine, activity._COMMITS, params, keyset=("event_id",), budget=activity_page() * 20)
        check_plan(engine, activity._TROUBLE, params, keyset=("event_id",), budget=activity_page() * 2)
        check_plan(
            engine,
            activity._ALL_MAINTENANCE,
            {"before": before, "limit": activity_page()},
            keyset=("event_id",),
            budget=activity_page() * 6,
        )
    ids = list(range(table_id, table_id + 50))
    check_plan(
        engine,
        activity._LAST_ACTIVITY,
        {"ids": ids, "minutes": activity.RATE_WINDOW_MINUTES, "scan": activity.RATE_SCAN},
        keyset=("table_id",),
        budget=50 * (activity.RATE_SCAN + 1),
    )
    # tables without an event in the rate's window: their newest event only, none of the window's scan
    with engine.connect() as conn:
        cold = list(
            conn.scalars(
                text(
                    "SELECT t.table_id FROM paimon_tables t WHERE t.table_id > :hot AND NOT EXISTS ("
                    "SELECT 1 FROM paimon_commit_events e WHERE e.table_id = t.table_id "
                    "AND e.created_at > now() - make_interval(mins => :minutes)) ORDER BY t.table_id LIMIT 50"
                ),
                {"hot": table_id + 500, "minutes": activity.RATE_WINDOW_MINUTES + 1},
            )
        )
    assert len(cold) == 50
    plan = check_plan(
        engine,
        activity._LAST_ACTIVITY,
        {"ids": cold, "minutes": activity.RATE_WINDOW_MINUTES, "scan": activity.RATE_SCAN},
        keyset=("table_id",),
        budget=50,
    )
    rate = [n for n in _nodes(plan) if n["Node Type"] == "Aggregate"]
    assert rate and all(_rows_read(s) == 0 for a in rate for s in _nodes(a) if _of_log(s)), json.dumps(
        plan, default=str
    )[:4000]
    check_plan(
        engine,
        activity._CATALOG_RATE,
        {"catalog_key": CATALOG, "minutes": 10, "scan": 5000},
        keyset=(),
        budget=5000 * 2,
    )


def activity_page() -> int:
    return 50


def _rows_of(plan: Mapping[str, Any], relation: str) -> float:
    return sum(_rows_read(n) for n in _nodes(plan) if n.get("Relation Name") == relation)


@pytest.mark.parametrize(
    "within",
    [
        Within(tables=tuple(("db0000", f"t{i * 100:06d}") for i in range(5))),
        Within(databases=("db0042",), tables=(("db0007", "t000007"), ("db0099", "t009999"))),
    ],
    ids=["five tables", "a database and two tables"],
)
def test_a_listing_reads_what_the_grants_reach_not_the_registry(
    seeded: tuple[Engine, Seeded], within: Within
) -> None:
    """A principal allowed a few tables or databases (issue 39: 2.7 s for the first page at 10^5 tables,
    the grant filter reading every row): its listing reads the rows its grants reach, from any page."""
    engine, seed = seeded
    registry = Registry(engine, catalog_key=CATALOG)
    assert seed.tables == TABLES
    for after in (None, ("db0000", "t000250"), ("db0050", "")):
        for database in (None, "db0042"):
            query = registry.table_rows_query(after=after, limit=100, within=within, database=database)
            if query is None:
                continue
            sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
            with engine.connect() as conn:
                raw = conn.execute(text("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)).scalar_one()
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
            read = _rows_of(plan, "paimon_tables")
            # each database reached: at most its page; each table reached: one probe
            budget = 100 * len(within.databases) + len(within.tables) + 10
            assert read <= budget, (after, database, read, json.dumps(plan, default=str)[:3000])
