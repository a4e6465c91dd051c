"""``paimon-meta verify``: the read-only consistency check of a catalog or one table (``ops.verify``)."""

from __future__ import annotations

import argparse

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import EXIT_FINDINGS, EXIT_OK, Context, Output
from paimon_meta.ops.common import parse_age


def register(commands: Commands) -> None:
    p = commands.add(
        "verify",
        _verify,
        "check, read-only, that the metastore and storage agree: snapshots against the event log, hints, "
        "manifests, locks, registry rows against directories, pending commits, orphans (exit 5: findings)",
    )
    p.add_argument("table", nargs="?", metavar="TABLE", help="db.table (default: the whole catalog)")
    p.add_argument(
        "--data-files",
        action="store_true",
        help="also check that every data file a snapshot or tag holds is on storage (reads every manifest)",
    )
    p.add_argument(
        "--orphan-age",
        metavar="DURATION",
        default="1d",
        help="count unreferenced files older than this as orphans (default 1d, as remove-orphan-files)",
    )
    p.add_argument(
        "--pending-older-than",
        metavar="DURATION",
        help="report prepared, unfinished commits idle longer than this (default: recovery's grace period)",
    )


def _verify(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.verify import verify

    report = verify(
        ctx.catalog(),
        args.table,
        data_files=args.data_files,
        orphan_age_seconds=parse_age(args.orphan_age),
        pending_grace_seconds=None if args.pending_older_than is None else parse_age(args.pending_older_than),
        progress=ctx.progress,
    )
    data = report.to_dict()
    checked = (
        f"{report.tables} tables, {report.snapshots} snapshots, {report.manifests} manifests"
        + (f", {report.data_files_checked} data files" if report.data_files else "")
        + f", {report.locks} locks in {report.elapsed_seconds:.1f}s"
        + (f" ({len(report.skipped)} metadata-only tables skipped)" if report.skipped else "")
    )
    if report.clean:
        return Output(data, f"verify {report.scope}: clean ({checked})")
    lines = [
        f"verify {report.scope}: {data['errors']} errors, {data['warnings']} warnings ({checked})",
        *(
            f"{f.severity.upper():<7} {f.code:<26} {f.table or '-'}: {f.message}"
            for f in sorted(report.findings, key=lambda f: (f.severity != "error", f.table or "", f.code))
        ),
    ]
    return Output(data, "\n".join(lines), EXIT_FINDINGS if report.findings else EXIT_OK)
