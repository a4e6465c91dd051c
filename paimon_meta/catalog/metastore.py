"""``paimon_meta.connect()``: a catalog over the Postgres metastore and a warehouse (local path or s3://).

Tables obtained from a :class:`MetastoreCatalog` commit through the metastore guard:
 the Java-compatible lock with
lease, heartbeat and fencing token, the append-only event log, and the table pointer. Tables live at
``<warehouse>/<db>.db/<table>`` as Java's catalogs lay them out.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import psycopg
import pyarrow as pa
from sqlalchemy import Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from paimon_meta.catalog import metadata_tables
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.metastore.guard import LockSettings, MetastoreGuard
from paimon_meta.commit.metastore.snapshot_commit import SnapshotCommitter
from paimon_meta.db.embedded import default_home, ensure_embedded_postgres
from paimon_meta.db.engine import make_engine
from paimon_meta.db.migrate import check_compatible, upgrade
from paimon_meta.errors import (
    CommitConflictError,
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    MetastoreUnavailableError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ValidationError,
)
from paimon_meta.io import get_file_io, location_key, normalise_uri, resolve_location, scheme_of
from paimon_meta.io.base import FileIO
from paimon_meta.metastore.assignments import Policies, refuse_ungoverned_changes
from paimon_meta.metastore.catalog_objects import CatalogObjects
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.event_partitions import EventPartitions
from paimon_meta.metastore.events import EventLog
from paimon_meta.metastore.lock import MetastoreLock
from paimon_meta.metastore.recycle_bin import RecycleBin
from paimon_meta.metastore.registry import DatabaseRow, Registry, TableRow, overlap_error
from paimon_meta.model import limits
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.identifier import split_identifier, validate_identifier
from paimon_meta.model.options import parse_duration_ms
from paimon_meta.model.schema import TableSchema
from paimon_meta.serde.json import schema_from_json, schema_to_json
from paimon_meta.table import schema_change
from paimon_meta.table.containment import is_under
from paimon_meta.table.placement import (
    EXTERNAL_ROOTS_ALLOWED,
    check_placement_options,
    parse_allowed_roots,
)
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.builder import Committer

ENV_URL = "PAIMON_META_URL"
ENV_WAREHOUSE = "PAIMON_META_WAREHOUSE"

# MetastoreCatalog options (the rest of ``options`` configure the FileIO, e.g. ``s3.endpoint``).
LOCK_LEASE = "lock.lease-seconds"
LOCK_ACQUIRE_TIMEOUT = "lock.acquire-timeout-seconds"
CATALOG_KEY = "catalog-key"
# How long a dropped table stays in the recycle bin (a Paimon duration; 0: a drop purges at once), and the
# catalog-wide switch of the maintenance the service runs (paimon_meta/maintenance/options.py).
RECYCLE_BIN_RETENTION = "paimon-meta.recycle-bin.retention"
DEFAULT_RECYCLE_BIN_RETENTION = "7 d"
MAINTENANCE_ENABLED = "paimon-meta.maintenance.enabled"
#: The options a MetastoreCatalog reads itself (not its FileIO's, not its tables' defaults).
CATALOG_OPTIONS = frozenset(
    {
        LOCK_LEASE,
        LOCK_ACQUIRE_TIMEOUT,
        CATALOG_KEY,
        EXTERNAL_ROOTS_ALLOWED,
        RECYCLE_BIN_RETENTION,
        MAINTENANCE_ENABLED,
    }
)


_log = logging.getLogger(__name__)

#: How often a catalog checks that the commit log has its partitions ahead (MetastoreCatalog, on commit).
PARTITIONS_CHECK_SECONDS = 3600.0
P = ParamSpec("P")
R = TypeVar("R")


def _metastore_call(fn: Callable[P, R]) -> Callable[P, R]:
    """Connection failures of the metastore surface as ``MetastoreUnavailableError``, not driver errors."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as e:
            raise MetastoreUnavailableError(
                f"metastore unreachable during {fn.__name__}: {e.orig or e}"
            ) from e

    return wrapper


@dataclass(frozen=True, slots=True)
class ConnectInfo:
    metastore_url: str
    warehouse: str
    embedded: bool


