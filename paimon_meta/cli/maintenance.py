"""``paimon-meta recover|expire-snapshots|remove-orphan-files``: the maintenance of a table's commits
and files (each run under the table's lock, recorded in the maintenance log). With ``--metastore
http(s)://`` and an admin token they run in the commit service (``service.routes_ops``): no database or
storage credentials needed; the output is the same (it is printed from the same report fields)."""

from __future__ import annotations

import argparse
from typing import Any

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import EXIT_FAILURE, EXIT_OK, Context, Output
from paimon_meta.ops.common import parse_age

_PENDING_COLUMNS: list[render.Column] = [
    ("commit_id", "commit"),
    ("commit_kind", "kind"),
    "action",
    ("snapshot_id", "snapshot"),
    "reason",
]


def register(commands: Commands) -> None:
    p = commands.add(
        "recover", _recover, "resolve commits that were prepared but never finished", remote=True
    )
    p.add_argument("table", nargs="?", metavar="TABLE", help="db.table (default: every table)")
    p.add_argument(
        "--older-than",
        metavar="DURATION",
        help="grace period since a commit's last event (default: max(2 x lease, acquire timeout + lease))",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="show what would be done; take no lock, write nothing"
    )

    p = commands.add(
        "expire-snapshots", _expire, "expire old snapshots and delete the files only they used", remote=True
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--retain-min", type=positive, help="snapshot.num-retained.min (table option, default 10)")
    p.add_argument("--retain-max", type=positive, help="snapshot.num-retained.max (default unbounded)")
    p.add_argument("--older-than", metavar="DURATION", help="snapshot.time-retained (default 1h)")
    p.add_argument("--max-deletes", type=positive, help="snapshot.expire.limit (default 50)")
    p.add_argument("--dry-run", action="store_true", help="decide under the lock, delete nothing")

    p = commands.add(
        "remove-orphan-files", _orphans, "delete unreferenced files older than a threshold", remote=True
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--older-than", metavar="DURATION", default="1d", help="minimum file age (default 1d)")
    p.add_argument("--dry-run", action="store_true", help="list the orphans, delete nothing")


def _recover(ctx: Context, args: argparse.Namespace) -> Output:
    grace = None if args.older_than is None else parse_age(args.older_than)
    remote = ctx.remote()
    if remote is not None:
        tables = (
            [args.table]
            if args.table
            else [f"{d}.{t}" for d in remote.list_databases() for t in remote.list_tables(d)]
        )
        reports = [remote.recover(t, older_than_seconds=grace, dry_run=args.dry_run) for t in tables]
    else:
        from paimon_meta.ops.recovery import recover_all, recover_table

        cat = ctx.catalog()
        if args.table:
            found = [
                recover_table(
                    cat, args.table, older_than_seconds=grace, dry_run=args.dry_run, progress=ctx.progress
                )
            ]
        else:
            found = recover_all(cat, older_than_seconds=grace, dry_run=args.dry_run, progress=ctx.progress)
        reports = [r.to_dict() for r in found]
    lines = [line for r in reports for line in _recovery_lines(r)]
    ok = all(r["error"] is None and all(c["action"] != "failed" for c in r["commits"]) for r in reports)
    return Output(reports, "\n".join(lines) or "(no tables)", EXIT_OK if ok else EXIT_FAILURE)


def _recovery_lines(r: dict[str, Any]) -> list[str]:
    """One table's recovery: a summary line, then its pending commits as a table."""
    commits = r["commits"]
    counts = ", ".join(
        f"{sum(1 for c in commits if c['action'] == a)} {a}"
        for a in ("published", "finished", "aborted", "skipped", "failed")
    )
    head = (
        f"{r['table']}: {len(r['reconciled'])} snapshots recorded, {len(commits)} pending ({counts}), "
        f"{len(r['deleted_files'])} files deleted" + (" [dry run]" if r["dry_run"] else "")
    )
    lines = [head if r["error"] is None else f"{r['table']}: NOT RECOVERED: {r['error']}"]
    if commits:
        lines.append(render.table([render.jsonable(c) for c in commits], _PENDING_COLUMNS))
    return lines


def _expire(ctx: Context, args: argparse.Namespace) -> Output:
    settings = {
        "retain_min": args.retain_min,
        "retain_max": args.retain_max,
        "max_deletes": args.max_deletes,
        "dry_run": args.dry_run,
    }
    older = None if args.older_than is None else parse_age(args.older_than)
    remote = ctx.remote()
    if remote is not None:
        report = remote.expire_snapshots(args.table, older_than_seconds=older, **settings)
    else:
        from paimon_meta.ops.expire import expire_snapshots

        report = expire_snapshots(
            ctx.catalog(),
            args.table,
            time_retained_ms=None if older is None else int(older * 1000),
            progress=ctx.progress,
            **settings,
        ).to_dict()
    expired, dry = report["expired"], report["dry_run"]
    if expired:
        text = (
            f"{report['table']}: {'would expire' if dry else 'expired'} snapshots "
            f"{expired[0]}..{expired[-1]} ({len(expired)}); earliest is now "
            f"{report['earliest_after']}; {len(report['deleted_data_files'])} data files and "
            f"{len(report['deleted_metadata_files'])} metadata files "
            f"{'to delete' if dry else 'deleted'}"
        )
    else:
        text = f"{report['table']}: {report['note'] or 'nothing to expire'}"
    return Output(report, text)


def _orphans(ctx: Context, args: argparse.Namespace) -> Output:
    older = parse_age(args.older_than)
    remote = ctx.remote()
    if remote is not None:
        report = remote.remove_orphan_files(args.table, older_than_seconds=older, dry_run=args.dry_run)
    else:
        from paimon_meta.ops.orphans import remove_orphan_files

        report = remove_orphan_files(
            ctx.catalog(), args.table, older_than_seconds=older, dry_run=args.dry_run, progress=ctx.progress
        ).to_dict()
    dry = report["dry_run"]
    verb = "would delete" if dry else "deleted"
    count = len(report["orphans"]) if dry else len(report["deleted"])
    lines = [
        f"{report['table']}: scanned {report['scanned']} files, {report['referenced']} referenced, "
        f"{report['too_young']} unreferenced but too young; {verb} {count} orphans "
        f"({report['orphan_bytes']} bytes)"
    ]
    if report["orphans"] and dry:
        lines.append(
            render.table([render.jsonable(o) for o in report["orphans"]], ["path", "size", "age_seconds"])
        )
    code = EXIT_FAILURE if report["failed"] else EXIT_OK
    return Output(report, "\n".join(lines), code)
