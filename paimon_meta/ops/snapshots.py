"""Snapshots by version and the paged snapshot list (the REST protocol's ``getVersionSnapshot`` and
``listSnapshots``), read from storage through the table's :class:`SnapshotManager`.

A version is, as Java's ``RESTCatalogServer`` reads it: ``LATEST`` or ``EARLIEST`` (the hints, verified
as :class:`SnapshotManager` verifies them), a snapshot id (digits), or else a tag name (the tag's
snapshot). Anything that names no snapshot is ``SnapshotNotFoundError`` (404 ``SNAPSHOT``).

The list is ascending by id, as Java's ``SnapshotManager.snapshots()`` (which the Java server lists)
orders it. Ids between the earliest and the latest snapshot are contiguous (expiration removes from
the oldest end), so a page reads at most ``maxResults`` snapshot files from the id after its token and
never lists the snapshot directory; a snapshot expired while the page is read is left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paimon_meta.errors import SnapshotNotFoundError, TagNotFoundError, ValidationError
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.table.snapshots import SnapshotManager
from paimon_meta.table.tags import TagManager, validate_tag_name

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.metastore.registry import TableRow

LATEST = "LATEST"
EARLIEST = "EARLIEST"
#: Snapshots per page when the client names no ``maxResults``.
DEFAULT_PAGE = 100


def paimon_table_row(catalog: MetastoreCatalog, identifier: str) -> TableRow:
    """The registry row of a Paimon table (``TableNotFoundError`` if none; ``UnsupportedError`` naming
    the type for a format, object or Iceberg table, which has no snapshots, consumers or partitions
    here)."""
    row = catalog.table_row(identifier)
    catalog.paimon_location(row)
    return row


def snapshot_at(snapshots: SnapshotManager, tags: TagManager, identifier: str, version: str) -> Snapshot:
    """The snapshot ``version`` names (see the module's docstring)."""
    found: Snapshot | None
    if version == LATEST:
        found = snapshots.latest_snapshot()
    elif version == EARLIEST:
        found = snapshots.earliest_snapshot()
    elif version.isascii() and version.isdigit():
        found = snapshots.find(int(version))
    else:
        try:
            validate_tag_name(version)
            found = tags.get(version).snapshot
        except (ValidationError, TagNotFoundError):
            found = None
    if found is None:
        raise SnapshotNotFoundError(
            f"table {identifier} has no snapshot {version!r} (an id, a tag name, LATEST or EARLIEST)",
            resource_name=version,
        )
    return found


def snapshot_page(
    snapshots: SnapshotManager, *, max_results: int | None, page_token: str | None, max_page: int
) -> tuple[list[Snapshot], str | None]:
    """The snapshots after ``page_token`` (the last id of the previous page), ascending, at most
    ``max_results``; the next token is None on the last page."""
    limit = DEFAULT_PAGE if max_results is None else max_results
    if not 0 < limit <= max_page:
        raise ValidationError(f"maxResults must be between 1 and {max_page}", field="maxResults")
    after = 0
    if page_token:
        if not (page_token.isascii() and page_token.isdigit()) or len(page_token) > 18:
            raise ValidationError("pageToken is not one this server issued", field="pageToken")
        after = int(page_token)
    latest = snapshots.latest_snapshot_id()
    if latest is None:
        return [], None
    earliest = snapshots.earliest_snapshot_id() or 1
    start = max(after + 1, earliest)
    end = min(latest, start + limit - 1)
    page = [s for sid in range(start, end + 1) if (s := snapshots.find(sid)) is not None]
    return page, (str(end) if end < latest else None)
