"""``paimon-meta principals ...``: the commit service's principals, their tokens and grants.

Names (``paimon_meta.metastore.principals``): ``alice`` signs in with static tokens; ``user:<claim>`` is
created when the identity provider signs someone in (OIDC); ``group:<name>`` (``create-group``) holds
grants for the users whose groups claim lists ``<name>``. Grant to any of them by that name.

A principal is service-wide; its grants are per catalog: ``grant --catalog NAME`` grants in that catalog
of the metastore (``paimon-meta catalogs``), without it in the service's default catalog (the one ``serve
--catalog-name`` serves). ``grant-service create_catalog`` lets a principal create catalogs through the
admin API.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output
from paimon_meta.db.models import Privilege, ServicePrivilege

if TYPE_CHECKING:
    from paimon_meta.metastore.principals import PrincipalInfo, Principals


def register(commands: Commands) -> None:
    ps = commands.group("principals", "service principals, their tokens and grants")
    p = ps.action("create", _create, "create a principal and print its token (shown once)")
    p.add_argument("name", help="the principal's name (user:..., a service name)")
    _expires_in(p)
    p = ps.action("token", _token, "issue another token for a principal (shown once)")
    p.add_argument("name", help="the principal's name (user:..., a service name)")
    _expires_in(p)
    p = ps.action(
        "create-group",
        _create_group,
        "create principal group:NAME (no token) whose grants users signed in with NAME in their groups "
        "claim get",
    )
    p.add_argument("name", help="the group as the identity provider's groups claim names it")
    p = ps.action("revoke-token", _revoke_token, "revoke a principal's tokens (or one by prefix)")
    p.add_argument("name", help="the principal's name (user:..., a service name)")
    p.add_argument("--prefix", help="only the token starting with this (as `principals list` shows)")
    for action, handler, text in (
        ("grant", _grant, "grant read|write|admin on the catalog, a database or a table"),
        ("revoke", _revoke, "revoke exactly such a grant"),
    ):
        p = ps.action(action, handler, text)
        p.add_argument("name", help="the principal's name (user:..., a service name)")
        p.add_argument(
            "privilege",
            choices=[v.value for v in Privilege],
            help="read, write (implies read) or admin (create/alter/drop; implies write)",
        )
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--database", metavar="DB", help="on one database (default: the whole catalog)")
        scope.add_argument("--table", metavar="DB.T", help="on one table (default: the whole catalog)")
        # ``--catalog NAME`` (a global flag): the catalog of the metastore the grant is in; without
        # it, the service's default catalog.
    for action, handler, text in (
        ("grant-service", _grant_service, "grant a service-level privilege (create_catalog)"),
        ("revoke-service", _revoke_service, "revoke a service-level privilege"),
    ):
        p = ps.action(action, handler, text)
        p.add_argument("name", help="the principal's name (user:..., a service name)")
        p.add_argument(
            "privilege",
            choices=[v.value for v in ServicePrivilege],
            help="create_catalog: create catalogs through the admin API (and be admin of those created)",
        )
    ps.action("list", _list, "principals with their grants and tokens (prefixes)")


def _expires_in(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--expires-in",
        metavar="DURATION",
        help="the token stops working after this long, a Paimon duration (e.g. 90 d, 12 h; default: "
        "never, until revoked)",
    )


def _lifetime(args: argparse.Namespace) -> timedelta | None:
    """``--expires-in`` as a lifetime (``ValidationError`` naming the flag for one that is not a
    duration with its unit, or not positive)."""
    if args.expires_in is None:
        return None
    from paimon_meta.errors import ValidationError
    from paimon_meta.model.options import parse_duration_ms

    text = args.expires_in.strip()
    # A bare number is milliseconds to Paimon: too easy to mistake for seconds or days here.
    if text.replace(" ", "").isdigit():
        raise ValidationError(f"--expires-in {text!r} needs a unit (s, min, h, d)", option="--expires-in")
    ms = parse_duration_ms(text, key="--expires-in")
    if ms <= 0:
        raise ValidationError(f"--expires-in {text!r} must be positive", option="--expires-in")
    return timedelta(milliseconds=ms)


def _expiry_text(lifetime: timedelta | None) -> str:
    return "" if lifetime is None else f", expires in {lifetime}"


def _principals(ctx: Context) -> Principals:
    from paimon_meta.metastore.principals import Principals

    return Principals(ctx.engine())


def _create(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    lifetime = _lifetime(args)
    token = _principals(ctx).create(args.name, created_by=operator_identity(), expires_in=lifetime)
    return Output(
        _token_data(args.name, token, lifetime),
        f"principal {args.name} created; token (shown once{_expiry_text(lifetime)}):\n{token}",
    )


def _token(ctx: Context, args: argparse.Namespace) -> Output:
    lifetime = _lifetime(args)
    token = _principals(ctx).issue_token(args.name, expires_in=lifetime)
    return Output(
        _token_data(args.name, token, lifetime),
        f"new token for {args.name} (shown once{_expiry_text(lifetime)}):\n{token}",
    )


def _token_data(name: str, token: str, lifetime: timedelta | None) -> dict[str, Any]:
    return {
        "principal": name,
        "token": token,
        "expires_in_seconds": None if lifetime is None else lifetime.total_seconds(),
    }


def _create_group(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    name = _principals(ctx).create_group(args.name, created_by=operator_identity())
    return Output(
        {"principal": name},
        f"principal {name} created (a group: grant to it; users whose groups claim lists "
        f"{args.name!r} get its grants)",
    )


def _revoke_token(ctx: Context, args: argparse.Namespace) -> Output:
    n = _principals(ctx).revoke_tokens(args.name, prefix=args.prefix)
    return Output({"principal": args.name, "revoked": n}, f"revoked {n} token(s) of {args.name}")


def _scope(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if args.table:
        from paimon_meta.model.identifier import split_identifier

        return split_identifier(args.table)
    return args.database, None


def _catalog_key(ctx: Context, args: argparse.Namespace) -> str | None:
    """The catalog key ``--catalog`` names (``CatalogNotFoundError`` for none), None without it."""
    name = ctx.catalog_name()
    if name is None:
        return None
    from paimon_meta.metastore.catalogs import Catalogs

    return Catalogs(ctx.engine()).get(name).catalog_key


def _where(ctx: Context, db: str | None, table: str | None) -> str:
    name = ctx.catalog_name()
    if name is None:
        return "the catalog" if db is None else db if table is None else f"{db}.{table}"
    if db is None:
        return f"the whole catalog {name}"
    return f"{db if table is None else f'{db}.{table}'} in catalog {name}"


def _grant(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    db, table = _scope(args)
    # the grant row (replicas of the previous release read it) and its bundle's assignments (migration 0022)
    new = _principals(ctx).grant(
        args.name,
        Privilege(args.privilege),
        database=db,
        table=table,
        granted_by=operator_identity(),
        catalog_key=_catalog_key(ctx, args),
    )
    where = _where(ctx, db, table)
    text = f"granted {args.privilege} on {where} to {args.name}" if new else "already granted"
    return Output({"principal": args.name, "privilege": args.privilege, "scope": where, "new": new}, text)


def _revoke(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.metastore.principals import revoke_privilege
    from paimon_meta.ops.common import operator_identity

    db, table = _scope(args)
    done = revoke_privilege(
        ctx.engine(),
        args.name,
        Privilege(args.privilege),
        database=db,
        table=table,
        revoked_by=operator_identity(),
        catalog_key=_catalog_key(ctx, args),
    )
    where = _where(ctx, db, table)
    text = f"revoked {args.privilege} on {where} from {args.name}" if done else "no such grant"
    return Output(
        {"principal": args.name, "privilege": args.privilege, "scope": where, "revoked": done}, text
    )


def _grant_service(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    new = _principals(ctx).grant_service(
        args.name, ServicePrivilege(args.privilege), granted_by=operator_identity()
    )
    text = f"granted {args.privilege} to {args.name}" if new else "already granted"
    return Output({"principal": args.name, "privilege": args.privilege, "new": new}, text)


def _revoke_service(ctx: Context, args: argparse.Namespace) -> Output:
    done = _principals(ctx).revoke_service(args.name, ServicePrivilege(args.privilege))
    text = f"revoked {args.privilege} from {args.name}" if done else "no such grant"
    return Output({"principal": args.name, "privilege": args.privilege, "revoked": done}, text)


def _list(ctx: Context, args: argparse.Namespace) -> Output:
    principals = _principals(ctx).list()
    data = [_principal_data(p) for p in principals]
    now = datetime.now(UTC)
    lines = []
    for p, d in zip(principals, data, strict=True):
        grants = (
            ", ".join(
                f"{g['privilege']}@{g['scope']}" + ("" if g["catalog"] is None else f"@{g['catalog']}")
                for g in d["grants"]
            )
            or "-"
        )
        live = sum(
            1 for t in p.tokens if t.revoked_at is None and (t.expires_at is None or t.expires_at > now)
        )
        lines.append(f"{d['principal']:<24} grants: {grants}  tokens: {live} live")
    return Output(data, "\n".join(lines) or "(no principals)")


def _principal_data(p: PrincipalInfo) -> dict[str, Any]:
    """One principal of ``principals list`` as JSON: its grants and its tokens (by prefix)."""
    return {
        "principal": p.name,
        "created_at": p.created_at.isoformat(),
        "created_by": p.created_by,
        # catalog: the catalog key the grant applies in (null: the service's default catalog)
        "grants": [
            {"privilege": g.privilege.value, "scope": str(g.scope), "catalog": g.catalog} for g in p.grants
        ],
        "tokens": [
            {
                "prefix": t.prefix,
                "created_at": t.created_at.isoformat(),
                "revoked_at": t.revoked_at and t.revoked_at.isoformat(),
                "expires_at": t.expires_at and t.expires_at.isoformat(),
            }
            for t in p.tokens
        ],
    }
