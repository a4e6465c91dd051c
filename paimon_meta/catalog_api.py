"""``paimon_meta.connect()``: a catalog over the Postgres metastore and a warehouse (local path or s3://).

Tables obtained from a :class:`Catalog` commit through the metastore guard: the Java-compatible lock with
lease, heartbeat and fencing token, the append-only event log, and the table pointer. Tables live at
``<warehouse>/<db>.db/<table>`` as Java's catalogs lay them out.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pyarrow as pa
from sqlalchemy import Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from paimon_meta.catalog.events import EventLog
from paimon_meta.catalog.lock import MetastoreLock
from paimon_meta.catalog.registry import Registry, TableRow, validate_identifier
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.metastore_guard import LockSettings, MetastoreGuard
from paimon_meta.db.embedded import default_home, ensure_embedded_postgres
from paimon_meta.db.engine import make_engine
from paimon_meta.db.migrate import upgrade
from paimon_meta.errors import (
    DatabaseAlreadyExistsError,
    MetastoreUnavailableError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ValidationError,
)
from paimon_meta.io import get_file_io
from paimon_meta.io.base import FileIO
from paimon_meta.serde.json import schema_to_json
from paimon_meta.spec.arrow import from_arrow_schema
from paimon_meta.spec.schema import TableSchema
from paimon_meta.table import schema_change
from paimon_meta.table.builder import Committer
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable

ENV_URL = "PAIMON_META_URL"
ENV_WAREHOUSE = "PAIMON_META_WAREHOUSE"

# Catalog options (the rest of ``options`` configure the FileIO, e.g. ``s3.endpoint``).
LOCK_LEASE = "lock.lease-seconds"
LOCK_ACQUIRE_TIMEOUT = "lock.acquire-timeout-seconds"
CATALOG_KEY = "catalog-key"
_CATALOG_OPTIONS = {LOCK_LEASE, LOCK_ACQUIRE_TIMEOUT, CATALOG_KEY}


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


def split_identifier(identifier: str) -> tuple[str, str]:
    """``"db.table"`` -> ``("db", "table")``, both validated."""
    parts = identifier.split(".")
    if len(parts) != 2:
        raise ValidationError(
            f"table identifier must be '<database>.<table>', got {identifier!r}", identifier=identifier
        )
    return validate_identifier("database", parts[0]), validate_identifier("table", parts[1])


@dataclass(frozen=True, slots=True)
class ConnectInfo:
    metastore_url: str
    warehouse: str
    embedded: bool


class Catalog:
    """Databases and tables registered in the metastore. Close it (or use ``with``) when done."""

    def __init__(
        self, engine: Engine, warehouse: str, options: Mapping[str, str], *, info: ConnectInfo
    ) -> None:
        self.engine = engine
        self.info = info
        self.warehouse = warehouse.rstrip("/")
        self.options = dict(options)
        self.file_io_options = {k: v for k, v in options.items() if k not in _CATALOG_OPTIONS}
        self.file_io: FileIO = get_file_io(self.warehouse, self.file_io_options)
        self.registry = Registry(engine, catalog_key=options.get(CATALOG_KEY, "jdbc"))
        self.events = EventLog(engine)
        self.lock = MetastoreLock(engine)
        self.lock_settings = LockSettings(
            lease_seconds=int(options.get(LOCK_LEASE, "30")),
            acquire_timeout_seconds=float(options.get(LOCK_ACQUIRE_TIMEOUT, "60")),
        )

    # ---- databases ---------------------------------------------------------------------------------

    @_metastore_call
    def create_database(self, name: str, *, ignore_if_exists: bool = True) -> None:
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
        db, name = split_identifier(identifier)
        if not self.registry.database_exists(db):
            self.create_database(db)
        try:
            self.registry.get_table_row(db, name)
        except TableNotFoundError:
            pass
        else:
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(f"table {identifier} already exists", identifier=identifier)
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
        location = self.table_location(db, name)
        manager = SchemaManager(self.file_io, location)
        if not manager.commit_new_schema(table_schema):
            existing = manager.schema(0)
            if schema_to_json(_comparable(existing)) != schema_to_json(_comparable(table_schema)):
                raise TableAlreadyExistsError(
                    f"{location} already holds a different table; drop it or choose another name",
                    identifier=identifier,
                    path=location,
                )
        self.registry.create_table_row(db, name, location, uuid.uuid4(), 0)
        return self.get_table(identifier)

    @_metastore_call
    def get_table(self, identifier: str) -> FileStoreTable:
        """The table, wired to commit through the metastore guard."""
        db, name = split_identifier(identifier)
        row = self.registry.get_table_row(db, name)
        location = row.location or self.table_location(db, name)
        table = FileStoreTable.load(self.file_io, location)
        table.committer_factory = self._committer_factory(row)
        return table

    @_metastore_call
    def list_tables(self, database: str) -> list[str]:
        return sorted(
            r.name for r in self.registry.list_table_rows(validate_identifier("database", database))
        )

    @_metastore_call
    def drop_table(self, identifier: str, *, purge: bool = True) -> None:
        """Unregister the table and (``purge``, Java's behaviour) delete its files."""
        db, name = split_identifier(identifier)
        row = self.registry.drop_table_row(db, name)
        if purge:
            location = row.location or self.table_location(db, name)
            for status in self.file_io.list_recursive(location):
                self.file_io.delete(status.path)

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

    # ---- plumbing ----------------------------------------------------------------------------------

    def _committer_factory(self, row: TableRow) -> Any:
        lock_id = self.registry.lock_id(row.database, row.name)

        def factory(table: FileStoreTable, commit_user: str) -> Committer:
            guard = MetastoreGuard(
                engine=self.engine,
                lock=self.lock,
                events=self.events,
                registry=self.registry,
                table_row=row,
                snapshots=table.snapshot_manager,
                lock_id=lock_id,
                settings=self.lock_settings,
            )
            return CommitCoordinator(table, guard, commit_user=commit_user)

        return factory

    def close(self) -> None:
        self.lock.close()
        self.file_io.close()
        self.engine.dispose()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _comparable(schema: TableSchema) -> TableSchema:
    return replace(schema, time_millis=0)


def connect(
    metastore_url: str | None = None,
    warehouse: str | None = None,
    **options: str,
) -> Catalog:
    """Connect to the metastore (``metastore_url``, else ``$PAIMON_META_URL``, else an embedded Postgres
    under ``$PAIMON_META_HOME``) and a warehouse (``warehouse``, else ``$PAIMON_META_WAREHOUSE``, else
    ``$PAIMON_META_HOME/warehouse``). The schema is migrated to the latest revision on connect."""
    url = metastore_url or os.environ.get(ENV_URL)
    embedded = url is None
    if url is None:
        url = ensure_embedded_postgres().url
    wh = warehouse or os.environ.get(ENV_WAREHOUSE) or str(Path(default_home()) / "warehouse")
    engine = make_engine(url)
    upgrade(engine)
    return Catalog(engine, wh, options, info=ConnectInfo(str(url), wh, embedded))
