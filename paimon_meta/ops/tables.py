"""A table's life in the catalog beyond create and commit: register an existing table, drop one (or a
whole database with its tables) into the recycle bin, undrop or purge it, replace one (``CREATE OR
REPLACE``), roll its schema back. Each is one audited run in the maintenance log (``register_table``,
``drop_table``, ``undrop_table``, ``purge_table``, ``replace_table``, ``rollback_schema``), with the principal
that asked.

The recycle bin (``metastore.recycle_bin``): a drop keeps the table's files and moves its row and grants
aside for ``paimon-meta.recycle-bin.retention`` (default 7 days); to every client the table is gone and
its name is free. ``undrop_table`` restores it with its grants if the name is free; the maintenance
queue purges expired drops (``purge_dropped``); ``purge_table`` purges one now. A table whose options
have ``deletion-protection`` on refuses drops.

Dropping takes the table's lock, so no commit of ours publishes into a table whose files are being
deleted; a database drop is the drop of each of its tables (each its own ``drop_table`` run naming the
database drop it belongs to), then of the database. A crash part-way leaves the database with the
tables not yet dropped: the same drop again finishes it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from paimon_meta.catalog import metadata_tables
from paimon_meta.commit.metastore.guard import reconcile
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import (
    CommitConflictError,
    CorruptMetadataError,
    DatabaseNotFoundError,
    DeletionProtectedError,
    SchemaNotFoundError,
    UnsupportedError,
)
from paimon_meta.metastore.recycle_bin import DroppedDatabaseRow, DroppedTableRow
from paimon_meta.metastore.registry import TableRow
from paimon_meta.model.identifier import split_identifier, validate_identifier
from paimon_meta.model.schema import TableSchema
from paimon_meta.ops.common import maintenance_run, resolve_table, table_lock
from paimon_meta.ops.references import CHANGELOG_DIR
from paimon_meta.table.paths import join_path
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.tags import TagManager
from paimon_meta.table.write.overwrite import OverwriteSpec

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

_CHANGELOG_PREFIX = "changelog-"
#: A table option of ours: ``true`` refuses drops of the table (Lakekeeper's table protection).
DELETION_PROTECTION = "deletion-protection"


def deletion_protected(options: dict[str, str]) -> bool:
    """Whether ``deletion-protection`` is on in these table options (``true``, any case)."""
    return options.get(DELETION_PROTECTION, "false").strip().lower() == "true"


def register_table(
    catalog: MetastoreCatalog, identifier: str, location: str, *, principal: str | None = None
) -> TableRow:
    """Adopt the table at ``location`` as ``identifier`` (:meth:`MetastoreCatalog.register_table`) and
    record it. Nothing is recorded when the registration is refused: there is no table row to file a
    refused run under."""
    table = catalog.register_table(identifier, location)
    row = catalog.table_row(identifier)
    settings = {"path": table.path, "schema_id": table.schema.id}
    with maintenance_run(
        catalog,
        row,
        MaintenanceOperation.REGISTER_TABLE,
        dry_run=False,
        settings=settings,
        principal=principal,
    ) as run:
        latest = table.snapshot_manager.latest_snapshot_id()
        run.record(MaintenanceEventType.FINISHED, {**settings, "latest_snapshot_id": latest})
    return row


def drop_table(
    catalog: MetastoreCatalog,
    identifier: str,
    *,
    principal: str | None = None,
    database_drop: str | None = None,
    purge: bool = False,
) -> DroppedTableRow | None:
    """Drop the table under its lock (``database_drop``: the run id of the database drop this is part
    of, recorded in the settings): into the recycle bin, its files kept, for the catalog's retention
    (``paimon-meta.recycle-bin.retention``); with ``purge`` or a retention of 0, unregistered and its
    files deleted at once. The bin row, or None when purged.

    Raises:
        TableNotFoundError: not registered.
        DeletionProtectedError: the table has ``deletion-protection`` on (nothing is done).
    """
    row = catalog.table_row(identifier)
    check_not_protected(catalog, row)
    retention = catalog.recycle_bin_retention_seconds
    purge = purge or retention <= 0
    settings: dict[str, Any] = {"purge": purge}
    if not purge:
        settings["retention_seconds"] = retention
    if database_drop is not None:
        settings["database_drop"] = database_drop
    with (
        maintenance_run(
            catalog,
            row,
            MaintenanceOperation.DROP_TABLE,
            dry_run=False,
            settings=settings,
            principal=principal,
        ) as run,
        table_lock(catalog, row, "drop"),
    ):
        location = catalog.location_of(row)
        if purge:
            kept = catalog.drop_table_keeping(identifier)
            # files another row's location holds are left (only rows from before the overlap check)
            run.record(MaintenanceEventType.FINISHED, {"location": location, "files_kept_for": kept})
            return None
        binned = catalog.recycle_bin.put(
            row.database, row.name, retention_seconds=retention, dropped_by=principal
        )
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "location": location,
                "drop_id": binned.drop_id,
                "grants": len(binned.grants),
                "purge_after": binned.purge_after.isoformat(),
            },
        )
        return binned


def table_options(catalog: MetastoreCatalog, row: TableRow) -> dict[str, str]:
    """The options of a registered table: from its latest schema on storage, or, kept as metadata only,
    from its row."""
    if row.table_schema is not None:
        return {str(k): str(v) for k, v in dict(row.table_schema.get("options") or {}).items()}
    location = catalog.location_of(row)
    latest = SchemaManager(catalog.table_file_io(location), location).latest()
    return {} if latest is None else dict(latest.options)


def check_not_protected(catalog: MetastoreCatalog, row: TableRow) -> None:
    """``DeletionProtectedError`` if the table has ``deletion-protection`` on."""
    if deletion_protected(table_options(catalog, row)):
        raise DeletionProtectedError(
            f"table {row.identifier} has deletion-protection on: set the option to false before dropping it",
            table=row.identifier,
        )


def undrop_table(
    catalog: MetastoreCatalog,
    identifier: str,
    *,
    drop_id: int | None = None,
    principal: str | None = None,
    reason: str | None = None,
) -> TableRow:
    """Bring a dropped table back from the recycle bin (the latest drop of that name, or ``drop_id``)
    with its grants, recorded as an ``undrop_table`` run (with ``reason``, when an operator gave one).

    Raises:
        DroppedTableNotFoundError: not in the bin (purged, or never dropped).
        DatabaseNotFoundError: its database is gone.
        TableAlreadyExistsError: the name is taken again.
    """
    db, name = split_identifier(identifier)
    dropped = catalog.recycle_bin.find(db, name, drop_id=drop_id)
    row, grants = catalog.recycle_bin.restore(db, name, drop_id=dropped.drop_id)
    settings: dict[str, Any] = {"drop_id": dropped.drop_id, "dropped_at": dropped.dropped_at.isoformat()}
    if reason is not None:
        settings["reason"] = reason
    with maintenance_run(
        catalog, row, MaintenanceOperation.UNDROP_TABLE, dry_run=False, settings=settings, principal=principal
    ) as run:
        run.record(MaintenanceEventType.FINISHED, {**settings, "grants": grants, "location": row.location})
    return row


def purge_dropped(
    catalog: MetastoreCatalog, dropped: DroppedTableRow, *, principal: str | None = None, reason: str
) -> int:
    """Delete a dropped table's files and its bin row, recorded as a ``purge_table`` run (``reason``:
    ``expired`` or ``operator``); the number of files deleted. A crash part-way leaves the bin row, so
    the purge runs again. Files of a metadata-only table whose owner keeps them are not deleted."""
    row = TableRow.from_mapping({**dropped.table_row, "table_uuid": None, "table_schema": None})
    settings = {"drop_id": dropped.drop_id, "reason": reason, "location": dropped.location}
    deleted = 0
    with maintenance_run(
        catalog, row, MaintenanceOperation.PURGE_TABLE, dry_run=False, settings=settings, principal=principal
    ) as run:
        external = dropped.metadata_only and metadata_tables.is_external(
            catalog, TableRow.from_mapping(dropped.table_row)
        )
        location = dropped.location or catalog.table_location(dropped.database, dropped.name)
        kept: list[str] = []
        if not external:
            # never where another row's location lies (a new table under the name has its own directory)
            kept, deleted = catalog.purge_location(location, label=dropped.identifier)
        catalog.recycle_bin.remove(dropped.drop_id)
        run.record(
            MaintenanceEventType.FINISHED, {**settings, "deleted_files": deleted, "files_kept_for": kept}
        )
    return deleted


def purge_table(
    catalog: MetastoreCatalog, identifier: str, *, drop_id: int | None = None, principal: str | None = None
) -> int:
    """Purge a dropped table from the recycle bin now (its files deleted); the number of files deleted
    (``DroppedTableNotFoundError`` if not in the bin)."""
    db, name = split_identifier(identifier)
    dropped = catalog.recycle_bin.find(db, name, drop_id=drop_id)
    return purge_dropped(catalog, dropped, principal=principal, reason="operator")


def create_table(catalog: MetastoreCatalog, identifier: str, schema: TableSchema) -> None:
    """Create a table from a create request's ``schema-0``: kept as metadata only (format, object,
    Iceberg: their files are the clients'), else a Paimon table whose data its clients write."""
    if metadata_tables.is_metadata_only(schema):
        catalog.create_metadata_table(identifier, schema)
    else:
        catalog.create_table_from_schema(identifier, schema, written_by_clients=True)


