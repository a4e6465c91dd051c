"""``paimon-meta principals ...``: the commit service's principals, their tokens and grants."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output
from paimon_meta.db.models import Privilege

if TYPE_CHECKING:
    from paimon_meta.metastore.principals import PrincipalInfo, Principals


def register(commands: Commands) -> None:
    ps = commands.group("principals", "service principals, their tokens and grants")
    p = ps.action("create", _create, "create a principal and print its token (shown once)")
    p.add_argument("name")
    p = ps.action("token", _token, "issue another token for a principal (shown once)")
    p.add_argument("name")
    p = ps.action("revoke-token", _revoke_token, "revoke a principal's tokens (or one by prefix)")
    p.add_argument("name")
    p.add_argument("--prefix", help="only the token starting with this (as `principals list` shows)")
    for action, handler, text in (
        ("grant", _grant, "grant read|write|admin on the catalog, a database or a table"),
        ("revoke", _revoke, "revoke exactly such a grant"),
    ):
        p = ps.action(action, handler, text)
        p.add_argument("name")
        p.add_argument("privilege", choices=[v.value for v in Privilege])
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--database", metavar="DB")
        scope.add_argument("--table", metavar="DB.T")
    ps.action("list", _list, "principals with their grants and tokens (prefixes)")


def _principals(ctx: Context) -> Principals:
    from paimon_meta.metastore.principals import Principals

    return Principals(ctx.catalog().engine)


def _create(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    token = _principals(ctx).create(args.name, created_by=operator_identity())
    return Output(
        {"principal": args.name, "token": token},
        f"principal {args.name} created; token (shown once):\n{token}",
    )


def _token(ctx: Context, args: argparse.Namespace) -> Output:
    token = _principals(ctx).issue_token(args.name)
    return Output(
        {"principal": args.name, "token": token}, f"new token for {args.name} (shown once):\n{token}"
    )


def _revoke_token(ctx: Context, args: argparse.Namespace) -> Output:
    n = _principals(ctx).revoke_tokens(args.name, prefix=args.prefix)
    return Output({"principal": args.name, "revoked": n}, f"revoked {n} token(s) of {args.name}")


def _scope(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if args.table:
        from paimon_meta.model.identifier import split_identifier

        return split_identifier(args.table)
    return args.database, None


def _grant(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    db, table = _scope(args)
    new = _principals(ctx).grant(
        args.name, Privilege(args.privilege), database=db, table=table, granted_by=operator_identity()
    )
    where = "the catalog" if db is None else db if table is None else f"{db}.{table}"
    text = f"granted {args.privilege} on {where} to {args.name}" if new else "already granted"
    return Output({"principal": args.name, "privilege": args.privilege, "scope": where, "new": new}, text)


def _revoke(ctx: Context, args: argparse.Namespace) -> Output:
    db, table = _scope(args)
    done = _principals(ctx).revoke(args.name, Privilege(args.privilege), database=db, table=table)
    where = "the catalog" if db is None else db if table is None else f"{db}.{table}"
    text = f"revoked {args.privilege} on {where} from {args.name}" if done else "no such grant"
    return Output(
        {"principal": args.name, "privilege": args.privilege, "scope": where, "revoked": done}, text
    )


def _list(ctx: Context, args: argparse.Namespace) -> Output:
    data = [_principal_data(p) for p in _principals(ctx).list()]
    lines = []
    for d in data:
        grants = ", ".join(f"{g['privilege']}@{g['scope']}" for g in d["grants"]) or "-"
        live = sum(1 for t in d["tokens"] if not t["revoked_at"])
        lines.append(f"{d['principal']:<24} grants: {grants}  tokens: {live} live")
    return Output(data, "\n".join(lines) or "(no principals)")


def _principal_data(p: PrincipalInfo) -> dict[str, Any]:
    """One principal of ``principals list`` as JSON: its grants and its tokens (by prefix)."""
    return {
        "principal": p.name,
        "created_at": p.created_at.isoformat(),
        "created_by": p.created_by,
        "grants": [{"privilege": g.privilege.value, "scope": str(g.scope)} for g in p.grants],
        "tokens": [
            {"prefix": t[0], "created_at": t[1].isoformat(), "revoked_at": t[2] and t[2].isoformat()}
            for t in p.tokens
        ],
    }
