"""``paimon-meta commits|events``: a table's commits, and the raw commit, lock, maintenance and
data-access events.

Both also read through a commit service (``--metastore http(s)://``, rows from ``cli.remote``);
``events`` there only of one table (``--table``), since the service's grants are per table. The
data-access log (``events --access``: who was vended storage credentials for which table) is read from
the metastore only: the service serves no endpoint for it.
"""

from __future__ import annotations

import argparse
from typing import Any

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import EXIT_FAILURE, Context, Output
from paimon_meta.errors import NotFoundError, ValidationError

_COMMIT_COLUMNS: list[render.Column] = [
    ("first_event_at", "started"),
    ("commit_kind", "kind"),
    "outcome",
    ("snapshot_id", "snapshot"),
    "attempts",
    "retries",
    "conflicts",
    ("elapsed_ms", "ms"),
    ("commit_user", "user"),
    "principal",
    ("final_reason", "reason"),
    ("commit_id", "commit"),
]
_COMMIT_EVENT_COLUMNS: list[render.Column] = [
    ("event_id", "id"),
    ("created_at", "at"),
    ("table_identifier", "table"),
    ("event_type", "event"),
    "attempt",
    ("commit_kind", "kind"),
    ("snapshot_id", "snapshot"),
    "duration_ms",
    ("commit_id", "commit"),
    "payload",
]
_LOCK_EVENT_COLUMNS: list[render.Column] = [
    ("created_at", "at"),
    "lock_id",
    ("event_type", "event"),
    "owner",
    ("fencing_token", "token"),
    "wait_ms",
    "operator",
    "reason",
    "previous_owner",
]
_ACCESS_COLUMNS: list[render.Column] = [
    ("event_id", "id"),
    ("created_at", "at"),
    ("event_type", "event"),
    "principal",
    ("table_identifier", "table"),
    "level",
    ("expires_at", "expires"),
    "cached",
    ("session_name", "sts session"),
]
_MAINTENANCE_COLUMNS: list[render.Column] = [
    ("started_at", "started"),
    "table_identifier",
    "operation",
    "outcome",
    "dry_run",
    ("elapsed_ms", "ms"),
    "operator",
    "result",
]