@dataclass(frozen=True, slots=True)
class TableReplace:
    """What a replace did: ``recreated`` (dropped and created anew) or truncated with a new schema."""

    table: str
    recreated: bool
    schema_id: int
    truncate_snapshot_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replace_table(
    catalog: MetastoreCatalog, identifier: str, schema: TableSchema, *, principal: str | None = None
) -> TableReplace:
    """Java's ``replaceTable`` (``CREATE OR REPLACE TABLE`` of an existing table), as its
    ``AbstractCatalog`` does it: a table kept as metadata only, or a new schema of another table type, is
    dropped and created anew (:func:`drop_table`, then a create); a Paimon table keeping its type is
    truncated (one OVERWRITE snapshot of nothing, when it has data) and given ``schema`` as its next
    schema (``schema-<N+1>``), its snapshots, tags and branches kept. Not atomic (nor is Java's): a
    failure after the truncation leaves the table empty with its old schema, and the same replace again
    finishes it.

    Raises:
        TableNotFoundError: no such table (nothing created: Java's ``ignoreIfNotExists`` is the client's).
        UnsupportedError: the new schema changes a Paimon table's partition keys (Java refuses it too).
        ValidationError, CommitConflictError, CommitOutcomeUnknownError: as a create or a commit.
    """
    row = catalog.table_row(identifier)
    if row.table_schema is not None or metadata_tables.is_metadata_only(schema):
        drop_table(catalog, identifier, principal=principal)
        create_table(catalog, identifier, schema)
        created = catalog.table_row(identifier)
        return TableReplace(identifier, True, created.schema_id or 0, None)
    table = catalog.get_table(identifier)
    if tuple(schema.partition_keys) != tuple(table.schema.partition_keys):
        raise UnsupportedError(
            f"replaceTable cannot change the partition keys of table {identifier} "
            f"({list(table.schema.partition_keys)} -> {list(schema.partition_keys)}): drop and create it",
            field="schema.partitionKeys",
        )
    settings = {"fields": [f.name for f in schema.fields], "partition_keys": list(schema.partition_keys)}
    with maintenance_run(
        catalog,
        row,
        MaintenanceOperation.REPLACE_TABLE,
        dry_run=False,
        settings=settings,
        principal=principal,
    ) as run:
        truncated: int | None = None
        if table.snapshot_manager.latest_snapshot_id() is not None:
            # Java's truncateTable: an OVERWRITE of no files over the whole table, its own commit user.
            committer = catalog.message_committer(
                identifier, f"replace-table-{uuid.uuid4()}", principal=principal, row=row, table=table
            )
            result = committer.commit([], overwrite=OverwriteSpec.static())
            truncated = max(result.snapshot_ids, default=None)
        new = catalog.replace_schema(identifier, schema)
        report = TableReplace(identifier, False, new.id, truncated)
        run.record(MaintenanceEventType.FINISHED, report.to_dict())
    return report


