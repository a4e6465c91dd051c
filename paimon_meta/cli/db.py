"""``paimon-meta db upgrade|current|relocate|embedded``: the metastore schema (Alembic migrations), its
locations after a restore, and the embedded Postgres of ``make run``."""

from __future__ import annotations

import argparse

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output
from paimon_meta.errors import ValidationError


def register(commands: Commands) -> None:
    db = commands.group("db", "metastore schema (Alembic migrations)")
    p = db.action("upgrade", _db_upgrade, "migrate the metastore to the latest revision")
    p.add_argument(
        "--lock-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long one migration statement waits for a table lock held by live replicas before its "
        "revision rolls back and is retried (default 2; 0: wait without bound)",
    )
    p.add_argument(
        "--retry-for",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to keep retrying revisions that lost to live traffic (default 300)",
    )
    db.action("current", _db_current, "show the metastore's revision")
    p = db.action(
        "relocate",
        _db_relocate,
        "rewrite the registry's locations at or below FROM to below TO (a restored metastore whose warehouse "
        "was copied elsewhere; docs/OPERATIONS.md)",
    )
    p.add_argument("old", metavar="FROM", help="the old warehouse root (or any location prefix)")
    p.add_argument("new", metavar="TO", help="where those files are now")
    p.add_argument("--dry-run", action="store_true", help="list what would change, change nothing")
    embedded = db.group(
        "embedded", "the embedded Postgres under $PAIMON_META_HOME (make run's metastore; `make stop`)"
    )
    embedded.action("status", _embedded_status, "whether it runs, with its pid and port")
    p = embedded.action("stop", _embedded_stop, "stop it (its data stays for the next start)")
    p.add_argument(
        "--mode",
        choices=["smart", "fast", "immediate"],
        default="fast",
        help="pg_ctl's stop mode: smart waits for clients, fast ends their sessions, immediate aborts",
    )


def _db_upgrade(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.migrate import (
        DEFAULT_LOCK_TIMEOUT_SECONDS,
        DEFAULT_RETRY_FOR_SECONDS,
        current,
        heads,
        upgrade,
    )

    url = ctx.metastore_url()
    before = current(url)
    lock_timeout = DEFAULT_LOCK_TIMEOUT_SECONDS if args.lock_timeout is None else args.lock_timeout
    retry_for = DEFAULT_RETRY_FOR_SECONDS if args.retry_for is None else args.retry_for
    if lock_timeout < 0 or retry_for < 0:
        raise ValidationError("--lock-timeout and --retry-for take seconds >= 0")
    upgrade(url, lock_timeout_seconds=lock_timeout, retry_for_seconds=retry_for)
    after = current(url)
    data = {"before": before, "current": after, "head": heads()}
    return Output(data, f"metastore schema: {before or '(empty)'} -> {after}")


def _db_current(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.migrate import current, heads

    rev, head = current(ctx.metastore_url()), heads()
    data = {"current": rev, "head": head, "up_to_date": rev is not None and [rev] == head}
    note = "up to date" if data["up_to_date"] else "run `paimon-meta db upgrade`"
    return Output(data, f"current {rev or '(none)'}, head {', '.join(head)} ({note})")


def _db_relocate(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.cli import render
    from paimon_meta.db.engine import make_engine
    from paimon_meta.metastore.registry import relocate

    engine = make_engine(ctx.metastore_url())
    try:
        moved = relocate(engine, args.old, args.new, dry_run=args.dry_run)
    finally:
        engine.dispose()
    data = [render.jsonable(m) for m in moved]
    verb = "would relocate" if args.dry_run else "relocated"
    head = f"{verb} {len(moved)} locations from {args.old.rstrip('/')} to {args.new.rstrip('/')}"
    cols: list[render.Column] = ["kind", ("catalog_key", "catalog"), "name", "old", "new"]
    return Output(data, head + ("\n" + render.table(data, cols) if moved else ""))


def _embedded_status(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.embedded import default_home, embedded_status

    home = default_home()
    running = embedded_status(home)
    data = {"home": str(home), "running": running is not None}
    if running is None:
        return Output(data, f"no embedded Postgres runs under {home}")
    data.update(pid=running[0], port=running[1])
    return Output(data, f"the embedded Postgres under {home} runs: pid {running[0]}, port {running[1]}")


def _embedded_stop(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.embedded import default_home, stop_embedded_postgres

    home = default_home()
    stopped = stop_embedded_postgres(home, mode=args.mode)
    verb = "stopped the embedded Postgres" if stopped else "no embedded Postgres ran"
    return Output({"home": str(home), "stopped": stopped}, f"{verb} under {home}")