def register(commands: Commands) -> None:
    p = commands.add(
        "commits", _commits, "a table's commits from the event log (outcome, attempts, time)", remote=True
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--limit", type=positive, default=50, help="latest N commits (default 50)")
    p.add_argument(
        "--archive",
        action="store_true",
        help="also the commits archived into the catalog's system.commit_log (from the database; times in "
        "UTC)",
    )

    p = commands.add(
        "events",
        _events,
        "raw commit events (lock events with --locks, maintenance runs with --maintenance, vended "
        "storage credentials with --access)",
        remote=True,
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("archive", "partitions", "make-partitions"),
        help="archive: archive the log's partitions past each catalog's paimon-meta.events.retention into "
        "its system.commit_log, then drop them (--catalog C: only C's rows; --dry-run: say what would be "
        "done); partitions: the commit log's partitions (range, rows estimate, archived catalogs, dropped "
        "ones); make-partitions: make the partitions missing for now and the next --periods periods "
        "(`serve` does it in the background); all need the metastore database",
    )
    p.add_argument("--dry-run", action="store_true", help="with archive: change nothing, say what is due")
    p.add_argument(
        "--periods",
        type=positive,
        default=2,
        help="with make-partitions: periods ahead of now to cover (default 2)",
    )
    p.add_argument(
        "--event-partition-days",
        type=float,
        default=7.0,
        metavar="DAYS",
        help="with make-partitions: the period of each new partition, as `serve --event-partition-days` "
        "(default 7)",
    )
    p.add_argument("--table", metavar="TABLE", help="only this db.table")
    p.add_argument("--commit", metavar="ID", help="only this commit id")
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--locks", action="store_true", help="lock events instead (of --table's lock)")
    kinds.add_argument(
        "--maintenance", action="store_true", help="expire / orphan-cleanup runs instead, one row a run"
    )
    kinds.add_argument(
        "--access",
        action="store_true",
        help="the data-access log instead: storage credentials the commit service vended, newest first "
        "(needs the metastore database, not a service URL)",
    )
    kinds.add_argument(
        "--follow",
        action="store_true",
        help="the change feed instead: every table's commit, lock and maintenance events as CloudEvents, "
        "one JSON object a line, from the start (or --after POSITION) and then as they happen, until "
        "interrupted (or --follow-seconds)",
    )
    start = p.add_mutually_exclusive_group()
    start.add_argument("--after", metavar="POSITION", help="with --follow: resume after this event id")
    start.add_argument(
        "--from-now", action="store_true", help="with --follow: only events from now on, none of the past"
    )
    p.add_argument(
        "--catalog-name",
        default="paimon",
        metavar="NAME",
        help="with --follow from the database: the catalog named in each event's source, as the service's "
        "`serve --catalog-name` (default paimon), so both print the same lines",
    )
    p.add_argument(
        "--follow-seconds",
        type=float,
        metavar="S",
        help="with --follow: stop after S seconds (default: never)",
    )
    p.add_argument("--principal", metavar="NAME", help="with --access: only credentials vended to NAME")
    p.add_argument("--limit", type=positive, default=100, help="latest N events (default 100)")


def _unpositioned(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without their log ``position`` (the service's page token; the HTTP path has none)."""
    return [{k: v for k, v in r.items() if k != "position"} for r in rows]


def _commits(ctx: Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if args.archive:
        if remote is not None:
            raise ValidationError("commits --archive reads the archive from the database, not a service URL")
        from paimon_meta.archive.history import history_with_archive
        from paimon_meta.ops.common import resolve_table

        cat = ctx.catalog()
        row, _ = resolve_table(cat, args.table)
        rows = history_with_archive(cat, row.table_id, args.table, limit=args.limit)
        return Output(rows, render.table(rows, _COMMIT_COLUMNS))
    if remote is None:
        from paimon_meta.ops.audit import commit_history
        from paimon_meta.ops.common import resolve_table

        cat = ctx.catalog()
        row, _ = resolve_table(cat, args.table)
        rows = _unpositioned(commit_history(cat.engine, row.table_id, limit=args.limit))
    else:
        from paimon_meta.cli import remote as cli_remote

        rows = cli_remote.commit_history(remote, args.table, args.limit)
    return Output(rows, render.table(rows, _COMMIT_COLUMNS))


_PARTITION_COLUMNS: list[render.Column] = [
    "name",
    "start",
    "end",
    ("rows_estimate", "rows (est.)"),
    "archived",
    "dropped_at",
]


def _partitions(ctx: Context, args: argparse.Namespace) -> Output:
    """``events partitions`` / ``events make-partitions``: the commit log's partitions by time."""
    from datetime import timedelta

    from paimon_meta.metastore.event_partitions import EventPartitions

    ctx.require_database(f"events {args.action}")
    if args.event_partition_days <= 0:
        raise ValidationError(
            f"--event-partition-days must be positive, not {args.event_partition_days}",
            option="event-partition-days",
        )
    parts = EventPartitions(ctx.engine(), period=timedelta(days=args.event_partition_days))
    if args.action == "make-partitions":
        made = parts.ensure_ahead(periods=args.periods)
        return Output({"made": made}, "\n".join(made) if made else "every partition needed is made")
    rows: list[dict[str, Any]] = [
        {
            "name": p.name,
            "start": p.start.isoformat() if p.start else "MINVALUE",
            "end": p.end.isoformat(),
            "rows_estimate": p.rows_estimate,
            "archived": ", ".join(f"{k}@{v}" for k, v in sorted(p.archived.items())),
            "dropped_at": p.dropped_at.isoformat() if p.dropped_at else None,
        }
        for p in [*parts.dropped(), *parts.partitions()]
    ]
    return Output(rows, render.table(rows, _PARTITION_COLUMNS))


def _events(ctx: Context, args: argparse.Namespace) -> Output:
    if args.action == "archive":
        return _archive(ctx, args)
    if args.dry_run:
        raise ValidationError("--dry-run goes with `events archive`")
    if args.action is not None:
        return _partitions(ctx, args)
    if (args.after is not None or args.follow_seconds is not None or args.from_now) and not args.follow:
        raise ValidationError("--after, --from-now and --follow-seconds go with --follow")
    if args.follow:
        return _follow(ctx, args)
    if args.principal is not None and not args.access:
        raise ValidationError("--principal filters the data-access log: use it with --access")
    if args.access and args.commit:
        raise ValidationError("--commit filters commit events: the data-access log has no commits")
    if args.access:
        rows = _access_rows(ctx, args)
        return Output(rows, render.table(rows, _ACCESS_COLUMNS))
    if args.maintenance:
        rows = _event_rows(ctx, args, "maintenance")
        return Output(rows, render.table(rows, _MAINTENANCE_COLUMNS))
    if args.locks:
        rows = _event_rows(ctx, args, "locks")
        return Output(rows, render.table(rows, _LOCK_EVENT_COLUMNS))
    rows = _event_rows(ctx, args, "commits")
    if args.commit and not rows:
        raise NotFoundError(f"no events for commit {args.commit}")
    return Output(rows, render.table(rows, _COMMIT_EVENT_COLUMNS))


def _event_rows(ctx: Context, args: argparse.Namespace, kind: str) -> list[dict[str, Any]]:
    """The rows of ``events`` (``kind``: commits, locks, maintenance), from the database or the service
    (there only of one table: its grants are per table)."""
    from paimon_meta.ops import audit

    if not args.table:
        ctx.require_database("events (without --table)")
    remote = ctx.remote()
    if remote is not None:
        from paimon_meta.cli import remote as cli_remote

        if kind == "maintenance":
            return cli_remote.maintenance_history(remote, args.table, args.limit)
        if kind == "locks":
            return cli_remote.lock_events(remote, args.table, args.limit)
        return cli_remote.commit_events(remote, args.table, args.commit, args.limit)
    cat = ctx.catalog()
    if kind == "maintenance":
        return _unpositioned(audit.maintenance_history(cat.engine, table=args.table, limit=args.limit))
    if kind == "locks":
        lock_id = None
        if args.table:
            from paimon_meta.model.identifier import split_identifier

            lock_id = cat.registry.lock_id(*split_identifier(args.table))
        return audit.lock_events(cat.engine, lock_id=lock_id, limit=args.limit)
    return audit.commit_events(cat.engine, table=args.table, commit_id=args.commit, limit=args.limit)


def _access_rows(ctx: Context, args: argparse.Namespace) -> list[dict[str, Any]]:
    """``events --access``: the data-access log (``paimon_meta.metastore.access_events``), newest first,
    of one table (by name: a dropped table's history too) and/or one principal."""
    # The log is the operator's record of who could reach which table's files: only the database
    # holds it, and no service endpoint serves it (a principal's token should not read others' grants).
    ctx.require_database("events --access")
    from paimon_meta.metastore.access_events import access_events
    from paimon_meta.model.identifier import split_identifier

    cat = ctx.catalog()
    identifier = ".".join(split_identifier(args.table)) if args.table else None
    events = access_events(
        cat.engine, table_identifier=identifier, principal=args.principal, limit=args.limit
    )
    return [
        {
            "event_id": e.event_id,
            "created_at": e.created_at,
            "event_type": e.event_type,
            "principal": e.principal,
            "table_identifier": e.table_identifier,
            "level": e.level,
            "actions": e.actions,
            "expires_at": e.expires_at,
            "cached": e.payload.get("cached"),
            "session_name": e.payload.get("session_name"),
            "payload": e.payload,
        }
        for e in events
    ]


#: Seconds between looks at the feed while following it and nothing is new.
FOLLOW_POLL_SECONDS = 0.5


def _follow(ctx: Context, args: argparse.Namespace) -> Output:
    """``events --follow``: the change feed (``metastore.feed``), one CloudEvent a line on stdout as the
    events come, from the database or through the service (where only the tables the token may read);
    resumable with ``--after`` (each line's ``id``)."""
    import json
    import time

    from paimon_meta.metastore.feed import START, FeedFilter, Position, cloud_event, feed_head, read_feed
    from paimon_meta.rest import models, paths

    deadline = None if args.follow_seconds is None else time.monotonic() + args.follow_seconds
    remote = ctx.remote()
    printed = 0
    if remote is None:
        cat = ctx.catalog()
        if args.from_now:
            position = feed_head(cat.engine)
        else:
            position = START if args.after is None else Position.parse(args.after, field="--after")
        keep = FeedFilter(subject=args.table)
    token = paths.FEED_NOW if args.from_now else args.after
    try:
        while deadline is None or time.monotonic() < deadline:
            if remote is None:
                events, position = read_feed(
                    cat.engine,
                    catalog_key=cat.registry.catalog_key,
                    default=ctx.catalog_name() is None,
                    after=position,
                    limit=args.limit,
                    keep=keep,
                )
                # encoded as the service encodes them (its model), so both paths print the same lines
                lines = [
                    models.CloudEvent.model_validate(cloud_event(e, args.catalog_name)).model_dump(
                        mode="json", by_alias=True
                    )
                    for e in events
                ]
            else:
                lines, token = remote.catalog_events(after=token, table=args.table, limit=args.limit)
            for line in lines:
                print(json.dumps(line, default=str), flush=True)
            printed += len(lines)
            if not lines:
                time.sleep(FOLLOW_POLL_SECONDS)
    except KeyboardInterrupt:
        pass
    return Output({"events": printed}, "")


def _archive(ctx: Context, args: argparse.Namespace) -> Output:
    """``events archive``: one archiver pass (``paimon_meta.archive.archiver``) from this machine."""
    from paimon_meta.archive.archiver import Archiver
    from paimon_meta.archive.store import partitioned_log
    from paimon_meta.db.engine import make_engine
    from paimon_meta.db.migrate import upgrade
    from paimon_meta.ops.common import operator_identity

    if ctx.remote() is not None:
        raise ValidationError("events archive runs against the metastore database, not a service URL")
    engine = make_engine(ctx.metastore_url())
    try:
        upgrade(engine)
        report = Archiver(engine, partitioned_log(engine), operator=operator_identity()).run(
            catalog=getattr(args, "catalog", None), dry_run=args.dry_run
        )
    finally:
        engine.dispose()
    lines = []
    for p, c in report.due:
        lines.append(f"due       {p}  catalog {c}")
    for a in report.archived:
        seen = " (committed earlier)" if a.already_committed else ""
        lines.append(
            f"archived  {a.partition}  catalog {a.catalog}  {a.rows} events  snapshot {a.snapshot_id}{seen}"
        )
    verb = "would drop" if report.dry_run else "dropped"
    lines += [f"{verb:<9} {p}" for p in report.dropped]
    lines += [f"kept      {p}  {why}" for p, why in report.kept.items()]
    lines += [f"error     {where}  {e}" for where, e in report.errors.items()]
    # a catalog or a drop that failed (retried by the next run) is an operational failure
    return Output(
        report.as_dict(), "\n".join(lines) or "nothing to archive", code=EXIT_FAILURE if report.errors else 0
    )
