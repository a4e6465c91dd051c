"""``paimon_meta.open_table(path)``: one table by path, its commits guarded by storage alone.

``open_table`` is for single-machine use on stores with atomic create-if-absent (local disk, S3 with
``If-None-Match``): commits are optimistic and exactly-once is decided by reading snapshots. It is not
a :class:`~paimon_meta.catalog.base.Catalog`: there is no registry of databases and tables, so it opens
the one table a path names. ``connect`` (``paimon_meta.catalog.metastore``) adds the Postgres lock, the
event log and the table registry.
"""

from __future__ import annotations

from collections.abc import Mapping

from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.guard import StorageGuard
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.builder import Committer


def storage_committer(table: FileStoreTable, commit_user: str) -> Committer:
    """A coordinator guarded by storage alone (no metastore)."""
    guard = StorageGuard(table.file_io, table.path, load_snapshot_fn=table.snapshot_manager.snapshot)
    return CommitCoordinator(table, guard, commit_user=commit_user)


def open_table(path_or_uri: str, options: Mapping[str, str] | None = None) -> FileStoreTable:
    """Open the Paimon table at ``path_or_uri`` for reading and storage-guarded writing.

    ``options`` configure the FileIO (``s3.endpoint``, ``s3.access-key``, ...). The table is the same
    ``FileStoreTable`` a :class:`~paimon_meta.catalog.base.Catalog`'s ``get_table`` returns, its
    commits guarded by storage instead of by a catalog. ``TableNotFoundError`` if there is no table
    at the path.
    """
    table = FileStoreTable.open(path_or_uri, options)
    table.committer_factory = storage_committer
    return table
