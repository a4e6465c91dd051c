"""``paimon-meta demo``: the end-to-end demo (also ``make run``).

On a fresh machine: an embedded Postgres under ``$PAIMON_META_HOME`` as the metastore, a local
warehouse beside it, an append table and a primary-key table, ``writers`` concurrent Spark write jobs
(threads sharing one SparkSession, each committing twice through the Postgres lock), one
compaction of the primary-key table, then the snapshots, a row-count check and the commit audit from
the ``paimon_commit_history`` view. With ``PAIMON_META_URL`` / ``PAIMON_META_WAREHOUSE`` set (or the
arguments), it runs against that metastore and warehouse instead (``s3://`` warehouses take their
credentials from ``options`` or the standard AWS environment variables).

The demo owns the database ``demo``: its two tables are dropped and recreated on every run.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import ENV_URL, ENV_WAREHOUSE, EXIT_FAILURE, EXIT_OK, Context, Output
from paimon_meta.errors import ValidationError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable

DATABASE = "demo"
EVENTS = f"{DATABASE}.events"
ACCOUNTS = f"{DATABASE}.accounts"
DAYS = 8
Progress = Callable[[str], Any]

EVENTS_SCHEMA = pa.schema(
    [
        ("event_id", pa.int64(), False),
        ("account_id", pa.int64(), False),
        ("day", pa.date32(), False),
        ("kind", pa.string()),
        ("amount", pa.float64()),
    ]
)
ACCOUNTS_SCHEMA = pa.schema(
    [
        ("account_id", pa.int64(), False),
        ("region", pa.string()),
        ("balance", pa.float64()),
        ("version", pa.int32()),
    ]
)


def register(commands: Commands) -> None:
    p = commands.add("demo", _demo, "the end-to-end Spark demo (needs the spark extra)")
    p.add_argument(
        "--rows-per-writer", type=positive, default=1_000_000, help="rows each Spark writer appends"
    )
    p.add_argument("--writers", type=positive, default=4, help="concurrent Spark writers")


def _demo(ctx: Context, args: argparse.Namespace) -> Output:
    if ctx.catalog_name() is not None:
        # The demo makes its own tables in the warehouse it is given; it takes no catalog of the metastore.
        raise ValidationError(
            f"demo runs on a warehouse (--warehouse), not on a catalog of the metastore: drop --catalog "
            f"{ctx.catalog_name()!r}",
            option="--catalog",
        )
    code = run_demo(
        metastore_url=args.metastore or os.environ.get(ENV_URL) or None,
        warehouse=args.warehouse or os.environ.get(ENV_WAREHOUSE) or None,
        rows_per_writer=args.rows_per_writer,
        writers=args.writers,
        progress=print,
        options=ctx.options(),
    )
    return Output({"exit_code": code}, "", EXIT_OK if code == 0 else EXIT_FAILURE)


@dataclass(frozen=True, slots=True)
class _Job:
    """One writer: ``rows`` rows for ``table`` in two commits, ids from ``first_id``."""

    index: int
    table: str
    first_id: int
    rows: int


def _events(spark: SparkSession, first_id: int, rows: int) -> DataFrame:
    return spark.range(first_id, first_id + rows).selectExpr(
        "id as event_id",
        "id % 100000 as account_id",
        f"date_add(date'2024-01-01', cast(id % {DAYS} as int)) as day",
        "element_at(array('view', 'click', 'buy'), cast(id % 3 as int) + 1) as kind",
        "cast((id % 1000) * 0.25 as double) as amount",
    )


def _accounts(spark: SparkSession, first_id: int, rows: int, version: int) -> DataFrame:
    return spark.range(first_id, first_id + rows).selectExpr(
        "id as account_id",
        "element_at(array('eu', 'us', 'apac'), cast(id % 3 as int) + 1) as region",
        f"cast((id % 10000) * 1.5 + {version} as double) as balance",
        f"{version} as version",
    )


def _connect(
    metastore_url: str | None, warehouse: str, options: Mapping[str, str], progress: Progress
) -> MetastoreCatalog:
    from paimon_meta.catalog.metastore import connect

    if metastore_url is None:
        progress("starting (or reusing) the embedded Postgres under PAIMON_META_HOME ...")
    catalog = connect(metastore_url, warehouse, **options)
    where = "embedded Postgres" if catalog.info.embedded else "metastore"
    progress(f"{where} ready ({_redacted(catalog.info.metastore_url)}); warehouse {catalog.warehouse}")
    return catalog


def _redacted(url: str) -> str:
    from sqlalchemy import make_url

    return make_url(url).render_as_string(hide_password=True)


def _create_tables(catalog: MetastoreCatalog, progress: Progress) -> None:
    catalog.create_database(DATABASE, ignore_if_exists=True)
    existing = set(catalog.list_tables(DATABASE))
    for identifier in (EVENTS, ACCOUNTS):
        if identifier.split(".")[1] in existing:
            progress(f"dropping {identifier} from an earlier run")
            catalog.drop_table(identifier)
    catalog.create_table(
        EVENTS,
        EVENTS_SCHEMA,
        partition_keys=["day"],
        options={"bucket": "4", "bucket-key": "event_id"},
    )
    catalog.create_table(ACCOUNTS, ACCOUNTS_SCHEMA, primary_keys=["account_id"], options={"bucket": "4"})
    progress(
        f"created {EVENTS} (append, partitioned by day, 4 buckets) and {ACCOUNTS} (primary key, 4 buckets)"
    )


def _run_writer(
    spark: SparkSession, table: FileStoreTable, job: _Job, io_options: Mapping[str, str], progress: Progress
) -> None:
    from spark_jobs.batch_write import write_dataframe

    half = job.rows // 2
    started = time.monotonic()
    if job.table == EVENTS:
        frames = [_events(spark, job.first_id, half), _events(spark, job.first_id + half, job.rows - half)]
    else:
        # The second commit updates every key of the first: overlapping level-0 files to compact.
        frames = [_accounts(spark, job.first_id, half, 1), _accounts(spark, job.first_id, half, 2)]
    spark.sparkContext.setJobGroup(f"writer-{job.index}", f"demo writer {job.index} -> {job.table}")
    for n, frame in enumerate(frames, 1):
        result = write_dataframe(frame, table, io_options=io_options)
        progress(
            f"  writer {job.index} -> {job.table}: commit {n}/2 = snapshot {list(result.snapshot_ids)}, "
            f"{result.rows:,} rows in {result.files} files ({result.seconds:.1f} s)"
        )
    rate = job.rows / max(time.monotonic() - started, 1e-9)
    progress(f"  writer {job.index} done: {job.rows:,} rows, {rate:,.0f} rows/s")


def _run_writers(
    spark: SparkSession,
    catalog: MetastoreCatalog,
    jobs: Sequence[_Job],
    progress: Progress,
) -> list[BaseException]:
    tables = {job.index: catalog.get_table(job.table) for job in jobs}  # one table object per thread
    io_options = dict(catalog.file_io_options)
    errors: list[BaseException] = []

    def run(job: _Job) -> None:
        try:
            _run_writer(spark, tables[job.index], job, io_options, progress)
        except BaseException as e:
            errors.append(e)
            progress(f"  writer {job.index} FAILED: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(job,), name=f"demo-writer-{job.index}") for job in jobs]
    for t in threads:
        t.start()
    ticker = _Ticker(spark, progress)
    ticker.start()
    for t in threads:
        t.join()
    ticker.stop()
    return errors


class _Ticker:
    """Prints Spark task progress every few seconds while the writers run."""

    def __init__(self, spark: SparkSession, progress: Progress, every_s: float = 10.0) -> None:
        self._spark = spark
        self._progress = progress
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-ticker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        tracker = self._spark.sparkContext.statusTracker()
        while not self._stop.wait(self._every):
            stages = [s for s in (tracker.getStageInfo(i) for i in tracker.getActiveStageIds()) if s]
            done = sum(s.numCompletedTasks for s in stages)
            total = sum(s.numTasks for s in stages)
            self._progress(f"  ... {len(stages)} active stages, {done}/{total} tasks done")


def _snapshot_lines(table: FileStoreTable) -> list[str]:
    latest = table.latest_snapshot()
    earliest = table.snapshot_manager.earliest_snapshot()
    if latest is None or earliest is None:
        return ["    (no snapshots)"]
    lines = []
    for sid in range(earliest.id, latest.id + 1):
        s = table.snapshot(sid)
        identifier = "BATCH" if s.commit_identifier == 2**63 - 1 else str(s.commit_identifier)
        lines.append(
            f"    {s.id:>3}  {s.commit_kind.value:<9} user {s.commit_user[:8]}  id {identifier:<6} "
            f"delta {s.delta_record_count or 0:>+10,}  total {s.total_record_count or 0:>10,}"
        )
    return lines


def _file_count(table: FileStoreTable) -> int:
    return sum(len(s.files) for s in table.new_read_builder().new_scan().plan().splits())


def _audit(catalog: MetastoreCatalog, progress: Progress) -> None:
    from paimon_meta.ops.audit import commit_history

    # This run's tables only (by id): earlier runs' tables of the same names had other ids.
    rows = []
    for name in (EVENTS, ACCOUNTS):
        table_id = catalog.registry.get_table_row(*name.split(".")).table_id
        rows += [(name, r) for r in commit_history(catalog.engine, table_id, limit=100_000)]
    rows.sort(key=lambda pair: (pair[1]["first_event_at"], str(pair[1]["commit_id"])))
    progress("commit audit (SELECT ... FROM paimon_commit_history):")
    header = (
        f"{'table':<16}{'kind':<10}{'outcome':<11}{'snap':>5}{'tries':>6}{'retry':>6}{'confl':>6}{'ms':>10}"
    )
    progress("    " + header)
    for name, r in rows:
        elapsed = round(r["elapsed_ms"], 1) if r["elapsed_ms"] else 0
        progress(
            f"    {name:<16}{r['commit_kind'] or '-':<10}{r['outcome']:<11}{r['snapshot_id'] or '-':>5}"
            f"{r['attempts'] or 0:>6}{r['retries']:>6}{r['conflicts']:>6}{elapsed:>10}"
        )


def run_demo(
    *,
    metastore_url: str | None = None,
    warehouse: str | None = None,
    rows_per_writer: int = 1_000_000,
    writers: int = 4,
    progress: Progress = print,
    options: Mapping[str, str] | None = None,
) -> int:
    """Run the demo (see the module docstring); return 0 if every check passed, else 1.

    ``metastore_url``/``warehouse`` default to ``$PAIMON_META_URL``/``$PAIMON_META_WAREHOUSE``, then
    to an embedded Postgres and ``<PAIMON_META_HOME>/warehouse``. ``options`` are catalog/FileIO
    options (``s3.endpoint``, ...). Writers alternate between the append and the primary-key table.
    """
    from paimon_meta.db.embedded import default_home
    from spark_jobs.compaction import compact_table
    from spark_jobs.read import to_dataframe
    from spark_jobs.session import build_session

    started = time.monotonic()
    metastore_url = metastore_url or os.environ.get(ENV_URL) or None
    warehouse = warehouse or os.environ.get(ENV_WAREHOUSE) or str(Path(default_home()) / "warehouse")
    progress(f"paimon_meta demo: {writers} writers x {rows_per_writer:,} rows, warehouse {warehouse}")
    catalog = _connect(metastore_url, warehouse, dict(options or {}), progress)
    try:
        _create_tables(catalog, progress)
        progress(f"starting Spark ({os.environ.get('SPARK_MASTER') or 'local[2]'}) ...")
        # No console progress bars: they would interleave with the demo's own progress lines.
        spark = build_session("paimon_meta.demo", conf={"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        jobs = [
            _Job(i, EVENTS if i % 2 == 0 else ACCOUNTS, (i // 2) * rows_per_writer, rows_per_writer)
            for i in range(writers)
        ]
        progress(f"running {writers} concurrent writer jobs ...")
        errors = _run_writers(spark, catalog, jobs, progress)
        if errors:
            progress(f"{len(errors)} writer(s) failed; stopping")
            return 1

        accounts = catalog.get_table(ACCOUNTS)
        files_before = _file_count(accounts)
        progress(f"compacting {ACCOUNTS} ({files_before} files) ...")
        result = compact_table(spark, accounts, io_options=dict(catalog.file_io_options))
        progress(
            f"  COMPACT snapshot {list(result.snapshot_ids)}: {result.files_before} -> {result.files_after} "
            f"files in {result.buckets} buckets, {result.rows_rewritten:,} rows rewritten, "
            f"{result.conflicts} conflicts"
        )

        events = catalog.get_table(EVENTS)
        accounts = catalog.get_table(ACCOUNTS)
        for table, name in ((events, EVENTS), (accounts, ACCOUNTS)):
            progress(f"snapshots of {name}:")
            for line in _snapshot_lines(table):
                progress(line)

        io_options = dict(catalog.file_io_options)
        event_jobs = [j for j in jobs if j.table == EVENTS]
        account_jobs = [j for j in jobs if j.table == ACCOUNTS]
        expected_events = sum(j.rows for j in event_jobs)
        expected_accounts = sum(j.rows // 2 for j in account_jobs)
        got_events = to_dataframe(spark, events, io_options=io_options).count()
        account_frame = to_dataframe(spark, accounts, io_options=io_options)
        got_accounts = account_frame.count()
        stale = account_frame.where("version <> 2").count()
        ok = got_events == expected_events and got_accounts == expected_accounts and stale == 0
        progress(
            f"row-count check: {EVENTS} {got_events:,} (expected {expected_events:,}), "
            f"{ACCOUNTS} {got_accounts:,} (expected {expected_accounts:,}, {stale} not at version 2) "
            f"-> {'OK' if ok else 'MISMATCH'}"
        )
        _audit(catalog, progress)
        progress(f"demo finished in {time.monotonic() - started:.0f} s")
        return 0 if ok else 1
    finally:
        catalog.close()
