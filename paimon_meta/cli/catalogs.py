"""``paimon-meta catalogs ...``: the catalogs of the metastore (``paimon_meta.metastore.catalogs``).

``create NAME --warehouse URI [-o KEY=VALUE]``: ``-o s3.endpoint``/``s3.region``/``s3.path-style-access``
set the storage profile, every other ``-o`` is one of the catalog's options (its tables' defaults, or the
server's own storage keys: stored, never shown). ``show`` and ``list`` name the secrets that are set,
never their values. ``alter`` changes only what its own flags name (``--set-warehouse``, ``--set``,
``--unset``, ``--sts-*``), so a ``$PAIMON_META_WAREHOUSE`` or ``$PAIMON_META_OPTIONS`` of the operator's
shell never moves or rewrites a catalog.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output

if TYPE_CHECKING:
    from paimon_meta.metastore.catalogs import CatalogInfo, Catalogs


def register(commands: Commands) -> None:
    cs = commands.group("catalogs", "the catalogs of the metastore: warehouse, storage profile, options")
    p = cs.action(
        "create",
        _create,
        "create a catalog on a warehouse no other catalog's overlaps (--warehouse URI; -o s3.endpoint, "
        "s3.region, s3.path-style-access: its storage profile; other -o: its options)",
    )
    p.add_argument("name", help="the catalog's name (what clients pass as their warehouse)")
    p.add_argument(
        "--catalog-key",
        metavar="KEY",
        help="the key its rows and lock ids are stored under (default: NAME; a key rows already use, e.g. "
        "jdbc, makes the catalog hold them)",
    )
    _sts(p)
    p = cs.action("list", _list, "the catalogs (secrets: which are set, never their values)")
    p = cs.action("show", _show, "one catalog (secrets: which are set, never their values)")
    p.add_argument("name", help="the catalog's name")
    p = cs.action("alter", _alter, "change a catalog's warehouse (while empty), profile, STS role or options")
    p.add_argument("name", help="the catalog's name")
    p.add_argument(
        "--set-warehouse", metavar="URI", help="move it to this warehouse (refused while it holds databases)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set an option (s3.endpoint, s3.region, s3.path-style-access: the storage profile; repeatable)",
    )
    p.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="remove an option (repeatable)"
    )
    _sts(p)
    p.add_argument("--clear-sts", action="store_true", help="remove the STS role and external id")
    p = cs.action("drop", _drop, "drop a catalog (refused while it holds databases; storage is not touched)")
    p.add_argument("name", help="the catalog's name")
    p.add_argument(
        "--cascade",
        action="store_true",
        help="also unregister its databases, tables, views and functions (their files stay)",
    )


def _sts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sts-role-arn", metavar="ARN", help="the role assumed to vend its clients credentials")
    p.add_argument(
        "--sts-external-id", metavar="ID", help="the external id the role's trust policy requires (secret)"
    )


@contextmanager
def _catalogs(ctx: Context) -> Iterator[Catalogs]:
    """The metastore's catalogs, on an engine of its own (no warehouse is opened: ``--warehouse`` is the
    catalog's here), the schema migrated as every database command does."""
    from paimon_meta.db.engine import make_engine
    from paimon_meta.db.migrate import upgrade
    from paimon_meta.errors import ValidationError
    from paimon_meta.metastore.catalogs import Catalogs

    given = getattr(ctx.args, "catalog", None)
    if given:
        # These commands name their catalog as an argument; a --catalog beside it is not silently dropped.
        raise ValidationError(
            f"paimon-meta catalogs manages every catalog: name it as the command's argument, not --catalog "
            f"{given!r}",
            option="--catalog",
        )
    engine = make_engine(ctx.metastore_url())
    try:
        upgrade(engine)
        yield Catalogs(engine)
    finally:
        engine.dispose()


def _text(info: CatalogInfo) -> str:
    shown = info.public()
    storage = ", ".join(f"{k}={v}" for k, v in shown["storage"].items() if v is not None) or "-"
    options = ", ".join(f"{k}={v}" for k, v in shown["options"].items()) or "-"
    return "\n".join(
        [
            f"catalog      {info.name}",
            f"catalog key  {info.catalog_key}",
            f"warehouse    {info.warehouse}",
            f"storage      {storage}",
            f"sts role     {info.sts_role_arn or '-'}",
            f"options      {options}",
            f"secrets set  {', '.join(shown['secrets_set']) or '-'}",
            f"created      {shown['created_at']} by {info.created_by or '-'}",
        ]
    )


def _create(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.errors import ValidationError
    from paimon_meta.metastore.catalogs import split_profile
    from paimon_meta.ops.common import operator_identity

    if not args.warehouse:
        raise ValidationError("catalogs create needs --warehouse URI", option="--warehouse")
    profile, options = split_profile(ctx.options())
    with _catalogs(ctx) as catalogs:
        info = catalogs.create(
            args.name,
            args.warehouse,
            catalog_key=args.catalog_key,
            storage=profile,
            sts_role_arn=args.sts_role_arn,
            sts_external_id=args.sts_external_id,
            options=options,
            created_by=operator_identity(),
        )
    return Output(info.public(), f"catalog {info.name} created\n{_text(info)}")


def _list(ctx: Context, args: argparse.Namespace) -> Output:
    with _catalogs(ctx) as catalogs:
        infos = catalogs.list_all()
    lines = [f"{i.name:<24} key {i.catalog_key:<16} {i.warehouse}" for i in infos]
    return Output([i.public() for i in infos], "\n".join(lines) or "(no catalogs)")


def _show(ctx: Context, args: argparse.Namespace) -> Output:
    with _catalogs(ctx) as catalogs:
        info = catalogs.get(args.name)
        databases = catalogs.databases(args.name)
    data: dict[str, Any] = {**info.public(), "databases": databases}
    return Output(data, f"{_text(info)}\ndatabases    {', '.join(databases) or '-'}")


def _alter(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.errors import ValidationError
    from paimon_meta.metastore.catalogs import split_profile

    pairs: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"--set {item!r} is not KEY=VALUE", option="--set")
        pairs[key.strip()] = value.strip()
    profile, options = split_profile(pairs)
    with _catalogs(ctx) as catalogs:
        info = catalogs.alter(
            args.name,
            warehouse=args.set_warehouse,
            storage=profile,
            sts_role_arn=args.sts_role_arn,
            sts_external_id=args.sts_external_id,
            clear_sts=args.clear_sts,
            set_options=options,
            remove_options=args.unset,
        )
    return Output(info.public(), f"catalog {info.name} altered\n{_text(info)}")


def _drop(ctx: Context, args: argparse.Namespace) -> Output:
    with _catalogs(ctx) as catalogs:
        held = catalogs.drop(args.name, cascade=args.cascade)
    gone = f" with its databases {', '.join(held)} (their files stay)" if held else ""
    return Output(
        {"catalog": args.name, "dropped": True, "databases": held}, f"catalog {args.name} dropped{gone}"
    )
