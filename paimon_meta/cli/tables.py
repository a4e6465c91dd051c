"""``paimon-meta tables|snapshots|read|credentials``: the registered tables, a table's snapshots and its
rows, and the storage credentials a commit service vends for a table.

Each also reads through a commit service (``--metastore http(s)://``, rows from ``cli.remote``); there,
when the service vends storage credentials (``serve --sts-role-arn``), ``snapshots`` and ``read`` open
the table's files with them (``RestCatalog.get_table``): no ``-o s3.*`` needed. ``credentials`` needs a
service (nothing vends credentials on the database path).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands, positive
from paimon_meta.cli.context import Context, Output
from paimon_meta.errors import NotFoundError, UnsupportedError


def register(commands: Commands) -> None:
    p = commands.add("tables", _tables, "list registered tables (of one database, or all)", remote=True)
    p.add_argument("database", nargs="?", metavar="DB", help="only this database's tables (default: all)")

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

    p = commands.add(
        "credentials",
        _credentials,
        "the storage credentials a commit service vends for a table: expiry, level and option keys "
        "(values of secrets only with --show-secrets)",
        remote=True,
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument(
        "--access",
        choices=("read", "write"),
        default=None,
        help="ask for this level (default: what the token's grant allows; write without a write grant "
        "is refused)",
    )
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="print the credentials themselves, as shell export lines of the AWS SDK's variables (for "
        'eval "$(paimon-meta ... credentials DB.T --show-secrets)"); with --json, the options with values',
    )


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


#: Vended options whose values are secrets: never printed without ``--show-secrets``.
SECRET_OPTIONS = frozenset({"s3.access-key", "s3.secret-key", "s3.session-token"})
#: The AWS SDK's environment variable of each vended option ``--show-secrets`` exports.
_AWS_ENV = {
    "s3.access-key": "AWS_ACCESS_KEY_ID",
    "s3.secret-key": "AWS_SECRET_ACCESS_KEY",
    "s3.session-token": "AWS_SESSION_TOKEN",
    "s3.endpoint": "AWS_ENDPOINT_URL",
    "s3.region": "AWS_REGION",
}


def _credentials(ctx: Context, args: argparse.Namespace) -> Output:
    """One ``GET .../token`` (recorded in the service's access log, as any client's fetch)."""
    remote = ctx.remote()
    if remote is None:
        raise UnsupportedError(
            "`paimon-meta credentials` asks a commit service for the credentials it vends: give "
            "--metastore http(s)://host:port (a `paimon-meta serve --sts-role-arn ...`) and --token; "
            "on the database path the CLI uses its own storage options (-o s3.*)",
            command="credentials",
        )
    token = remote.data_token(args.table, access=args.access)
    expires = datetime.fromtimestamp(token.expires_at_millis / 1000, UTC)
    level = args.access or "by grant (read, or write with a write grant)"
    shown = {
        key: value if args.show_secrets or key not in SECRET_OPTIONS else None
        for key, value in sorted(token.options.items())
    }
    data = {
        "table": args.table,
        "level": args.access or "grant",
        "expires_at": expires,
        "expires_in_seconds": max(0, int(token.expires_at_millis / 1000 - time.time())),
        "keys": token.keys,
        # Without --show-secrets the secrets' values are absent (None), not masked text a script
        # could mistake for a value.
        "options": shown,
    }
    if args.show_secrets:
        if sys.stdout.isatty():
            ctx.progress(
                "paimon-meta: warning: printing storage credentials to a terminal (they stay valid until "
                f'{expires.isoformat(timespec="seconds")}); capture them with eval "$(...)" instead'
            )
        return Output(data, _exports(args.table, token.options, expires))
    lines = {
        "table": args.table,
        "level": level,
        "expires at": expires,
        "expires in": _duration(data["expires_in_seconds"]),
        **{key: "(secret: --show-secrets)" if value is None else value for key, value in shown.items()},
    }
    return Output(data, render.key_values(lines))


def _exports(table: str, options: Mapping[str, str], expires: datetime) -> str:
    """Shell lines setting the AWS SDK's variables to the vended credentials, values quoted."""
    import shlex

    lines = [f"# storage credentials vended for {table}, valid until {expires.isoformat(timespec='seconds')}"]
    for key, env in _AWS_ENV.items():
        if key in options:
            lines.append(f"export {env}={shlex.quote(options[key])}")
    return "\n".join(lines)


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
