"""``paimon-meta tables|snapshots|read``: the registered tables, a table's snapshots and its rows.

Each also reads through a commit service (``--metastore http(s)://``, rows from ``cli.remote``).
"""

from __future__ import annotations

import argparse
from typing import Any

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import Context, Output
from paimon_meta.errors import NotFoundError


def register(commands: Commands) -> None:
    p = commands.add("tables", _tables, "list registered tables (of one database, or all)", remote=True)
    p.add_argument("database", nargs="?", metavar="DB")

    p = commands.add(
        "snapshots",
        _snapshots,
        "list a table's snapshots on storage and how the event log recorded them",
        remote=True,
    )
    p.add_argument("table", metavar="TABLE", help="db.table")

    p = commands.add("read", _read, "print rows of a table", remote=True)
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--limit", type=positive, default=20, help="at most N rows (default 20)")
    at = p.add_mutually_exclusive_group()
    at.add_argument("--snapshot", type=int, metavar="ID", help="read as of this snapshot")
    at.add_argument(
        "--tag", metavar="NAME", help="read the snapshot this tag keeps (also after that snapshot expired)"
    )
    p.add_argument("--columns", metavar="A,B", help="only these columns")


def _tables(ctx: Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is not None:
        from paimon_meta.cli import remote as cli_remote

        rows = cli_remote.table_rows(remote, args.database)
        return Output(rows, render.table(rows))
    cat = ctx.catalog()
    databases = [args.database] if args.database else cat.list_databases()
    rows = []
    for db in databases:
        for t in sorted(cat.registry.list_table_rows(db), key=lambda r: r.name):
            rows.append(
                {
                    "table": t.identifier,
                    "latest_snapshot_id": t.latest_snapshot_id,
                    "schema_id": t.schema_id,
                    "location": t.location,
                    "updated_at": t.updated_at,
                }
            )
    return Output(rows, render.table(rows))


def _snapshots(ctx: Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is None:
        from paimon_meta.ops.audit import snapshot_rows

        rows = snapshot_rows(ctx.catalog(), args.table)
    else:
        from paimon_meta.cli import remote as cli_remote

        rows = cli_remote.snapshot_rows(remote, args.table)
    cols: list[render.Column] = [
        ("snapshot_id", "id"),
        ("commit_kind", "kind"),
        ("committed_at", "committed at"),
        ("commit_user", "user"),
        ("commit_identifier", "identifier"),
        ("delta_records", "delta"),
        ("total_records", "total"),
        ("recorded_as", "event log"),
    ]
    return Output(rows, render.table(rows, cols))


def _read(ctx: Context, args: argparse.Namespace) -> Output:
    table = ctx.table(args.table)
    builder = table.new_read_builder()
    if args.snapshot is not None:
        if not table.snapshot_manager.snapshot_exists(args.snapshot):
            raise NotFoundError(f"{args.table} has no snapshot {args.snapshot} (never written or expired)")
        builder = builder.with_snapshot(args.snapshot)
    if args.tag is not None:
        builder = builder.with_tag(args.tag)
    if args.columns:
        builder = builder.with_projection([c.strip() for c in args.columns.split(",") if c.strip()])
    splits = builder.new_scan().plan().splits()
    rows: list[dict[str, Any]] = []
    for batch in builder.new_read().to_arrow_batches(splits):
        rows.extend(batch.to_pylist()[: args.limit - len(rows)])
        if len(rows) >= args.limit:
            break
    return Output(rows, render.table(rows))
