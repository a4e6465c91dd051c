"""``paimon-meta db upgrade|current``: the metastore schema (Alembic migrations)."""

from __future__ import annotations

import argparse

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output


def register(commands: Commands) -> None:
    db = commands.group("db", "metastore schema (Alembic migrations)")
    db.action("upgrade", _db_upgrade, "migrate the metastore to the latest revision")
    db.action("current", _db_current, "show the metastore's revision")


def _db_upgrade(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.migrate import current, heads, upgrade

    url = ctx.metastore_url()
    before = current(url)
    upgrade(url)
    after = current(url)
    data = {"before": before, "current": after, "head": heads()}
    return Output(data, f"metastore schema: {before or '(empty)'} -> {after}")


def _db_current(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.migrate import current, heads

    rev, head = current(ctx.metastore_url()), heads()
    data = {"current": rev, "head": head, "up_to_date": rev is not None and [rev] == head}
    note = "up to date" if data["up_to_date"] else "run `paimon-meta db upgrade`"
    return Output(data, f"current {rev or '(none)'}, head {', '.join(head)} ({note})")