@dataclass(frozen=True, slots=True)
class DatabaseDrop:
    """What a database drop did: its run id (in each table's ``drop_table`` run) and the tables."""

    database: str
    run_id: str
    tables: list[str]
    views: list[str]
    functions: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def drop_database(catalog: MetastoreCatalog, name: str, *, principal: str | None = None) -> DatabaseDrop:
    """Drop ``name`` with everything in it: each table as :func:`drop_table` does (into the recycle
    bin), then, in one transaction, its views and functions (each a ``dropped`` event) and the database
    (``DatabaseNotFoundError`` if unknown): into the recycle bin too, with its grants, its objects and
    its tables' drop ids, for the catalog's retention (``undrop_database`` restores the lot); with a
    retention of 0, gone at once. A table with ``deletion-protection`` on refuses the whole drop before
    anything is dropped (``DeletionProtectedError``)."""
    validate_identifier("database", name)
    if not catalog.registry.database_exists(name):
        raise DatabaseNotFoundError(f"database {name!r} does not exist", database=name)
    run_id = str(uuid.uuid4())
    dropped = []
    drop_ids = []
    rows = catalog.registry.list_table_rows(name)
    for row in rows:
        check_not_protected(catalog, row)
    for row in rows:
        binned = drop_table(catalog, row.identifier, principal=principal, database_drop=run_id)
        dropped.append(row.name)
        if binned is not None:
            drop_ids.append(binned.drop_id)
    retention = catalog.recycle_bin_retention_seconds
    if retention <= 0:
        objects = catalog.drop_database(name, principal=principal)
    else:
        _, objects = catalog.recycle_bin.put_database(
            name, table_drop_ids=drop_ids, run_id=run_id, retention_seconds=retention, dropped_by=principal
        )
    return DatabaseDrop(name, run_id, dropped, objects.get("view", []), objects.get("function", []))