class MetastoreCatalog:
    """Databases and tables registered in the metastore. Close it (or use ``with``) when done.

    A :class:`~paimon_meta.catalog.base.Catalog`, with the operations that need the metastore itself
    besides (databases' properties, renames, schema changes, the control plane's committers)."""

    def __init__(
        self,
        engine: Engine,
        warehouse: str,
        options: Mapping[str, str],
        *,
        info: ConnectInfo,
        own_engine: bool = True,
        default_catalog: bool = True,
    ) -> None:
        """``own_engine`` False: the engine is shared (the service's other catalogs use the default
        catalog's): :meth:`close` leaves it open. ``default_catalog`` False: one of the service's other
        catalogs, whose grants are only those naming its key (the recycle bin moves no others)."""
        self.engine = engine
        self._own_engine = own_engine
        self.info = info
        # in its normal form: tables' locations are joined to it and compared with stored normal forms
        self.warehouse = normalise_uri(warehouse)
        self.options = dict(options)
        self.file_io_options = {k: v for k, v in options.items() if k not in CATALOG_OPTIONS}
        self.file_io: FileIO = get_file_io(self.warehouse, self.file_io_options)
        self._file_ios: dict[str, FileIO] = {}
        self._file_ios_lock = threading.Lock()
        self.registry = Registry(engine, catalog_key=options.get(CATALOG_KEY, "jdbc"))
        self.recycle_bin = RecycleBin(engine, self.registry.catalog_key, default_catalog=default_catalog)
        self.recycle_bin_retention_seconds = (
            parse_duration_ms(
                options.get(RECYCLE_BIN_RETENTION, DEFAULT_RECYCLE_BIN_RETENTION), key=RECYCLE_BIN_RETENTION
            )
            / 1000
        )
        self.events = EventLog(engine)
        self._partitions_lock = threading.Lock()
        self._partitions_checked_at = 0.0
        self._make_partitions_ahead()
        #: Views and functions of the catalog (their rows, versions and events).
        self.objects = CatalogObjects(self.registry)
        self.lock = MetastoreLock(engine)
        self.lock_settings = LockSettings(
            lease_seconds=int(options.get(LOCK_LEASE, "30")),
            acquire_timeout_seconds=float(options.get(LOCK_ACQUIRE_TIMEOUT, "60")),
        )
        #: Roots under which a table created or altered here may place files outside the warehouse
        #: (``data-file.external-paths`` etc.); empty: none may (paimon_meta.table.placement).
        self.allowed_external_roots = parse_allowed_roots(options.get(EXTERNAL_ROOTS_ALLOWED))

    # ---- databases ---------------------------------------------------------------------------------

    @_metastore_call
    def create_database(self, name: str, ignore_if_exists: bool = True) -> None:
        validate_identifier("database", name)
        if self.registry.database_exists(name):
            if ignore_if_exists:
                return
            raise DatabaseAlreadyExistsError(f"database {name!r} already exists", database=name)
        self.registry.create_database(name, location=self.file_io.join(self.warehouse, f"{name}.db"))

    @_metastore_call
    def list_databases(self) -> list[str]:
        return self.registry.list_databases()

    # ---- tables ------------------------------------------------------------------------------------

    def table_file_io(self, location: str) -> FileIO:
        """The FileIO of a table's own location: the warehouse's when the table lives in the same store,
        else one chosen by the location's scheme (with the catalog's storage options), kept for reuse.
        A table registered elsewhere (another warehouse, a Java catalog) is then opened where it is."""
        scheme = scheme_of(location)
        if scheme == scheme_of(self.warehouse) and (scheme == "file" or location.startswith(self.warehouse)):
            return self.file_io
        # one FileIO per store: the local disk, or an S3 bucket
        key = scheme if scheme == "file" else f"{scheme}://{location.split('/', 3)[2]}"
        with self._file_ios_lock:
            file_io = self._file_ios.get(key)
            if file_io is None:
                file_io = self._file_ios[key] = get_file_io(location, self.file_io_options)
        return file_io

    def location_of(self, row: TableRow) -> str:
        """Where a registered table lives (rows Java inserted have no location: the warehouse layout)."""
        return row.location or self.table_location(row.database, row.name)

    def table_location(self, database: str, table: str) -> str:
        return self.file_io.join(self.warehouse, f"{database}.db", table)

    @_metastore_call
    def create_table(
        self,
        identifier: str,
        schema: pa.Schema,
        *,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
        ignore_if_exists: bool = False,
    ) -> FileStoreTable:
        """Create ``schema-0`` on storage and register the table. A table directory that already holds a
        schema (left by a crashed create, or written by Java) is adopted if the schema matches."""
        fields, highest = from_arrow_schema(schema)
        table_schema = TableSchema(
            id=0,
            fields=fields,
            highest_field_id=highest,
            partition_keys=tuple(partition_keys),
            primary_keys=tuple(primary_keys),
            options=dict(options or {}),
            comment=comment,
            time_millis=int(time.time() * 1000),
        )
        db, _ = split_identifier(identifier)
        if not self.registry.database_exists(db):
            self.create_database(db)
        return self.create_table_from_schema(identifier, table_schema, ignore_if_exists=ignore_if_exists)

    @_metastore_call
    def create_table_from_schema(
        self,
        identifier: str,
        table_schema: TableSchema,
        *,
        ignore_if_exists: bool = False,
        written_by_clients: bool = False,
    ) -> FileStoreTable:
        """Create a table from a complete ``schema-0`` (the REST catalog's create). The database must
        exist. Options this library's readers and writers do not implement are refused before anything
        is written, unless ``written_by_clients`` (the service: its clients write and read the data, the
        service publishes their snapshots): then only what is not a valid Paimon table is refused, and
        an operation of ours that would need what is not implemented refuses when it runs."""
        db, name = split_identifier(identifier)
        if not self.registry.database_exists(db):
            raise DatabaseNotFoundError(f"database {db!r} does not exist", database=db)
        try:
            self.registry.get_table_row(db, name)
        except TableNotFoundError:
            pass
        else:
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(f"table {identifier} already exists", identifier=identifier)
        location = self.table_location(db, name)
        if self.recycle_bin.holder_of(location) is not None:
            # A dropped table in the recycle bin keeps its files here (an undrop brings it back): the new
            # table gets a directory of its own.
            location = f"{location}-{uuid.uuid4().hex[:8]}"
        limits.check_table(table_schema)
        if written_by_clients:
            FileStoreTable.check_client_schema(table_schema)
        else:
            FileStoreTable.check_schema(table_schema)
        # options that place files keep them in the table, or under a root the catalog allows
        check_placement_options(
            table_schema.options,
            table_path=location,
            allowed_roots=self.allowed_external_roots,
            warehouse=self.warehouse,
        )
        holders = self.registry.table_rows_overlapping(location, warehouse=self.warehouse)
        if holders:
            # A table renamed away from this name keeps its files here (or another table's files are
            # inside or around it): adopting them would give two registered tables one set of files.
            raise TableAlreadyExistsError(
                f"{location} holds the files of table {holders[0].identifier}; choose another name",
                identifier=identifier,
                path=location,
                holder=holders[0].identifier,
            )
        manager = SchemaManager(self.table_file_io(location), location)
        if not manager.commit_new_schema(table_schema):
            existing = manager.schema(0)
            if schema_to_json(_comparable(existing)) != schema_to_json(_comparable(table_schema)):
                raise TableAlreadyExistsError(
                    f"{location} already holds a different table; drop it or choose another name",
                    identifier=identifier,
                    path=location,
                )
        self.registry.create_table_row(db, name, location, uuid.uuid4(), 0, warehouse=self.warehouse)
        return self.get_table(identifier)

    @_metastore_call
    def register_table(self, identifier: str, location: str) -> FileStoreTable:
        """Adopt the Paimon table whose files are at ``location`` under ``identifier``: its latest schema
        is read from storage, its snapshots stay (the next commit of ours records them as ``external``,
        as for a table another engine wrote). ``location`` is one table directory of the warehouse's
        layout (``<warehouse>/<db>.db/<table>``, any names) or lies under a root the catalog allows.

        Invariant: no two registered tables share files. ``location`` is taken in its normal form
        (:func:`~paimon_meta.io.base.normalise_uri`: ``//``, ``.``, a trailing separator, the scheme's case
        and percent-encoding are spellings of one place; ``..`` is refused), and a location that another
        row holds, contains or lies inside is refused, compared on normal forms in the registry's
        transaction (so is one Java's row for some name computes to).

        Raises:
            DatabaseNotFoundError, TableAlreadyExistsError (the name, or another table holds the files),
            ValidationError (``path``: outside the catalog, or no Paimon table there), UnsupportedError
            (the table asks for what this library does not implement).
        """
        db, name = split_identifier(identifier)
        try:
            location = normalise_uri(location)
        except ValidationError as e:
            raise ValidationError(f"path: {e.message}", field="path", **e.fields) from None
        if not self.registry.database_exists(db):
            raise DatabaseNotFoundError(f"database {db!r} does not exist", database=db)
        try:
            self.registry.get_table_row(db, name)
        except TableNotFoundError:
            pass
        else:
            raise TableAlreadyExistsError(f"table {identifier} already exists", identifier=identifier)
        self._check_registrable(location)
        # checked before storage is read (a refusal must not depend on what is there), and again, under
        # the registry's lock, when the row is inserted
        holders = self.registry.table_rows_overlapping(location, warehouse=self.warehouse)
        if holders:
            raise overlap_error(location, holders[0], identifier=identifier)
        schema = SchemaManager(self.table_file_io(location), location).latest()
        if schema is None:
            raise ValidationError(
                f"path: no Paimon table at {location} (no schema/schema-<id> file)",
                field="path",
                path=location,
            )
        FileStoreTable.check_schema(schema)
        check_placement_options(
            schema.options,
            table_path=location,
            allowed_roots=self.allowed_external_roots,
            warehouse=self.warehouse,
        )
        self.registry.create_table_row(db, name, location, uuid.uuid4(), schema.id, warehouse=self.warehouse)
        return self.get_table(identifier)

    def _check_registrable(self, location: str) -> None:
        """``location`` (a normal form) is a table directory of the warehouse's layout, or lies under a
        root the catalog allows and not around the warehouse."""
        key, warehouse_key = location_key(location), location_key(self.warehouse)
        if key.startswith(warehouse_key.rstrip("/") + "/"):
            relative = key[len(warehouse_key.rstrip("/")) + 1 :].split("/")
            if len(relative) != 2 or not relative[0].endswith(".db") or not relative[0][:-3]:
                raise ValidationError(
                    f"path: {location} is not a table directory of the warehouse "
                    f"({self.warehouse}/<database>.db/<table>)",
                    field="path",
                    path=location,
                )
            return
        if is_under(self.warehouse, location):
            raise ValidationError(
                f"path: {location} is the warehouse {self.warehouse} or contains it, where other tables live",
                field="path",
                path=location,
            )
        if not any(is_under(location, root) for root in self.allowed_external_roots):
            raise ValidationError(
                f"path: {location} is outside the warehouse {self.warehouse} and every root the catalog "
                f"allows (catalog option {EXTERNAL_ROOTS_ALLOWED})",
                field="path",
                path=location,
            )

    @_metastore_call
    def create_metadata_table(self, identifier: str, table_schema: TableSchema) -> TableRow:
        """Register a format, object or Iceberg table: metadata only, nothing written to storage
        (:mod:`paimon_meta.catalog.metadata_tables`)."""
        db, _ = split_identifier(identifier)
        if not self.registry.database_exists(db):
            raise DatabaseNotFoundError(f"database {db!r} does not exist", database=db)
        return metadata_tables.create(self, identifier, table_schema)

    @_metastore_call
    def table_metadata(self, identifier: str) -> tuple[TableRow, TableSchema, str]:
        """(row, current schema, location) of any registered table: a Paimon table's schema from
        storage, a metadata-only table's from its row."""
        db, name = split_identifier(identifier)
        row = self.registry.get_table_row(db, name)
        if row.table_schema is not None:
            return row, metadata_tables.schema_of(row), self.location_of(row)
        table = self.get_table(identifier)
        return row, table.schema, table.path

    def listed_metadata(self, row: TableRow) -> tuple[TableSchema, str]:
        """(current schema, location) of a row a listing read (``table_rows_page``), without a schema
        file read when the registry holds the schema: a metadata-only table's from its row, a Paimon
        table's from its stored summary while the summary's id is the row's schema id (migration 0023).
        Otherwise (no summary yet, or the schema changed since: an ALTER of the previous release, or of
        an engine straight on storage) the table's latest schema file is read and stored as its summary,
        so the next listing reads the registry only."""
        if row.table_schema is not None:
            return metadata_tables.schema_of(row), self.location_of(row)
        summary = row.schema_summary
        location = self.paimon_location(row)
        if summary is not None and row.schema_id is not None and summary.get("id") == row.schema_id:
            return schema_from_json(json.dumps(summary)), location
        schema = FileStoreTable.load(self.table_file_io(location), location).schema
        self.registry.store_schema_summary(row.table_id, json.loads(schema_to_json(schema)))
        return schema, location

    def paimon_location(self, row: TableRow) -> str:
        """Where the Paimon table of ``row`` lives. The one check every path that needs Paimon's layout
        (snapshots, tags, branches, consumers, partitions, commits) goes through: ``UnsupportedError``
        naming the type for a table kept as metadata only (format, object, Iceberg), which has none."""
        if row.table_schema is not None:
            raise metadata_tables.refuse(row)
        return self.location_of(row)

    @_metastore_call
    def get_table(self, identifier: str) -> FileStoreTable:
        """The table, wired to commit through the metastore guard (``UnsupportedError`` naming the type
        for a table kept as metadata only: it has no Paimon layout to open)."""
        db, name = split_identifier(identifier)
        row = self.registry.get_table_row(db, name)
        location = self.paimon_location(row)
        table = FileStoreTable.load(self.table_file_io(location), location)
        table.committer_factory = self._committer_factory(row)
        return table

    @_metastore_call
    def list_tables(self, database: str) -> list[str]:
        return sorted(
            r.name for r in self.registry.list_table_rows(validate_identifier("database", database))
        )

    @_metastore_call
    def drop_table(self, identifier: str, *, purge: bool = True) -> None:
        """Unregister the table and (``purge``, Java's behaviour) delete its files (see
        :meth:`drop_table_keeping`, which also says whose files were left)."""
        self.drop_table_keeping(identifier, purge=purge)

    def drop_table_keeping(self, identifier: str, *, purge: bool = True) -> list[str]:
        """Unregister the table and (``purge``, Java's behaviour) delete its files: those under its
        location's normal form and under no other row's location. Returns the tables whose files were
        left (another row's location equals or contains this one's: nothing is deleted; or lies inside
        it: nothing under it is deleted), which only rows from before the overlap check can cause."""
        db, name = split_identifier(identifier)
        row = self.registry.drop_table_row(db, name)
        if not purge or (row.table_schema is not None and metadata_tables.is_external(self, row)):
            # an external format/object/Iceberg table's files are its owner's: only its row goes
            return []
        return self._purge(row)

    def _purge(self, row: TableRow) -> list[str]:
        kept, _ = self.purge_location(
            self.location_of(row), exclude_table_id=row.table_id, label=row.identifier
        )
        return kept

    def purge_location(
        self, location: str, *, exclude_table_id: int | None = None, label: str = ""
    ) -> tuple[list[str], int]:
        """Delete the files under ``location``'s normal form that lie under no other registered row's
        location (``exclude_table_id``: the row being dropped). Returns the tables whose files were left
        (another row's location equals or contains ``location``: nothing is deleted; or lies inside it:
        nothing under it is deleted) and the number of files deleted.

        Invariant: a drop or purge never deletes a file under another row's location."""
        location = normalise_uri(location)
        others = self.registry.table_rows_overlapping(
            location, warehouse=self.warehouse, exclude_table_id=exclude_table_id
        )
        kept = [other.identifier for other in others]
        inner = [self.location_of(other) for other in others]
        if any(is_under(location, root) for root in inner):
            _log.warning("purge of %s deletes no file: its location %s is %s's", label, location, kept)
            return kept, 0
        deleted = 0
        file_io = self.table_file_io(location)
        for status in file_io.list_recursive(location):
            # a name is_under cannot read (is_under(p, p) fails) might be anywhere: left when rows nest
            unreadable = inner and not is_under(status.path, status.path)
            if not unreadable and not any(is_under(status.path, root) for root in inner):
                file_io.delete(status.path)
                deleted += 1
        return kept, deleted

    @_metastore_call
    def alter_table(
        self,
        identifier: str,
        *,
        add_columns: Sequence[schema_change.ColumnArg] = (),
        rename: Mapping[str, str] | None = None,
    ) -> FileStoreTable:
        """Add columns and/or rename columns: each change writes ``schema/schema-<N+1>``."""
        table = self.get_table(identifier)
        if add_columns:
            schema_change.add_columns(table, add_columns)
        for old, new in (rename or {}).items():
            schema_change.rename_column(table, old, new)
        return self.get_table(identifier)

    @_metastore_call
    def get_database(self, name: str) -> DatabaseRow:
        return self.registry.get_database(validate_identifier("database", name))

    @_metastore_call
    def drop_database(self, name: str, *, principal: str | None = None) -> dict[str, list[str]]:
        """Unregister a database without tables (its tables must be dropped first), with its views and
        functions; returns those by kind."""
        return self.registry.drop_database(validate_identifier("database", name), principal=principal)

    @_metastore_call
    def alter_database(
        self, name: str, *, updates: Mapping[str, str], removals: Sequence[str]
    ) -> DatabaseRow:
        return self.registry.alter_database(
            validate_identifier("database", name), updates=updates, removals=removals
        )

    @_metastore_call
    def table_row(self, identifier: str) -> TableRow:
        db, name = split_identifier(identifier)
        try:
            with self.lock.connection() as conn:
                return self.registry.get_table_row_on(conn, db, name)
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            raise MetastoreUnavailableError(f"metastore unreachable during table_row: {e}") from e

    @_metastore_call
    def rename_table(self, identifier: str, new_identifier: str) -> None:
        """Rename the table in the catalog; its files stay at its location (a row Java inserted, which has
        none, is given the one its old name computes to). Held under the old name's lock so no commit
        of ours is between reading the row and publishing while the name changes (a commit that started
        before still cannot publish twice: the pointer compare-and-set is by table id, and snapshot
        files are created only if absent)."""
        db, name = split_identifier(identifier)
        new_db, new_name = split_identifier(new_identifier)
        with self._table_lock(db, name, "rename"):
            self.registry.rename_table_row(
                db, name, new_db, new_name, location_if_unset=self.table_location(db, name)
            )

    @_metastore_call
    def alter_table_changes(
        self, identifier: str, changes: Sequence[schema_change.SchemaChange]
    ) -> TableSchema:
        """Apply ``changes`` as one new ``schema-<N+1>`` under the table's lock (so no commit of ours
        publishes on a schema that is being replaced) and record the schema id."""
        db, name = split_identifier(identifier)
        # options set here that place files keep them in the table, or under a root the catalog allows
        # (the options already there are the table's own: a Java table keeps its external paths); the
        # same policy for Paimon and metadata-only tables, as at create
        check_placement_options(
            {c.key: c.value for c in changes if isinstance(c, schema_change.SetOption)},
            table_path=self.location_of(self.registry.get_table_row(db, name)),
            allowed_roots=self.allowed_external_roots,
            warehouse=self.warehouse,
        )
        with self._table_lock(db, name, "alter"):
            row = self.registry.get_table_row(db, name)
            governed = Policies(self.engine, catalog_key=self.registry.catalog_key).of_table(row.table_id)
            if row.table_schema is not None:
                if governed:
                    refuse_ungoverned_changes(identifier, metadata_tables.schema_of(row), governed, changes)
                return metadata_tables.alter(self, row, changes)
            table = self.get_table(identifier)
            if governed:
                refuse_ungoverned_changes(identifier, table.schema, governed, changes)
            schema = schema_change.alter(table, changes)
            # the schema id, and the schema as table-details lists it (migration 0023)
            self.registry.store_schema_summary(row.table_id, json.loads(schema_to_json(schema)))
        return schema

    @_metastore_call
    def replace_schema(self, identifier: str, schema: TableSchema) -> TableSchema:
        """Write ``schema`` (a create's ``schema-0``: its fields, keys, options) as the Paimon table's next
        schema, ``schema-<N+1>``, under the table's lock, and record its id: the schema half of Java's
        ``replaceTable`` (the caller truncated the data first). Refused as a create refuses a schema;
        ``CommitConflictError`` when another engine wrote ``schema-<N+1>`` meanwhile (nothing written)."""
        db, name = split_identifier(identifier)
        limits.check_table(schema)
        FileStoreTable.check_client_schema(schema)
        with self._table_lock(db, name, "replace"):
            row = self.registry.get_table_row(db, name)
            location = self.paimon_location(row)
            check_placement_options(
                schema.options,
                table_path=location,
                allowed_roots=self.allowed_external_roots,
                warehouse=self.warehouse,
            )
            manager = SchemaManager(self.table_file_io(location), location)
            latest = manager.latest()
            staged = replace(
                schema, id=0 if latest is None else latest.id + 1, time_millis=int(time.time() * 1000)
            )
            if not manager.commit_new_schema(staged):
                raise CommitConflictError(
                    f"schema {staged.id} of table {identifier} was written meanwhile; replace again",
                    reason="schema_exists",
                )
            self.registry.store_schema_summary(row.table_id, json.loads(schema_to_json(staged)))
        return staged

    def message_committer(
        self,
        identifier: str,
        commit_user: str,
        *,
        principal: str | None = None,
        row: TableRow | None = None,
        table: FileStoreTable | None = None,
        schema_id: int | None = None,
    ) -> CommitCoordinator:
        """A coordinator committing CommitMessages for ``commit_user`` (the control plane's commit), its
        events naming ``principal``. ``row``/``table``: the table's registry row and a table object the
        caller already holds (a service shares one per table and schema, so its manifest caches stay
        warm); read here otherwise. Commits go to ``table``'s branch. ``schema_id``: the registry schema
        id ``table`` was chosen by, checked under the lock (``MetastoreGuard.schema_id``)."""
        row = row or self.table_row(identifier)
        table = table or self.get_table(identifier)
        guard = self._guard(row, table.snapshot_manager, principal, branch=table.branch_name)
        guard.schema_id = schema_id
        return CommitCoordinator(
            table,
            guard,
            commit_user=commit_user,
        )

    def snapshot_committer(
        self, row: TableRow, table: FileStoreTable, *, principal: str | None = None
    ) -> SnapshotCommitter:
        """A committer of client-built snapshots (the REST ``commit``) for one request; ``table``: the
        table object of ``row`` (its schema and roots check what the snapshot names); commits go to its
        branch."""
        return SnapshotCommitter(
            self._guard(row, table.snapshot_manager, principal, branch=table.branch_name), table
        )

    def _make_partitions_ahead(self) -> None:
        """The commit log's partitions for now and the next two periods made if missing, when this
        catalog is opened and then at most every :data:`PARTITIONS_CHECK_SECONDS` before a commit.

        Invariant: a process that commits through the library alone (no ``paimon-meta serve``, whose
        replicas make them in the background) never reaches a time no partition of the log covers while
        it keeps committing: the check runs hourly and covers two periods (two weeks by default) ahead.
        A failure (the metastore down, a schema before migration 0024) is logged and left to the next
        check; the commit goes on (and fails with ``EventLogPartitionMissingError``, a 503, only if its
        time is really not covered)."""
        now = time.monotonic()
        if self._partitions_checked_at and now - self._partitions_checked_at < PARTITIONS_CHECK_SECONDS:
            return
        with self._partitions_lock:
            if self._partitions_checked_at and now - self._partitions_checked_at < PARTITIONS_CHECK_SECONDS:
                return
            self._partitions_checked_at = now
            try:
                made = EventPartitions(self.engine).ensure_ahead(periods=2)
            except Exception as e:  # a failed check never fails the open or the commit
                _log.warning("could not make the commit log's partitions ahead (retried in an hour): %s", e)
                return
        if made:
            _log.info("made the commit log's partitions %s", ", ".join(made))

    def _guard(
        self, row: TableRow, snapshots: SnapshotManager, principal: str | None = None, *, branch: str = "main"
    ) -> MetastoreGuard:
        self._make_partitions_ahead()
        return MetastoreGuard(
            engine=self.engine,
            lock=self.lock,
            events=self.events,
            registry=self.registry,
            table_row=row,
            snapshots=snapshots,
            lock_id=self.registry.lock_id(row.database, row.name),
            settings=self.lock_settings,
            principal=principal,
            branch=branch,
        )

    # ---- plumbing ----------------------------------------------------------------------------------

    @contextmanager
    def _table_lock(self, database: str, table: str, purpose: str) -> Iterator[None]:
        owner = f"{purpose}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        lease = self.lock.acquire(
            self.registry.lock_id(database, table),
            owner=owner,
            lease_seconds=self.lock_settings.lease_seconds,
            timeout_seconds=self.lock_settings.acquire_timeout_seconds,
        )
        with lease:
            yield

    def _committer_factory(self, row: TableRow) -> Any:
        def factory(table: FileStoreTable, commit_user: str) -> Committer:
            return CommitCoordinator(table, self._guard(row, table.snapshot_manager), commit_user=commit_user)

        return factory

    def close(self) -> None:
        self.lock.close()
        self.file_io.close()
        for other in self._file_ios.values():
            other.close()
        if self._own_engine:
            self.engine.dispose()

    def __enter__(self) -> MetastoreCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _comparable(schema: TableSchema) -> TableSchema:
    return replace(schema, time_millis=0)


