"""``paimon-meta locks list|release``: the metastore's lock rows (ours and Java's), and releasing one; with
``--metastore http(s)://`` through the commit service (the rows of the tables the token administers)."""

from __future__ import annotations

import argparse

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import EPILOG, Context, Output

_LOCK_COLUMNS: list[render.Column] = [
    ("lock_id", "key"),
    "kind",
    "owner",
    ("fencing_token", "token"),
    ("age_seconds", "held s"),
    ("lease_left_seconds", "lease left s"),
    ("heartbeat_age_seconds", "heartbeat s ago"),
    "state",
]


def register(commands: Commands) -> None:
    locks = commands.group("locks", "list or release metastore locks (ours and Java's)")
    p = locks.action(
        "list",
        _locks_list,
        "every lock row: owner, token, time held, lease left, heartbeat, state (live, heartbeat_overdue: the "
        "holder lost its metastore connection, froze or died; stale; java)",
    )
    p.set_defaults(remote=True)
    p.add_argument("--stale", action="store_true", help="only expired rows")
    p.add_argument(
        "--overdue",
        action="store_true",
        help="only rows whose holder has not renewed them for more than half their lease",
    )
    p = locks.action(
        "release",
        _locks_release,
        "delete a lock row (refuses a live lock unless --force); recorded with operator and reason",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(remote=True)
    p.add_argument("key", metavar="KEY", help="lock id, e.g. jdbc.db.table")
    p.add_argument("--reason", required=True, help="why (stored in the lock event log)")
    p.add_argument("--force", action="store_true", help="release even a live, heartbeating lock")


def _locks_list(ctx: Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is not None:
        rows = [
            r
            for r in remote.list_locks()
            if (not args.stale and not args.overdue)
            or (args.stale and r["stale"])
            or (args.overdue and r["heartbeat_overdue"])
        ]
        return Output(rows, render.table(rows, _LOCK_COLUMNS))
    from paimon_meta.ops.locks import list_locks

    found = list_locks(ctx.catalog().lock, stale_only=args.stale, overdue_only=args.overdue)
    data = [render.jsonable(r) for r in found]
    return Output(data, render.table(data, _LOCK_COLUMNS))


def _locks_release(ctx: Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is not None:
        result = remote.release_lock(args.key, reason=args.reason, force=args.force)
    else:
        from paimon_meta.ops.locks import release_lock

        released = release_lock(ctx.catalog().lock, args.key, reason=args.reason, force=args.force)
        result = render.jsonable(released.to_dict())
    held = result["lock"]
    how = "forced" if result["forced"] else "stale"
    text = (
        f"released {held['lock_id']} ({how}; was held by {held['owner'] or 'a Java writer'}, "
        f"token {render.cell(held['fencing_token'])}, held {held['age_seconds']:.1f}s) "
        f"by {result['operator']}: {result['reason']}"
    )
    return Output(result, text)
