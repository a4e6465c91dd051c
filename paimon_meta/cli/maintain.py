"""``paimon-meta maintain`` (a standalone maintenance worker process) and ``paimon-meta maintenance
queue|runs|debts|pause|resume|retry``; ``paimon-meta dropped|undrop|purge`` and
``dropped-databases|undrop-database|purge-database``: the recycle bin."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import Context, Output
from paimon_meta.errors import ValidationError

_JOB_COLUMNS: list[render.Column] = [
    ("job_id", "job"),
    "table",
    "kind",
    "state",
    "attempts",
    ("run_after", "run after"),
    ("lease_owner", "owner"),
    ("last_error", "last error"),
]
_RUN_COLUMNS: list[render.Column] = [
    ("started_at", "started"),
    ("table_identifier", "table"),
    "kind",
    "outcome",
    ("elapsed_ms", "ms"),
    ("files_before", "files before"),
    ("files_after", "files after"),
]
_DROPPED_COLUMNS: list[render.Column] = [
    ("drop_id", "drop"),
    "table",
    ("dropped_at", "dropped"),
    ("dropped_by", "by"),
    ("purge_after", "purge after"),
    "grants",
    "location",
]
_DROPPED_DATABASE_COLUMNS: list[render.Column] = [
    ("drop_id", "drop"),
    "database",
    "tables",
    ("dropped_at", "dropped"),
    ("dropped_by", "by"),
    ("purge_after", "purge after"),
    "grants",
]


def register(commands: Commands) -> None:
    p = commands.add(
        "maintain",
        _maintain,
        "run maintenance workers (compaction, expiration, partition TTL, tags, orphans, recycle bin purges) "
        "from the commit log until stopped",
    )
    p.add_argument("--workers", type=positive, default=2, help="jobs run at once (default 2)")
    p.add_argument("--lease-seconds", type=float, default=60.0, help="a job's lease (default 60)")
    p.add_argument("--poll-seconds", type=float, default=1.0, help="queue polling when idle (default 1)")
    p.add_argument(
        "--tick-seconds",
        type=float,
        default=1.0,
        help="how often the commit log is read and debts measured (default 1)",
    )
    p.add_argument("--once", action="store_true", help="measure every table, run the due jobs, then exit")
    p.add_argument(
        "--spark-master",
        metavar="MASTER",
        help="run the compaction of a table of paimon-meta.maintenance.compaction.spark-min-bytes or more "
        "(default 1 gb) as the Spark compaction job on this master (spark://host:7077, yarn, local[4]); "
        "default: every compaction in this process",
    )
    p.add_argument(
        "--spark-timeout-seconds",
        type=float,
        default=3600.0,
        help="a Spark compaction job taking longer is killed and its run retried (default 3600)",
    )

    group = commands.group("maintenance", "the maintenance queue: jobs, runs, debts, pauses")
    p = group.action("queue", _queue, "queued, running and dead jobs")
    p.add_argument("--state", choices=["queued", "running", "dead"], help="only jobs in this state")
    p = group.action("runs", _runs, "recent maintenance runs with their outcome")
    p.add_argument("--table", metavar="TABLE", help="db.table")
    p.add_argument("--limit", type=positive, default=50, help="the latest N runs (default 50)")
    group.action("debts", _debts, "each table's debt as last measured")
    p = group.action("pause", _pause, "pause maintenance of a table, or of the whole catalog")
    p.add_argument("table", nargs="?", metavar="TABLE", help="db.table (default: the whole catalog)")
    p = group.action("resume", _resume, "resume maintenance paused by `pause`")
    p.add_argument("table", nargs="?", metavar="TABLE", help="db.table (default: the whole catalog)")
    p = group.action("retry", _retry, "queue a dead job again with fresh attempts")
    p.add_argument(
        "job_id", type=int, metavar="JOB", help="the dead job to queue again (its id in `maintenance queue`)"
    )

    p = commands.add("dropped", _dropped, "tables in the recycle bin")
    p.add_argument("--database", metavar="DB", help="only this database's")
    p = commands.add("undrop", _undrop, "restore a dropped table from the recycle bin, with its grants")
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--drop-id", type=int, help="which drop of that name (default: the latest)")
    p = commands.add("purge", _purge, "delete a dropped table's files now and remove it from the recycle bin")
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--drop-id", type=int, help="which drop of that name (default: the latest)")
    commands.add("dropped-databases", _dropped_databases, "databases in the recycle bin")
    p = commands.add(
        "undrop-database",
        _undrop_database,
        "restore a dropped database from the recycle bin: its grants, views, functions and tables",
    )
    p.add_argument("database", metavar="DB", help="the dropped database's name")
    p.add_argument("--drop-id", type=int, help="which drop of that name (default: the latest)")
    p = commands.add(
        "purge-database",
        _purge_database,
        "delete a dropped database's tables' files now and remove it from the recycle bin",
    )
    p.add_argument("database", metavar="DB", help="the dropped database's name")
    p.add_argument("--drop-id", type=int, help="which drop of that name (default: the latest)")


def _maintainer(ctx: Context, args: argparse.Namespace) -> Any:
    from paimon_meta.maintenance.spark import SparkCompaction
    from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
    from paimon_meta.ops.common import operator_identity

    if args.spark_timeout_seconds <= 0:
        raise ValidationError("--spark-timeout-seconds must be positive", field="--spark-timeout-seconds")
    settings = MaintainerSettings(
        workers=args.workers,
        lease_seconds=args.lease_seconds,
        poll_seconds=args.poll_seconds,
        tick_seconds=args.tick_seconds,
        spark=(
            SparkCompaction(args.spark_master, timeout_seconds=args.spark_timeout_seconds)
            if args.spark_master
            else None
        ),
    )
    return Maintainer(ctx.catalog(), settings, where=f"maintain:{operator_identity()}")


def _maintain(ctx: Context, args: argparse.Namespace) -> Output:
    maintainer = _maintainer(ctx, args)
    if args.once:
        ran = maintainer.drain()
        return Output({"jobs": ran}, f"ran {ran} maintenance jobs")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    maintainer.start()
    ctx.progress(f"maintaining with {args.workers} workers; stop with SIGTERM or Ctrl-C")
    stop.wait()
    maintainer.stop()
    runs = {f"{k}.{o}": n for (k, o), n in sorted(maintainer.stats.runs.items())}
    return Output(
        {"runs": runs}, "stopped; runs: " + (", ".join(f"{k} {n}" for k, n in runs.items()) or "none")
    )


def _queue_of(ctx: Context) -> Any:
    from paimon_meta.maintenance.queue import MaintenanceQueue

    catalog = ctx.catalog()
    return MaintenanceQueue(catalog.engine, catalog.registry.catalog_key)


def _queue(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.models import MaintenanceJobState

    queue = _queue_of(ctx)
    jobs = [
        j.to_dict() for j in queue.jobs(state=None if args.state is None else MaintenanceJobState(args.state))
    ]
    pauses = queue.pauses()
    text = render.table(jobs, _JOB_COLUMNS) if jobs else "(no jobs)"
    if pauses:
        text += "\npaused: " + ", ".join("catalog" if p["scope"] == "*" else p["scope"] for p in pauses)
    return Output({"jobs": jobs, "depth": queue.depth(), "paused": pauses}, text)


def _runs(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.audit import maintenance_queue_runs

    rows = maintenance_queue_runs(ctx.catalog().engine, table=args.table, limit=args.limit)
    data = []
    for r in rows:
        result = r.get("result") or {}
        data.append(
            render.jsonable(
                {**r, "files_before": result.get("files_before"), "files_after": result.get("files_after")}
            )
        )
    return Output(data, render.table(data, _RUN_COLUMNS) if data else "(no runs)")


def _debts(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.maintenance.scheduler import debts

    rows = [render.jsonable(r) for r in debts(ctx.catalog())]
    columns: list[render.Column] = [
        ("table_identifier", "table"),
        ("snapshot_id", "snapshot"),
        ("max_sorted_runs", "sorted runs"),
        ("max_small_files", "small files"),
        "snapshots",
        ("updated_at", "measured"),
    ]
    flat = [{**r, **(r.get("debt") or {})} for r in rows]
    return Output(rows, render.table(flat, columns) if flat else "(nothing measured yet)")


def _scope(args: argparse.Namespace) -> str:
    from paimon_meta.maintenance.queue import CATALOG_SCOPE
    from paimon_meta.model.identifier import split_identifier

    if args.table is None:
        return CATALOG_SCOPE
    db, name = split_identifier(args.table)
    return f"{db}.{name}"


def _pause(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    scope = _scope(args)
    changed = _queue_of(ctx).pause(scope, by=operator_identity())
    what = "the catalog" if args.table is None else scope
    return Output(
        {"scope": scope, "changed": changed},
        f"maintenance of {what} {'paused' if changed else 'was paused already'}",
    )


def _resume(ctx: Context, args: argparse.Namespace) -> Output:
    scope = _scope(args)
    changed = _queue_of(ctx).resume(scope)
    what = "the catalog" if args.table is None else scope
    return Output(
        {"scope": scope, "changed": changed},
        f"maintenance of {what} {'resumed' if changed else 'was not paused'}",
    )


def _retry(ctx: Context, args: argparse.Namespace) -> Output:
    _queue_of(ctx).retry_dead(args.job_id)
    return Output({"job_id": args.job_id}, f"job {args.job_id} queued again")


def _dropped(ctx: Context, args: argparse.Namespace) -> Output:
    rows = [render.jsonable(d.to_dict()) for d in ctx.catalog().recycle_bin.entries(database=args.database)]
    return Output(rows, render.table(rows, _DROPPED_COLUMNS) if rows else "(the recycle bin is empty)")


def _undrop(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity
    from paimon_meta.ops.tables import undrop_table

    row = undrop_table(ctx.catalog(), args.table, drop_id=args.drop_id, principal=operator_identity())
    return Output(
        render.jsonable({"table": row.identifier, "table_id": row.table_id, "location": row.location}),
        f"{row.identifier} restored at {row.location}",
    )


def _purge(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity
    from paimon_meta.ops.tables import purge_table

    deleted = purge_table(ctx.catalog(), args.table, drop_id=args.drop_id, principal=operator_identity())
    return Output(
        {"table": args.table, "deleted_files": deleted}, f"{args.table}: purged, {deleted} files deleted"
    )


def _dropped_databases(ctx: Context, args: argparse.Namespace) -> Output:
    rows = [render.jsonable(d.to_dict()) for d in ctx.catalog().recycle_bin.databases()]
    return Output(
        rows, render.table(rows, _DROPPED_DATABASE_COLUMNS) if rows else "(no database in the recycle bin)"
    )


def _undrop_database(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity
    from paimon_meta.ops.tables import undrop_database

    done = undrop_database(ctx.catalog(), args.database, drop_id=args.drop_id, principal=operator_identity())
    return Output(
        render.jsonable(done.to_dict()),
        f"database {done.database} restored with {len(done.tables)} tables and {done.grants} grants",
    )


def _purge_database(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity
    from paimon_meta.ops.tables import purge_database

    deleted = purge_database(
        ctx.catalog(), args.database, drop_id=args.drop_id, principal=operator_identity()
    )
    return Output(
        {"database": args.database, "deleted_files": deleted},
        f"database {args.database}: purged, {deleted} files deleted",
    )
