"""``paimon-meta serve`` and ``paimon-meta principals ...`` (the commit service's commands)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from paimon_meta.db.models import Privilege

if TYPE_CHECKING:
    from paimon_meta.cli.main import Output, _Context

Command = Callable[..., Any]  # cli.build_parser's ``command(name, handler, help, *, remote=False)``


def add_commands(sub: Any, command: Command, common: argparse.ArgumentParser) -> None:
    p = command(
        "serve", _serve, "serve Paimon's REST catalog protocol over the metastore (the commit service)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8181, help="port (default 8181)")
    p.add_argument("--catalog-name", default="paimon", help="the REST prefix clients use as 'warehouse'")
    p.add_argument("--workers", type=int, default=32, help="threads for blocking work (default 32)")
    p.add_argument("--drain-seconds", type=float, default=30.0, help="SIGTERM grace for in-flight requests")
    p.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024, help="request body limit")
    p.add_argument(
        "--group-max-commits",
        type=int,
        default=64,
        help="commit-messages requests of one table committed under one lock hold, at most (1: no grouping)",
    )
    p.add_argument(
        "--group-max-hold-ms",
        type=float,
        default=500.0,
        help="longest a group holds a table's lock before letting others in (default 500)",
    )
    p.add_argument(
        "--group-max-batch",
        type=int,
        default=16,
        help="queued commits of one table made durable together, at most (1: one at a time; default 16)",
    )
    # Against slow, oversized and guessing clients (README, "Hardening").
    p.add_argument(
        "--body-timeout-seconds", type=float, default=30.0, help="a body must arrive in this (408)"
    )
    p.add_argument(
        "--header-timeout-seconds", type=float, default=10.0, help="request headers must arrive in this"
    )
    p.add_argument("--max-header-bytes", type=int, default=64 * 1024, help="request headers limit (400)")
    p.add_argument("--keep-alive-seconds", type=float, default=5.0, help="idle connections closed after")
    p.add_argument("--max-connections", type=int, default=1024, help="connections or requests (then 503)")
    p.add_argument(
        "--auth-failure-burst",
        type=int,
        default=20,
        help="refused tokens per client address before 429 (0: no throttle; default 20)",
    )
    p.add_argument(
        "--auth-failure-refill-seconds",
        type=float,
        default=3.0,
        help="one more refused token allowed per address every this many seconds (default 3)",
    )
    p.add_argument(
        "--metrics-cache-seconds",
        type=float,
        default=5.0,
        help="reuse the event log's part of /metrics for this long (0: query on every scrape)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    p = command("rollback", _rollback, "roll a table back to a snapshot or tag (later snapshots are removed)")
    p.add_argument("table", metavar="TABLE", help="db.table")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-snapshot", type=int, metavar="ID")
    target.add_argument("--to-tag", metavar="TAG")
    p.add_argument(
        "--from-snapshot", type=int, metavar="ID", help="refuse unless this is the latest snapshot"
    )

    p = command(
        "tags",
        _tags,
        "list a table's tags, or create (--create NAME) / delete (--delete NAME) one",
        remote=True,
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--create", metavar="NAME")
    action.add_argument("--delete", metavar="NAME")
    p.add_argument(
        "--snapshot", type=int, metavar="ID", help="with --create: tag this snapshot (default latest)"
    )

    principals = sub.add_parser("principals", help="service principals, their tokens and grants")
    ps = principals.add_subparsers(dest="principals_command", metavar="ACTION", required=True)
    p = ps.add_parser("create", parents=[common], help="create a principal and print its token (shown once)")
    p.add_argument("name")
    p.set_defaults(handler=_create)
    p = ps.add_parser("token", parents=[common], help="issue another token for a principal (shown once)")
    p.add_argument("name")
    p.set_defaults(handler=_token)
    p = ps.add_parser("revoke-token", parents=[common], help="revoke a principal's tokens (or one by prefix)")
    p.add_argument("name")
    p.add_argument("--prefix", help="only the token starting with this (as `principals list` shows)")
    p.set_defaults(handler=_revoke_token)
    for action, handler, text in (
        ("grant", _grant, "grant read|write|admin on the catalog, a database or a table"),
        ("revoke", _revoke, "revoke exactly such a grant"),
    ):
        p = ps.add_parser(action, parents=[common], help=text)
        p.add_argument("name")
        p.add_argument("privilege", choices=[v.value for v in Privilege])
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--database", metavar="DB")
        scope.add_argument("--table", metavar="DB.T")
        p.set_defaults(handler=handler)
    p = ps.add_parser("list", parents=[common], help="principals with their grants and tokens (prefixes)")
    p.set_defaults(handler=_list)


def _principals(ctx: _Context) -> Any:
    from paimon_meta.metastore.principals import Principals

    return Principals(ctx.catalog().engine)


def _output(data: Any, text: str) -> Output:
    from paimon_meta.cli.main import Output

    return Output(data, text)


def _create(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    token = _principals(ctx).create(args.name, created_by=operator_identity())
    return _output(
        {"principal": args.name, "token": token},
        f"principal {args.name} created; token (shown once):\n{token}",
    )


def _token(ctx: _Context, args: argparse.Namespace) -> Output:
    token = _principals(ctx).issue_token(args.name)
    return _output(
        {"principal": args.name, "token": token}, f"new token for {args.name} (shown once):\n{token}"
    )


def _revoke_token(ctx: _Context, args: argparse.Namespace) -> Output:
    n = _principals(ctx).revoke_tokens(args.name, prefix=args.prefix)
    return _output({"principal": args.name, "revoked": n}, f"revoked {n} token(s) of {args.name}")


def _scope(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if args.table:
        from paimon_meta.catalog.metastore import split_identifier

        return split_identifier(args.table)
    return args.database, None


def _grant(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    db, table = _scope(args)
    new = _principals(ctx).grant(
        args.name, Privilege(args.privilege), database=db, table=table, granted_by=operator_identity()
    )
    where = "the catalog" if db is None else db if table is None else f"{db}.{table}"
    text = f"granted {args.privilege} on {where} to {args.name}" if new else "already granted"
    return _output({"principal": args.name, "privilege": args.privilege, "scope": where, "new": new}, text)


def _revoke(ctx: _Context, args: argparse.Namespace) -> Output:
    db, table = _scope(args)
    done = _principals(ctx).revoke(args.name, Privilege(args.privilege), database=db, table=table)
    where = "the catalog" if db is None else db if table is None else f"{db}.{table}"
    text = f"revoked {args.privilege} on {where} from {args.name}" if done else "no such grant"
    return _output(
        {"principal": args.name, "privilege": args.privilege, "scope": where, "revoked": done}, text
    )


def _list(ctx: _Context, args: argparse.Namespace) -> Output:
    rows = _principals(ctx).list()
    data = [
        {
            "principal": p.name,
            "created_at": p.created_at.isoformat(),
            "created_by": p.created_by,
            "grants": [{"privilege": g.privilege.value, "scope": str(g.scope)} for g in p.grants],
            "tokens": [
                {"prefix": t[0], "created_at": t[1].isoformat(), "revoked_at": t[2] and t[2].isoformat()}
                for t in p.tokens
            ],
        }
        for p in rows
    ]
    lines = []
    for d in data:
        grants = ", ".join(f"{g['privilege']}@{g['scope']}" for g in d["grants"]) or "-"
        live = sum(1 for t in d["tokens"] if not t["revoked_at"])
        lines.append(f"{d['principal']:<24} grants: {grants}  tokens: {live} live")
    return _output(data, "\n".join(lines) or "(no principals)")


def _serve(ctx: _Context, args: argparse.Namespace) -> Output:
    import os

    from paimon_meta.catalog.metastore import ENV_WAREHOUSE
    from paimon_meta.service.server import serve
    from paimon_meta.service.state import ServiceSettings

    logging.getLogger("paimon_meta").setLevel(args.log_level.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("paimon_meta").addHandler(handler)
    logging.getLogger("paimon_meta").propagate = False
    settings = ServiceSettings(
        metastore_url=ctx.metastore_url(),
        warehouse=args.warehouse or os.environ.get(ENV_WAREHOUSE),
        options=ctx.options(),
        catalog_name=args.catalog_name,
        worker_threads=args.workers,
        drain_seconds=args.drain_seconds,
        max_body_bytes=args.max_body_bytes,
        group_max_commits=args.group_max_commits,
        group_max_hold_seconds=args.group_max_hold_ms / 1000,
        group_max_batch=args.group_max_batch,
        body_timeout_seconds=args.body_timeout_seconds,
        header_timeout_seconds=args.header_timeout_seconds,
        max_header_bytes=args.max_header_bytes,
        keep_alive_seconds=args.keep_alive_seconds,
        max_connections=args.max_connections,
        auth_failure_burst=args.auth_failure_burst,
        auth_failure_refill_seconds=args.auth_failure_refill_seconds,
        metrics_cache_seconds=args.metrics_cache_seconds,
    )
    serve(settings, host=args.host, port=args.port, log_level=args.log_level)
    return _output({"stopped": True}, "")


def _rollback(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.rollback import rollback

    report = rollback(
        ctx.catalog(),
        args.table,
        snapshot_id=args.to_snapshot,
        tag=args.to_tag,
        from_snapshot=args.from_snapshot,
    )
    text = (
        f"{report.table}: rolled back from snapshot {report.rolled_back_from} to {report.target_snapshot_id} "
        f"(removed {len(report.removed_snapshots)} snapshots, {len(report.deleted_tags)} tags; "
        f"timeline {report.timeline})"
    )
    return _output(report.to_dict(), text)


def _tags(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops import tags as tag_ops
    from paimon_meta.table.tags import TagManager

    if args.create:
        ctx.require_database("tags --create")
        snap = tag_ops.create_tag(ctx.catalog(), args.table, args.create, args.snapshot)
        return _output(
            {"tag": args.create, "snapshot_id": snap.id}, f"tag {args.create} -> snapshot {snap.id}"
        )
    if args.delete:
        ctx.require_database("tags --delete")
        sid = tag_ops.delete_tag(ctx.catalog(), args.table, args.delete)
        return _output(
            {"tag": args.delete, "snapshot_id": sid}, f"deleted tag {args.delete} (snapshot {sid})"
        )
    # Tags are files of the table: listed on storage, whichever catalog opened it.
    table = ctx.table(args.table)
    manager = TagManager(table.file_io, table.path)
    data = [{"tag": n, "snapshot_id": manager.get(n).snapshot.id} for n in manager.names()]
    return _output(
        data, "\n".join(f"{d['tag']:<24} snapshot {d['snapshot_id']}" for d in data) or "(no tags)"
    )
