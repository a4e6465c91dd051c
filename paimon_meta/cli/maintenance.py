"""``paimon-meta recover|expire-snapshots|remove-orphan-files``: the maintenance of a table's commits
and files (each run under the table's lock, recorded in the maintenance log)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import EXIT_FAILURE, EXIT_OK, Context, Output
from paimon_meta.ops.common import parse_age

if TYPE_CHECKING:
    from paimon_meta.ops.recovery import RecoveryReport

_PENDING_COLUMNS: list[render.Column] = [
    ("commit_id", "commit"),
    ("commit_kind", "kind"),
    "action",
    ("snapshot_id", "snapshot"),
    "reason",
]


def register(commands: Commands) -> None:
    p = commands.add("recover", _recover, "resolve commits that were prepared but never finished")
    p.add_argument("table", nargs="?", metavar="TABLE", help="db.table (default: every table)")
    p.add_argument(
        "--older-than",
        metavar="DURATION",
        help="grace period since a commit's last event (default: max(2 x lease, acquire timeout + lease))",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="show what would be done; take no lock, write nothing"
    )

    p = commands.add("expire-snapshots", _expire, "expire old snapshots and delete the files only they used")
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--retain-min", type=positive, help="snapshot.num-retained.min (table option, default 10)")
    p.add_argument("--retain-max", type=positive, help="snapshot.num-retained.max (default unbounded)")
    p.add_argument("--older-than", metavar="DURATION", help="snapshot.time-retained (default 1h)")
    p.add_argument("--max-deletes", type=positive, help="snapshot.expire.limit (default 50)")
    p.add_argument("--dry-run", action="store_true", help="decide under the lock, delete nothing")

    p = commands.add("remove-orphan-files", _orphans, "delete unreferenced files older than a threshold")
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--older-than", metavar="DURATION", default="1d", help="minimum file age (default 1d)")
    p.add_argument("--dry-run", action="store_true", help="list the orphans, delete nothing")


def _recover(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.recovery import recover_all, recover_table

    cat = ctx.catalog()
    grace = None if args.older_than is None else parse_age(args.older_than)
    if args.table:
        reports = [
            recover_table(
                cat, args.table, older_than_seconds=grace, dry_run=args.dry_run, progress=ctx.progress
            )
        ]
    else:
        reports = recover_all(cat, older_than_seconds=grace, dry_run=args.dry_run, progress=ctx.progress)
    lines = [line for r in reports for line in _recovery_lines(r)]
    code = EXIT_OK if all(r.ok for r in reports) else EXIT_FAILURE
    return Output([r.to_dict() for r in reports], "\n".join(lines) or "(no tables)", code)


def _recovery_lines(r: RecoveryReport) -> list[str]:
    """One table's recovery: a summary line, then its pending commits as a table."""
    counts = ", ".join(f"{r.count(a)} {a}" for a in ("published", "finished", "aborted", "skipped", "failed"))
    head = (
        f"{r.table}: {len(r.reconciled)} snapshots recorded, {len(r.commits)} pending ({counts}), "
        f"{len(r.deleted_files)} files deleted" + (" [dry run]" if r.dry_run else "")
    )
    lines = [head if r.error is None else f"{r.table}: NOT RECOVERED: {r.error}"]
    if r.commits:
        lines.append(render.table([render.jsonable(c) for c in r.commits], _PENDING_COLUMNS))
    return lines


def _expire(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.expire import expire_snapshots

    report = expire_snapshots(
        ctx.catalog(),
        args.table,
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        time_retained_ms=None if args.older_than is None else int(parse_age(args.older_than) * 1000),
        max_deletes=args.max_deletes,
        dry_run=args.dry_run,
        progress=ctx.progress,
    )
    if report.expired:
        text = (
            f"{report.table}: {'would expire' if report.dry_run else 'expired'} snapshots "
            f"{report.expired[0]}..{report.expired[-1]} ({len(report.expired)}); earliest is now "
            f"{report.earliest_after}; {len(report.deleted_data_files)} data files and "
            f"{len(report.deleted_metadata_files)} metadata files "
            f"{'to delete' if report.dry_run else 'deleted'}"
        )
    else:
        text = f"{report.table}: {report.note or 'nothing to expire'}"
    return Output(report.to_dict(), text)


def _orphans(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.orphans import remove_orphan_files

    report = remove_orphan_files(
        ctx.catalog(),
        args.table,
        older_than_seconds=parse_age(args.older_than),
        dry_run=args.dry_run,
        progress=ctx.progress,
    )
    verb = "would delete" if report.dry_run else "deleted"
    count = len(report.orphans) if report.dry_run else len(report.deleted)
    lines = [
        f"{report.table}: scanned {report.scanned} files, {report.referenced} referenced, "
        f"{report.too_young} unreferenced but too young; {verb} {count} orphans ({report.orphan_bytes} bytes)"
    ]
    if report.orphans and report.dry_run:
        lines.append(
            render.table([render.jsonable(o) for o in report.orphans], ["path", "size", "age_seconds"])
        )
    code = EXIT_FAILURE if report.failed else EXIT_OK
    return Output(report.to_dict(), "\n".join(lines), code)