def connect(
    metastore_url: str | None = None,
    warehouse: str | None = None,
    *,
    catalog: str | None = None,
    **options: str,
) -> MetastoreCatalog:
    """Connect to the metastore (``metastore_url``, else ``$PAIMON_META_URL``, else an embedded Postgres
    under ``$PAIMON_META_HOME``) and a warehouse (``warehouse``, else ``$PAIMON_META_WAREHOUSE``, else
    ``$PAIMON_META_HOME/warehouse``). The schema is migrated to the latest revision on connect
    (:func:`connect_catalog` with ``migrate=False`` only checks it).

    A commit service (``http(s)://``) is reached with :func:`paimon_meta.connect_service` instead: its
    catalog is another type with no database behind it; both are a
    :class:`~paimon_meta.catalog.base.Catalog`.

    ``catalog``: a catalog of the metastore (``paimon-meta catalogs create``): its warehouse, catalog key,
    storage profile and options are the metastore's (``options`` given here win over its options, e.g.
    the caller's own storage keys); ``warehouse`` is then not given."""
    return connect_catalog(metastore_url, warehouse, options, migrate=True, catalog=catalog)


def connect_catalog(
    metastore_url: str | None,
    warehouse: str | None,
    options: Mapping[str, str],
    *,
    migrate: bool,
    catalog: str | None = None,
) -> MetastoreCatalog:
    """:func:`connect`; with ``migrate`` False (``paimon-meta serve`` unless ``--migrate``) the schema is
    only checked to be within the compatibility window (``db.migrate.compatible``).

    Raises:
        SchemaNotReadyError: ``migrate`` is False and the schema is empty or older than this code's.
        CatalogNotFoundError: ``catalog`` is not a catalog of the metastore.
        ValidationError: ``catalog`` with a ``warehouse``, or with another ``catalog-key`` option.
    """
    if catalog is not None and warehouse is not None:
        raise ValidationError(
            f"give the catalog {catalog!r} or a warehouse, not both: its warehouse is the metastore's",
            catalog=catalog,
        )
    if metastore_url is not None and metastore_url.startswith(("http://", "https://")):
        raise ValidationError(
            f"{metastore_url} is a commit service: use paimon_meta.connect_service(url, token=...)",
            url=metastore_url,
        )
    url = metastore_url or os.environ.get(ENV_URL)
    embedded = url is None
    if url is None:
        url = ensure_embedded_postgres().url
    engine = make_engine(url)
    try:
        if migrate:
            upgrade(engine)
        else:
            check_compatible(engine)
        default = True
        if catalog is None:
            wh = resolve_location(
                warehouse or os.environ.get(ENV_WAREHOUSE) or str(Path(default_home()) / "warehouse")
            )
            opts = dict(options)
        else:
            wh, opts, default = _catalog_of(engine, catalog, options)
    except BaseException:
        engine.dispose()
        raise
    return MetastoreCatalog(
        engine, wh, opts, info=ConnectInfo(str(url), wh, embedded), default_catalog=default
    )


def _catalog_of(engine: Engine, name: str, options: Mapping[str, str]) -> tuple[str, dict[str, str], bool]:
    """The warehouse and options of the metastore's catalog ``name`` (``options`` win, but for the
    catalog key, which must be the catalog's), and whether it is the service's default catalog (the one
    ``serve`` recorded: the grants naming no catalog are its own)."""
    info = Catalogs(engine).get(name)
    given = options.get(CATALOG_KEY)
    if given is not None and given != info.catalog_key:
        raise ValidationError(
            f"catalog {name!r} has catalog key {info.catalog_key!r}, not {given!r}: drop the {CATALOG_KEY} "
            "option",
            catalog=name,
            option=CATALOG_KEY,
        )
    return (
        info.warehouse,
        {**info.storage_options(), **options, CATALOG_KEY: info.catalog_key},
        info.default,
    )