@dataclass(frozen=True, slots=True)
class DatabaseUndrop:
    database: str
    drop_id: int
    tables: list[str]
    grants: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def undrop_database(
    catalog: MetastoreCatalog,
    name: str,
    *,
    drop_id: int | None = None,
    principal: str | None = None,
    reason: str | None = None,
) -> DatabaseUndrop:
    """Bring a dropped database back from the recycle bin (its latest drop, or ``drop_id``), in one
    transaction: the database with its properties, grants, views and functions, and each of its tables
    still in the bin with theirs (each recorded as an ``undrop_table`` run naming the database's drop).

    Raises:
        DroppedDatabaseNotFoundError: not in the bin (purged, or never dropped).
        DatabaseAlreadyExistsError: the name is taken (nothing is restored).
    """
    validate_identifier("database", name)
    dropped, tables, grants = catalog.recycle_bin.restore_database(name, drop_id=drop_id, principal=principal)
    for row, table_grants in tables:
        settings: dict[str, Any] = {
            "database_undrop": dropped.drop_id,
            "dropped_at": dropped.dropped_at.isoformat(),
        }
        if reason is not None:
            settings["reason"] = reason
        with maintenance_run(
            catalog,
            row,
            MaintenanceOperation.UNDROP_TABLE,
            dry_run=False,
            settings=settings,
            principal=principal,
        ) as run:
            run.record(
                MaintenanceEventType.FINISHED, {**settings, "grants": table_grants, "location": row.location}
            )
    return DatabaseUndrop(name, dropped.drop_id, sorted(row.name for row, _ in tables), grants)


def purge_dropped_database(
    catalog: MetastoreCatalog, dropped: DroppedDatabaseRow, *, principal: str | None = None, reason: str
) -> int:
    """Purge every table of a dropped database still in the bin (:func:`purge_dropped`), then its bin
    row; the number of files deleted. A crash part-way leaves the row (and the tables not yet purged):
    the purge runs again."""
    deleted = 0
    for table in catalog.recycle_bin.tables_of(dropped):
        deleted += purge_dropped(catalog, table, principal=principal, reason=reason)
    catalog.recycle_bin.remove_database(dropped.drop_id)
    return deleted


