"""Create and delete tags under the table lock, each recorded as a maintenance run.

A tag keeps a snapshot (and so its files) alive past expiration. Creating one takes the table lock so
expiration (which takes it too) cannot delete the snapshot between reading it and writing the tag;
deleting one takes it so no expiration is deciding on the tag's snapshot meanwhile. The data files that
only the deleted tag kept become orphans, which ``remove-orphan-files`` deletes once they are old.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import SnapshotNotFoundError
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops.common import maintenance_run, resolve_table, table_lock
from paimon_meta.table.tags import TagManager, validate_tag_name

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable


def create_tag(
    catalog: MetastoreCatalog,
    identifier: str,
    name: str,
    snapshot_id: int | None = None,
    *,
    principal: str | None = None,
    time_retained_ms: int | None = None,
    reason: str | None = None,
) -> Snapshot:
    """Tag ``snapshot_id`` (default: the latest snapshot) as ``name``; returns the tagged snapshot. With
    ``time_retained_ms`` the tag expires that long after now (snapshot expiration deletes it).
    ``reason``: why (the console asks for one), recorded in the run's settings.

    Raises:
        ValidationError: a bad tag name.
        SnapshotNotFoundError: no such snapshot (or, without an id, no snapshot at all).
        TagAlreadyExistsError: the name is taken.
    """
    validate_tag_name(name)
    row, table = resolve_table(catalog, identifier)
    settings: dict[str, object] = {
        "tag": name,
        "snapshot_id": snapshot_id,
        "time_retained_ms": time_retained_ms,
    }
    if reason is not None:
        settings["reason"] = reason
    with (
        maintenance_run(
            catalog,
            row,
            MaintenanceOperation.CREATE_TAG,
            dry_run=False,
            settings=settings,
            principal=principal,
        ) as run,
        table_lock(catalog, row, "create-tag"),
    ):
        snapshots = table.snapshot_manager
        sid = snapshots.latest_snapshot_id() if snapshot_id is None else snapshot_id
        if sid is None or not snapshots.snapshot_exists(sid):
            raise SnapshotNotFoundError(
                f"table {row.identifier} has no snapshot {sid if sid is not None else '(none yet)'}",
                snapshot_id=sid,
            )
        snapshot = snapshots.snapshot(sid)
        TagManager(table.file_io, table.path).create(name, snapshot, time_retained_ms=time_retained_ms)
        run.record(MaintenanceEventType.FINISHED, {"tag": name, "snapshot_id": sid})
    return snapshot


def delete_tag(
    catalog: MetastoreCatalog,
    identifier: str,
    name: str,
    *,
    principal: str | None = None,
    reason: str | None = None,
) -> int:
    """Delete tag ``name``; returns the id of the snapshot it kept. ``TagNotFoundError`` if absent.
    ``reason``: why, recorded in the run's settings."""
    validate_tag_name(name)
    row, table = resolve_table(catalog, identifier)
    with (
        maintenance_run(
            catalog,
            row,
            MaintenanceOperation.DELETE_TAG,
            dry_run=False,
            settings={"tag": name} if reason is None else {"tag": name, "reason": reason},
            principal=principal,
        ) as run,
        table_lock(catalog, row, "delete-tag"),
    ):
        snapshot = TagManager(table.file_io, table.path).delete(name)
        run.record(MaintenanceEventType.FINISHED, {"tag": name, "snapshot_id": snapshot.id})
    return snapshot.id


def tags_of(catalog: MetastoreCatalog, identifier: str) -> TagManager:
    """The tags of table ``identifier`` on storage, where its registry row places it (the table itself
    is not loaded). ``TableNotFoundError`` if there is no such table; ``UnsupportedError`` naming the type
    for a table kept as metadata only (it has no tags)."""
    location = catalog.paimon_location(catalog.table_row(identifier))
    return TagManager(catalog.table_file_io(location), location)


def expire_tags(table: FileStoreTable, *, now_ms: int | None = None, dry_run: bool = False) -> list[str]:
    """Delete the tags whose ``tagTimeRetained`` has passed (Java's ``TagTimeExpire``); the caller holds
    the table's lock. Returns their names (``dry_run``: the ones that would go)."""
    tags = TagManager(table.file_io, table.path)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    expired = [name for name in tags.names() if tags.get(name).expired(now)]
    if not dry_run:
        for name in expired:
            tags.delete(name)
    return expired
