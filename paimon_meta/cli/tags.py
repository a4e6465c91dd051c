"""``paimon-meta tags|rollback``: a table's tags (listed on storage, also through a commit service),
and rolling a table back to a snapshot or tag."""

from __future__ import annotations

import argparse

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output


def register(commands: Commands) -> None:
    p = commands.add(
        "rollback", _rollback, "roll a table back to a snapshot or tag (later snapshots are removed)"
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-snapshot", type=int, metavar="ID", help="roll back to this snapshot")
    target.add_argument("--to-tag", metavar="TAG", help="roll back to the snapshot this tag names")
    p.add_argument(
        "--from-snapshot", type=int, metavar="ID", help="refuse unless this is the latest snapshot"
    )

    p = commands.add(
        "tags",
        _tags,
        "list a table's tags, or create (--create NAME) / delete (--delete NAME) one",
        remote=True,
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--create", metavar="NAME", help="create a tag (of --snapshot, default the latest)")
    action.add_argument("--delete", metavar="NAME", help="delete a tag")
    p.add_argument(
        "--snapshot", type=int, metavar="ID", help="with --create: tag this snapshot (default latest)"
    )


def _rollback(ctx: Context, args: argparse.Namespace) -> Output:
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
    return Output(report.to_dict(), text)


def _tags(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops import tags as tag_ops
    from paimon_meta.table.tags import TagManager

    if args.create:
        ctx.require_database("tags --create")
        snap = tag_ops.create_tag(ctx.catalog(), args.table, args.create, args.snapshot)
        return Output(
            {"tag": args.create, "snapshot_id": snap.id}, f"tag {args.create} -> snapshot {snap.id}"
        )
    if args.delete:
        ctx.require_database("tags --delete")
        sid = tag_ops.delete_tag(ctx.catalog(), args.table, args.delete)
        return Output({"tag": args.delete, "snapshot_id": sid}, f"deleted tag {args.delete} (snapshot {sid})")
    # Tags are files of the table: listed on storage, whichever catalog opened it.
    table = ctx.table(args.table)
    manager = TagManager(table.file_io, table.path)
    data = [{"tag": n, "snapshot_id": manager.get(n).snapshot.id} for n in manager.names()]
    return Output(data, "\n".join(f"{d['tag']:<24} snapshot {d['snapshot_id']}" for d in data) or "(no tags)")