def purge_database(
    catalog: MetastoreCatalog, name: str, *, drop_id: int | None = None, principal: str | None = None
) -> int:
    """Purge a dropped database from the recycle bin now (its tables' files deleted); the number of files
    deleted (``DroppedDatabaseNotFoundError`` if not in the bin)."""
    dropped = catalog.recycle_bin.find_database(validate_identifier("database", name), drop_id=drop_id)
    return purge_dropped_database(catalog, dropped, principal=principal, reason="operator")


@dataclass(frozen=True, slots=True)
class SchemaRollback:
    table: str
    schema_id: int
    deleted_schemas: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rollback_schema(
    catalog: MetastoreCatalog, identifier: str, schema_id: int, *, principal: str | None = None
) -> SchemaRollback:
    """Java's ``SchemaManager.rollbackTo``: delete every schema after ``schema_id``, refused while a
    snapshot, a tag or a changelog still uses one of them.

    Under the table's lock, after reconciling storage into the log, so no snapshot of ours appears on a
    schema being deleted between the check and the deletes. Deleted newest first: a crash leaves a
    contiguous prefix of schemas, the latest of which is the table's schema, and the same rollback
    again finishes. A commit prepared on a deleted schema is refused when it publishes (its files name a
    schema the table no longer has).

    Raises:
        SchemaNotFoundError: no schema ``schema_id``.
        CommitConflictError: a snapshot, tag or changelog uses a later schema (nothing deleted).
    """
    row, table = resolve_table(catalog, identifier)
    settings = {"schema_id": schema_id}
    with (
        maintenance_run(
            catalog,
            row,
            MaintenanceOperation.ROLLBACK_SCHEMA,
            dry_run=False,
            settings=settings,
            principal=principal,
        ) as run,
        table_lock(catalog, row, "rollback-schema"),
    ):
        reconcile(catalog.registry, catalog.events, row, table.snapshot_manager)
        schemas = SchemaManager(table.file_io, table.path)
        if not schemas.exists(schema_id):
            raise SchemaNotFoundError(
                f"table {row.identifier} has no schema {schema_id}",
                schema_id=schema_id,
            )
        newer = [s for s in _used_schemas(table) if s > schema_id]
        if newer:
            raise CommitConflictError(
                f"cannot roll table {row.identifier} back to schema {schema_id}: schema {min(newer)} is "
                "still used by a snapshot, tag or changelog",
                reason="schema_in_use",
            )
        deleted = sorted((s for s in schemas.list_ids() if s > schema_id), reverse=True)
        for sid in deleted:
            table.file_io.delete(schemas.schema_path(sid))
        catalog.registry.roll_back_schema_id(row.table_id, schema_id)
        report = SchemaRollback(row.identifier, schema_id, sorted(deleted))
        run.record(MaintenanceEventType.FINISHED, report.to_dict())
    return report


def _used_schemas(table: FileStoreTable) -> set[int]:
    """Schema ids of every snapshot, tag and long-lived changelog of the main branch."""
    snapshots = table.snapshot_manager
    used = {snapshots.snapshot(s).schema_id for s in snapshots.list_snapshot_ids()}
    tags = TagManager(table.file_io, table.path)
    used.update(tags.get(name).snapshot.schema_id for name in tags.names())
    directory = join_path(table.path, CHANGELOG_DIR)
    if table.file_io.exists(directory):
        for status in table.file_io.list(directory):
            base = status.path.rsplit("/", 1)[-1]
            if not base.startswith(_CHANGELOG_PREFIX) or not base[len(_CHANGELOG_PREFIX) :].isdigit():
                continue
            try:
                used.add(int(json.loads(table.file_io.read(status.path))["schemaId"]))
            except (ValueError, KeyError, TypeError) as e:
                raise CorruptMetadataError(
                    f"cannot read the schema id of {status.path}: {e}", path=status.path
                ) from e
    return used
