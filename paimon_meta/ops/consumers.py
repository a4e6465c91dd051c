"""List and reset a table's streaming consumers (``consumer/consumer-<id>``, Java's ``ConsumerManager``).

A reset takes the table's lock, as expiration does: expiration reads the consumers' smallest next
snapshot and deletes what is below it under the lock, so a reset never races an expiration that has
decided without it. Moving a consumer back to a snapshot expiration already deleted is refused (404
``SNAPSHOT``); its next snapshot may be one past the latest (a consumer that read everything).
Each reset is one maintenance run in the event log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import SnapshotNotFoundError, ValidationError
from paimon_meta.ops.common import maintenance_run, resolve_table, table_lock
from paimon_meta.ops.snapshots import paimon_table_row
from paimon_meta.table.consumers import ConsumerManager, validate_consumer_id

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog


def consumers_of(catalog: MetastoreCatalog, identifier: str) -> ConsumerManager:
    """The consumers of table ``identifier`` where its registry row places it (``TableNotFoundError``
    if there is no such table, ``UnsupportedError`` for a table kept as metadata only)."""
    row = paimon_table_row(catalog, identifier)
    location = catalog.location_of(row)
    return ConsumerManager(catalog.table_file_io(location), location)


def reset_consumer(
    catalog: MetastoreCatalog,
    identifier: str,
    consumer_id: str,
    next_snapshot: int | None,
    *,
    principal: str | None = None,
) -> int | None:
    """Set consumer ``consumer_id``'s next snapshot, or remove the consumer when ``next_snapshot`` is
    None; returns the next snapshot it had (None: it did not exist).

    Raises:
        ValidationError: a bad consumer id, or a next snapshot below 1.
        SnapshotNotFoundError: ``next_snapshot`` is neither a kept snapshot nor the one after the latest.
    """
    validate_consumer_id(consumer_id)
    if next_snapshot is not None and next_snapshot < 1:
        raise ValidationError(
            f"nextSnapshotId must be at least 1, got {next_snapshot}", field="nextSnapshotId"
        )
    row, table = resolve_table(catalog, identifier)
    manager = ConsumerManager(table.file_io, table.path)
    settings = {"consumer": consumer_id, "next_snapshot": next_snapshot}
    with (
        maintenance_run(
            catalog,
            row,
            MaintenanceOperation.RESET_CONSUMER,
            dry_run=False,
            settings=settings,
            principal=principal,
        ) as run,
        table_lock(catalog, row, "reset-consumer"),
    ):
        previous = manager.next_snapshot(consumer_id)
        if next_snapshot is None:
            manager.delete(consumer_id)
        else:
            snapshots = table.snapshot_manager
            latest = snapshots.latest_snapshot_id()
            if next_snapshot != (latest or 0) + 1 and not snapshots.snapshot_exists(next_snapshot):
                raise SnapshotNotFoundError(
                    f"table {row.identifier} has no snapshot {next_snapshot} (latest {latest})",
                    snapshot_id=next_snapshot,
                )
            manager.reset(consumer_id, next_snapshot)
        run.record(
            MaintenanceEventType.FINISHED,
            {"consumer": consumer_id, "previous": previous, "next_snapshot": next_snapshot},
        )
    return previous
