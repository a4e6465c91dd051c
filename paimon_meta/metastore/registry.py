"""The catalog registry: database and table rows in the metastore (not the tables' storage).

Rows live in Java Paimon's ``paimon_tables`` / ``paimon_database_properties`` (extended with our
columns), so a Java ``JdbcCatalog`` on the same database and catalog key sees our databases and tables,
and we see Java's (with NULL location/uuid/pointer). ``advance_pointer`` is the compare-and-set of a
table's latest snapshot id, run in the transaction that records the ``snapshot_published`` event.

Every method takes an optional ``conn``: pass one to run inside the caller's transaction, else the
method uses its own. Errors raised inside a caller's transaction are raised after a savepoint rollback,
so the caller's transaction stays usable.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    case,
    delete,
    func,
    insert,
    select,
    text,
    tuple_,
    union,
    union_all,
    update,
)
from sqlalchemy.exc import IntegrityError

from paimon_meta.db.models import PaimonDatabase, PaimonDatabaseProperty, PaimonTable
from paimon_meta.db.pool import RawConnection, ServerStatement, run_batch
from paimon_meta.errors import (
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    SnapshotPointerConflictError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TableRowChangedError,
    ValidationError,
)
from paimon_meta.io.base import key_ancestors, keys_overlap, location_key, normalise_uri
from paimon_meta.metastore.assignments import on_database_dropped, on_table_dropped, on_table_renamed
from paimon_meta.metastore.catalog_objects import drop_database_objects, lock_object_name, view_exists
from paimon_meta.metastore.lock import DEFAULT_CATALOG_KEY, lock_id_for
from paimon_meta.model import limits
from paimon_meta.model.identifier import validate_identifier

# Java's JdbcCatalog property keys (DATABASE_EXISTS_PROPERTY, Catalog.DB_LOCATION_PROP).
_JAVA_EXISTS_KEY = "exists"
_JAVA_LOCATION_KEY = "location"
_JAVA_MAX_PROPERTY_VALUE = 1000

#: The pointer compare-and-set of :meth:`Registry.advance_pointer` in psycopg's paramstyle.
ADVANCE_POINTER_SQL = (
    "UPDATE paimon_tables SET latest_snapshot_id = %(new_snapshot_id)s, updated_at = now() "
    "WHERE table_id = %(table_id)s "
    "AND latest_snapshot_id IS NOT DISTINCT FROM %(expected_prev)s::bigint "
    "RETURNING table_id"
)
#: A table's pointer in psycopg's paramstyle (no row: no such table).
POINTER_SQL = "SELECT latest_snapshot_id FROM paimon_tables WHERE table_id = %(table_id)s"


@dataclass(frozen=True, slots=True)
class DatabaseRow:
    """A database. ``database_id`` is None for a database only Java's property rows know about."""

    database_id: int | None
    catalog_key: str
    name: str
    location: str | None
    properties: dict[str, str] = field(default_factory=dict)
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Within:
    """A listing limited to some databases (every table of each) and some tables (``(database, name)``):
    what a caller's grants reach, so a page of a principal allowed a few tables reads those rows, never
    every row of the registry (issue 39 item 5). A superset of what the caller may read is harmless:
    the caller checks each row again."""

    databases: tuple[str, ...] = ()
    tables: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class TableRow:
    """A registered table. ``location``/``table_uuid`` are None for rows Java inserted."""

    table_id: int
    catalog_key: str
    database: str
    name: str
    location: str | None
    table_uuid: uuid.UUID | None
    schema_id: int | None
    latest_snapshot_id: int | None
    created_at: datetime
    updated_at: datetime
    timeline: int = 0
    #: The schema JSON of a table the catalog keeps as metadata only (format, object, Iceberg tables);
    #: None for Paimon tables, whose schemas are on storage.
    table_schema: dict[str, Any] | None = None
    #: A Paimon table's current schema JSON as this release last stored it (migration 0023), or None;
    #: trusted only while its ``id`` is ``schema_id`` (:meth:`MetastoreCatalog.listed_metadata`). Read by
    #: the listings that select every column (``table_rows_page``), not by the per-request row lookup.
    schema_summary: dict[str, Any] | None = None

    @property
    def identifier(self) -> str:
        """``<database>.<table>``."""
        return f"{self.database}.{self.name}"

    @classmethod
    def from_row(cls, row: Row[Any]) -> TableRow:
        """Build from a row selecting all ``paimon_tables`` columns."""
        return cls.from_mapping(row._mapping)

    @classmethod
    def from_mapping(cls, m: Mapping[Any, Any]) -> TableRow:
        """Build from a mapping of the ``paimon_tables`` columns (:data:`TABLE_ROW_COLUMNS` at least)."""
        return cls(
            table_id=m["table_id"],
            catalog_key=m["catalog_key"],
            database=m["database_name"],
            name=m["table_name"],
            location=m["location"],
            table_uuid=m["table_uuid"],
            schema_id=m["schema_id"],
            latest_snapshot_id=m["latest_snapshot_id"],
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            timeline=m.get("timeline", 0),
            table_schema=m.get("table_schema"),
            schema_summary=m.get("schema_summary"),
        )


# The databases of a catalog's tables (Java's rows name databases only there), one primary-key probe per
# database (a skip scan): a listing of databases costs its databases, not the registry's 10^5 tables.
_TABLE_DATABASES = text(
    "WITH RECURSIVE d(name) AS ("
    " SELECT min(database_name) FROM paimon_tables WHERE catalog_key = :catalog_key"
    " UNION ALL SELECT (SELECT min(t.database_name) FROM paimon_tables t"
    "  WHERE t.catalog_key = :catalog_key AND t.database_name > d.name)"
    " FROM d WHERE d.name IS NOT NULL) "
    "SELECT name FROM d WHERE name IS NOT NULL"
)

TABLE_ROW_COLUMNS = (
    "table_id, catalog_key, database_name, table_name, location, table_uuid, schema_id, "
    "latest_snapshot_id, created_at, updated_at, timeline, table_schema"
)
# One round trip on a plain session (no transaction, planned once per connection): the hot lookup of
# every service request that names a table.
_TABLE_ROW = ServerStatement(
    "paimon_table_row",
    "SELECT " + TABLE_ROW_COLUMNS + " FROM paimon_tables WHERE catalog_key = %(catalog_key)s "  # noqa: S608 - constants
    "AND database_name = %(database)s AND table_name = %(name)s",
    (("catalog_key", "text"), ("database", "text"), ("name", "text")),
)


#: The advisory lock every change that adds a location to the registry takes in its transaction (a create,
#: a register, a Java row's rename), so that two of them cannot both pass the overlap check.
_LOCATIONS_LOCK = "paimon-meta table locations"


def lock_locations(conn: Connection) -> None:
    """Serialise, until ``conn``'s transaction ends, everything that adds a table location."""
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": _LOCATIONS_LOCK})


def _java_location_key(warehouse_key: str, key: str) -> tuple[str | None, str | None] | None:
    """Which rows Java inserted (no location: theirs is ``<warehouse>/<db>.db/<name>``) a location with
    ``key`` overlaps: None for none, ``(None, None)`` for every one, ``(db, None)`` for every one of a
    database, ``(db, name)`` for one."""
    if keys_overlap(key, warehouse_key) and not key.startswith(warehouse_key.rstrip("/") + "/"):
        return None, None  # the warehouse itself or around it
    if not key.startswith(warehouse_key.rstrip("/") + "/"):
        return None
    relative = key[len(warehouse_key.rstrip("/")) + 1 :].split("/")
    if not relative[0].endswith(".db") or len(relative[0]) <= 3:
        return None
    return relative[0][:-3], (relative[1] if len(relative) > 1 else None)


def overlap_error(location: str, holder: TableRow, **fields: Any) -> TableAlreadyExistsError:
    """The refusal of ``location`` because ``holder``'s files are there (409 over HTTP)."""
    where = holder.location or "its warehouse directory"
    return TableAlreadyExistsError(
        f"{location} overlaps the files of table {holder.identifier} ({where})",
        path=location,
        holder=holder.identifier,
        **fields,
    )


def _constraint(exc: IntegrityError) -> str | None:
    diag = getattr(exc.orig, "diag", None)
    return getattr(diag, "constraint_name", None)


class Registry:
    """Databases and tables of one catalog key (Java's ``catalog-key``, default ``jdbc``)."""

    def __init__(self, engine: Engine, *, catalog_key: str = DEFAULT_CATALOG_KEY) -> None:
        self._engine = engine
        self.catalog_key = validate_identifier("catalog key", catalog_key)

    @property
    def engine(self) -> Engine:
        return self._engine

    @contextmanager
    def _tx(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is None:
            with self._engine.begin() as own:
                yield own
        else:
            yield conn

    def lock_id(self, database: str, table: str) -> str:
        """The lock id of a table (Java's ``<catalog-key>.<database>.<table>``)."""
        return lock_id_for(database, table, catalog_key=self.catalog_key)

    # -- databases -----------------------------------------------------------------------------

    def create_database(
        self,
        name: str,
        *,
        location: str | None = None,
        properties: Mapping[str, str] | None = None,
        conn: Connection | None = None,
    ) -> DatabaseRow:
        """Register a database; also writes Java's ``exists``/``location`` property rows.

        Raises:
            ValidationError: bad name or property.
            DatabaseAlreadyExistsError: known to us or to Java.
        """
        validate_identifier("database", name)
        props = dict(properties or {})
        java_props = {**props, _JAVA_EXISTS_KEY: "true"}
        if location is not None:
            java_props[_JAVA_LOCATION_KEY] = location
        for key, value in java_props.items():
            if not key or len(key) > 255 or len(value) > _JAVA_MAX_PROPERTY_VALUE:
                raise ValidationError(f"database property {key!r} too long or empty", key=key)
        with self._tx(conn) as c:
            if self.database_exists(name, conn=c):
                raise DatabaseAlreadyExistsError(f"database {name!r} already exists", database=name)
            try:
                with c.begin_nested():
                    row = c.execute(
                        insert(PaimonDatabase)
                        .values(
                            catalog_key=self.catalog_key,
                            database_name=name,
                            location=location,
                            properties=props,
                        )
                        .returning(PaimonDatabase.database_id, PaimonDatabase.created_at)
                    ).one()
                    c.execute(
                        insert(PaimonDatabaseProperty),
                        [
                            {
                                "catalog_key": self.catalog_key,
                                "database_name": name,
                                "property_key": k,
                                "property_value": v,
                            }
                            for k, v in java_props.items()
                        ],
                    )
            except IntegrityError as exc:
                raise DatabaseAlreadyExistsError(f"database {name!r} already exists", database=name) from exc
        return DatabaseRow(row.database_id, self.catalog_key, name, location, props, row.created_at)

    def database_exists(self, name: str, *, conn: Connection | None = None) -> bool:
        """True if we or Java (property or table rows) know the database."""
        return name in self._database_names(conn, only=name)

    def list_databases(self, *, conn: Connection | None = None) -> list[str]:
        """Database names of this catalog key, ours and Java's, sorted."""
        return sorted(self._database_names(conn, only=None))

    def _database_names(self, conn: Connection | None, only: str | None) -> set[str]:
        key = self.catalog_key
        ours = select(PaimonDatabase.database_name.label("name")).where(PaimonDatabase.catalog_key == key)
        props = select(PaimonDatabaseProperty.database_name.label("name")).where(
            PaimonDatabaseProperty.catalog_key == key
        )
        if only is not None:
            ours = ours.where(PaimonDatabase.database_name == only)
            props = props.where(PaimonDatabaseProperty.database_name == only)
            tables = select(PaimonTable.database_name.label("name")).where(
                PaimonTable.catalog_key == key, PaimonTable.database_name == only
            )
            with self._tx(conn) as c:
                return set(c.execute(union(ours, props, tables)).scalars())
        with self._tx(conn) as c:
            names = set(c.execute(union(ours, props)).scalars())
            names.update(c.execute(_TABLE_DATABASES, {"catalog_key": key}).scalars())
            return names

    def get_database(self, name: str, *, conn: Connection | None = None) -> DatabaseRow:
        """The database row (synthesised from Java's property rows if only Java knows it).

        Raises:
            DatabaseNotFoundError: unknown database.
        """
        with self._tx(conn) as c:
            row = c.execute(
                select(PaimonDatabase).where(
                    PaimonDatabase.catalog_key == self.catalog_key, PaimonDatabase.database_name == name
                )
            ).first()
            if row is not None:
                db = row._mapping  # a Core select of the model: its columns, not an ORM object
                return DatabaseRow(
                    db["database_id"],
                    db["catalog_key"],
                    name,
                    db["location"],
                    dict(db["properties"]),
                    db["created_at"],
                )
            props = {
                r.property_key: r.property_value or ""
                for r in c.execute(
                    select(PaimonDatabaseProperty.property_key, PaimonDatabaseProperty.property_value).where(
                        PaimonDatabaseProperty.catalog_key == self.catalog_key,
                        PaimonDatabaseProperty.database_name == name,
                    )
                )
            }
        if not props and not self.database_exists(name, conn=conn):
            raise DatabaseNotFoundError(f"database {name!r} does not exist", database=name)
        location = props.pop(_JAVA_LOCATION_KEY, None)
        props.pop(_JAVA_EXISTS_KEY, None)
        return DatabaseRow(None, self.catalog_key, name, location, props)

    def drop_database(
        self, name: str, *, principal: str | None = None, conn: Connection | None = None
    ) -> dict[str, list[str]]:
        """Unregister a database without tables (ours and Java's property rows), with its views and
        functions (each a ``dropped`` event naming ``principal``), in one transaction: a view or
        function created concurrently either lands before and goes with it or finds no database.
        Returns the dropped views and functions by kind.

        Raises:
            DatabaseNotFoundError: unknown database.
            ValidationError: it still has tables.
        """
        with self._tx(conn) as c:
            if not self.database_exists(name, conn=c):
                raise DatabaseNotFoundError(f"database {name!r} does not exist", database=name)
            if self.list_table_rows(name, conn=c):
                raise ValidationError(f"database {name!r} is not empty: drop its tables first", database=name)
            dropped = drop_database_objects(c, self.catalog_key, name, principal=principal)
            key = self.catalog_key
            on_database_dropped(c, catalog_key=key, default=False, database=name, principal=principal)
            c.execute(
                delete(PaimonDatabase).where(
                    PaimonDatabase.catalog_key == key, PaimonDatabase.database_name == name
                )
            )
            c.execute(
                delete(PaimonDatabaseProperty).where(
                    PaimonDatabaseProperty.catalog_key == key, PaimonDatabaseProperty.database_name == name
                )
            )
        return dropped

    def alter_database(
        self,
        name: str,
        *,
        updates: Mapping[str, str],
        removals: Sequence[str],
        conn: Connection | None = None,
    ) -> DatabaseRow:
        """Set and remove database properties (``location`` and Java's ``exists`` are not properties).

        Raises:
            DatabaseNotFoundError: unknown database (or one only Java knows: its rows are Java's).
            ValidationError: a reserved or over-long key or value (``FieldTooLargeError``: more or
                longer properties than ``model.limits`` lets a database keep).
        """
        for key, value in updates.items():
            if key in (_JAVA_EXISTS_KEY, _JAVA_LOCATION_KEY) or not key or len(key) > 255:
                raise ValidationError(f"database property {key!r} cannot be set", key=key)
            if len(value) > _JAVA_MAX_PROPERTY_VALUE:
                raise ValidationError(f"database property {key!r}: value too long", key=key)
        for key in removals:
            if key in (_JAVA_EXISTS_KEY, _JAVA_LOCATION_KEY):
                raise ValidationError(f"database property {key!r} cannot be removed", key=key)
        with self._tx(conn) as c:
            current = self.get_database(name, conn=c)
            if current.database_id is None:
                raise DatabaseNotFoundError(f"database {name!r} is Java's: alter it from Java", database=name)
            props = {k: v for k, v in current.properties.items() if k not in set(removals)} | dict(updates)
            limits.check_options("database", "options", props, current.properties)
            key = self.catalog_key
            c.execute(
                update(PaimonDatabase)
                .where(PaimonDatabase.database_id == current.database_id)
                .values(properties=props)
            )
            c.execute(
                delete(PaimonDatabaseProperty).where(
                    PaimonDatabaseProperty.catalog_key == key,
                    PaimonDatabaseProperty.database_name == name,
                    PaimonDatabaseProperty.property_key.in_([*removals, *updates]),
                )
            )
            if updates:
                c.execute(
                    insert(PaimonDatabaseProperty),
                    [
                        {"catalog_key": key, "database_name": name, "property_key": k, "property_value": v}
                        for k, v in updates.items()
                    ],
                )
        return DatabaseRow(current.database_id, key, name, current.location, props, current.created_at)

    # -- tables --------------------------------------------------------------------------------

    def create_table_row(
        self,
        database: str,
        name: str,
        location: str,
        table_uuid: uuid.UUID,
        schema_id: int,
        *,
        table_schema: Mapping[str, Any] | None = None,
        warehouse: str | None = None,
        conn: Connection | None = None,
    ) -> TableRow:
        """Register a table whose storage exists at ``location`` (pointer starts at NULL); a table the
        catalog keeps as metadata only carries its schema JSON in ``table_schema``. The row keeps
        ``location`` in its normal form (:func:`~paimon_meta.io.base.normalise_uri`) and its key.

        Invariant: no two rows' locations are equal or nest, whatever their spellings: checked on the
        keys in this transaction under :func:`lock_locations` (``warehouse``: the catalog's, for the
        rows Java inserted, whose location is computed from their names).

        Raises:
            ValidationError: bad names, empty location (``LocationError``: no normal form), negative
                schema id.
            DatabaseNotFoundError: the database is unknown.
            TableAlreadyExistsError: the name, or the table uuid, is already registered; or another
                table's location equals, contains or lies inside this one.
        """
        validate_identifier("database", database)
        validate_identifier("table", name)
        if not location:
            raise ValidationError("table location must not be empty", table=f"{database}.{name}")
        if schema_id < 0:
            raise ValidationError(f"schema id must be >= 0, got {schema_id}", schema_id=schema_id)
        location, key = normalise_uri(location), location_key(location)
        with self._tx(conn) as c:
            if not self.database_exists(database, conn=c):
                raise DatabaseNotFoundError(f"database {database!r} does not exist", database=database)
            # Java's JdbcCatalog refuses a table with a view's name; a view create takes the same lock.
            lock_object_name(c, self.catalog_key, database, name)
            if view_exists(c, self.catalog_key, database, name):
                raise TableAlreadyExistsError(
                    f"a view {database}.{name} has that name", table=f"{database}.{name}"
                )
            lock_locations(c)
            holders = self.table_rows_overlapping(location, warehouse=warehouse, conn=c)
            if holders:
                raise overlap_error(location, holders[0], identifier=f"{database}.{name}")
            try:
                with c.begin_nested():
                    row = c.execute(
                        insert(PaimonTable)
                        .values(
                            catalog_key=self.catalog_key,
                            database_name=database,
                            table_name=name,
                            location=location,
                            location_key=key,
                            table_uuid=table_uuid,
                            schema_id=schema_id,
                            table_schema=None if table_schema is None else dict(table_schema),
                        )
                        .returning(*PaimonTable.__table__.c)
                    ).one()
            except IntegrityError as exc:
                if _constraint(exc) == "uq_paimon_tables_table_uuid":
                    raise TableAlreadyExistsError(
                        f"a table with uuid {table_uuid} is already registered",
                        table=f"{database}.{name}",
                        table_uuid=str(table_uuid),
                    ) from exc
                raise TableAlreadyExistsError(
                    f"table {database}.{name} already exists", table=f"{database}.{name}"
                ) from exc
        return TableRow.from_row(row)

    def get_table_row(self, database: str, name: str, *, conn: Connection | None = None) -> TableRow:
        """The table's row.

        Raises:
            TableNotFoundError: not registered.
        """
        query = select(*PaimonTable.__table__.c).where(
            PaimonTable.catalog_key == self.catalog_key,
            PaimonTable.database_name == database,
            PaimonTable.table_name == name,
        )
        with self._tx(conn) as c:
            row = c.execute(query).first()
        if row is None:
            raise TableNotFoundError(f"table {database}.{name} does not exist", table=f"{database}.{name}")
        return TableRow.from_row(row)

    def get_table_row_on(self, conn: RawConnection, database: str, name: str) -> TableRow:
        """:meth:`get_table_row` on a plain session connection of the lock's pool, in one round trip.

        Raises:
            TableNotFoundError: not registered.
        """
        params = {"catalog_key": self.catalog_key, "database": database, "name": name}
        rows = run_batch(conn, [_TABLE_ROW.bind(params)])[0]
        if not rows:
            raise TableNotFoundError(f"table {database}.{name} does not exist", table=f"{database}.{name}")
        return TableRow.from_mapping(rows[0])

    def get_table_row_by_id(self, table_id: int, *, conn: Connection | None = None) -> TableRow:
        """The row with surrogate id ``table_id`` (any catalog key).

        Raises:
            TableNotFoundError: no such id.
        """
        with self._tx(conn) as c:
            row = c.execute(select(*PaimonTable.__table__.c).where(PaimonTable.table_id == table_id)).first()
        if row is None:
            raise TableNotFoundError(f"no table with id {table_id}", table_id=table_id)
        return TableRow.from_row(row)

    def table_rows_overlapping(
        self,
        location: str,
        *,
        warehouse: str | None = None,
        exclude_table_id: int | None = None,
        conn: Connection | None = None,
    ) -> list[TableRow]:
        """Rows (any catalog key) whose location is ``location``, lies inside it or contains it, compared
        on location keys (every spelling of a place is one key): two registered tables must never share
        files. Rows a replica not yet upgraded inserted (a location, no key) are compared by their
        location's key; with ``warehouse``, rows Java inserted under this catalog key (no location:
        ``<warehouse>/<db>.db/<name>``) too. ``exclude_table_id``: a row not to report (the caller's).

        Raises:
            LocationError: ``location`` has no normal form.
        """
        key = location_key(location)
        prefix = key if key.endswith("/") else key + "/"
        keyed = PaimonTable.location_key.in_([key, *key_ancestors(key)]) | (
            (PaimonTable.location_key >= prefix) & (PaimonTable.location_key < prefix[:-1] + "0")
        )
        queries = [select(*PaimonTable.__table__.c).where(keyed)]
        unkeyed = select(*PaimonTable.__table__.c).where(
            PaimonTable.location.is_not(None), PaimonTable.location_key.is_(None)
        )
        java = _java_location_key(location_key(warehouse), key) if warehouse else None
        if java is not None:
            db, name = java
            query = select(*PaimonTable.__table__.c).where(
                PaimonTable.catalog_key == self.catalog_key, PaimonTable.location.is_(None)
            )
            if db is not None:
                query = query.where(PaimonTable.database_name == db)
            if name is not None:
                query = query.where(PaimonTable.table_name == name)
            queries.append(query)
        found: dict[int, TableRow] = {}
        with self._tx(conn) as c:
            for query in queries:
                for r in c.execute(query):
                    found.setdefault(r.table_id, TableRow.from_row(r))
            for r in c.execute(unkeyed):
                try:
                    if keys_overlap(key, location_key(r.location)):
                        found.setdefault(r.table_id, TableRow.from_row(r))
                except ValidationError:
                    continue  # no normal form: not a place any reader of ours opens
        return sorted((r for r in found.values() if r.table_id != exclude_table_id), key=lambda r: r.table_id)

    def list_table_rows(self, database: str, *, conn: Connection | None = None) -> list[TableRow]:
        """Rows of one database, by name.

        Raises:
            DatabaseNotFoundError: unknown database.
        """
        query = (
            select(*PaimonTable.__table__.c)
            .where(PaimonTable.catalog_key == self.catalog_key, PaimonTable.database_name == database)
            .order_by(PaimonTable.table_name)
        )
        with self._tx(conn) as c:
            if not self.database_exists(database, conn=c):
                raise DatabaseNotFoundError(f"database {database!r} does not exist", database=database)
            return [TableRow.from_row(r) for r in c.execute(query)]

    def table_rows_page(
        self,
        *,
        database: str | None = None,
        database_pattern: str | None = None,
        table_pattern: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        summaries: bool = False,
        within: Within | None = None,
        conn: Connection | None = None,
    ) -> list[TableRow]:
        """At most ``limit`` rows ordered by (database, table), after ``after`` (keyset paging on the
        primary key's index: a page costs the same at the 1st or the 1,000th table). Patterns are SQL
        LIKE with ``%`` and ``_`` and no escape character, as ``convert.like_match`` reads them. Each
        row's stored schema summary only with ``summaries`` (``table-details``: the other listings do
        not carry every table's schema JSON). ``within``: only those databases' and tables' rows.

        Raises:
            DatabaseNotFoundError: ``database`` given and unknown.
        """
        query = self.table_rows_query(
            database=database,
            database_pattern=database_pattern,
            table_pattern=table_pattern,
            after=after,
            limit=limit,
            summaries=summaries,
            within=within,
        )
        with self._tx(conn) as c:
            if database is not None and not self.database_exists(database, conn=c):
                raise DatabaseNotFoundError(f"database {database!r} does not exist", database=database)
            return [] if query is None else [TableRow.from_row(r) for r in c.execute(query)]

    def table_rows_query(
        self,
        *,
        database: str | None = None,
        database_pattern: str | None = None,
        table_pattern: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        summaries: bool = False,
        within: Within | None = None,
    ) -> Any:
        """The SELECT of :meth:`table_rows_page` (None: ``within`` reaches nothing there)."""
        key = self.catalog_key
        columns = [c for c in PaimonTable.__table__.c if summaries or c.name != "schema_summary"]

        def page(*conditions: Any) -> Any:
            query = select(*columns).where(PaimonTable.catalog_key == key, *conditions)
            if database is not None:
                query = query.where(PaimonTable.database_name == database)
            if database_pattern:
                query = query.where(PaimonTable.database_name.like(database_pattern, escape=""))
            if table_pattern:
                query = query.where(PaimonTable.table_name.like(table_pattern, escape=""))
            if after is not None:
                query = query.where(
                    tuple_(PaimonTable.database_name, PaimonTable.table_name) > tuple_(after[0], after[1])
                )
            return query.order_by(PaimonTable.database_name, PaimonTable.table_name).limit(limit)

        if within is None:
            return page()
        # one index range per database reached (each stopped by the page's LIMIT) and one probe per
        # table reached, merged: the page reads what the grants reach, not the registry
        databases = [d for d in within.databases if database is None or d == database]
        tables = [
            t for t in within.tables if (database is None or t[0] == database) and t[0] not in databases
        ]
        parts = [page(PaimonTable.database_name == d).subquery() for d in databases]
        if tables:
            parts.append(
                page(tuple_(PaimonTable.database_name, PaimonTable.table_name).in_(tables)).subquery()
            )
        if not parts:
            return None
        merged = union_all(*(select(p) for p in parts)).subquery()
        return select(merged).order_by(merged.c.database_name, merged.c.table_name).limit(limit)

    def get_table_row_by_uuid(self, table_uuid: uuid.UUID, *, conn: Connection | None = None) -> TableRow:
        """The row of this catalog key whose table uuid is ``table_uuid`` (the protocol's table id).

        Raises:
            TableNotFoundError: no such table.
        """
        query = select(*PaimonTable.__table__.c).where(
            PaimonTable.catalog_key == self.catalog_key, PaimonTable.table_uuid == table_uuid
        )
        with self._tx(conn) as c:
            row = c.execute(query).first()
        if row is None:
            raise TableNotFoundError(f"no table with id {table_uuid}", table_id=str(table_uuid))
        return TableRow.from_row(row)

    def drop_table_row(self, database: str, name: str, *, conn: Connection | None = None) -> TableRow:
        """Remove the table's row (storage untouched; its events stay in the log under its table_id).

        Raises:
            TableNotFoundError: not registered.
        """
        query = (
            delete(PaimonTable)
            .where(
                PaimonTable.catalog_key == self.catalog_key,
                PaimonTable.database_name == database,
                PaimonTable.table_name == name,
            )
            .returning(*PaimonTable.__table__.c)
        )
        with self._tx(conn) as c:
            row = c.execute(query).first()
            if row is not None:  # its assignments and policies go with it (migration 0022)
                on_table_dropped(
                    c,
                    catalog_key=self.catalog_key,
                    default=False,
                    table_id=row.table_id,
                    database=database,
                    table=name,
                    principal=None,
                )
        if row is None:
            raise TableNotFoundError(f"table {database}.{name} does not exist", table=f"{database}.{name}")
        return TableRow.from_row(row)

    def rename_table_row(
        self,
        database: str,
        name: str,
        new_database: str,
        new_name: str,
        *,
        location_if_unset: str | None = None,
        conn: Connection | None = None,
    ) -> TableRow:
        """Rename a table's row; its location (and so its files) stay where they are, and its
        ``table_id``, pointer and events go with it. A row with no location (Java inserted it: its
        location is computed from its name) gets ``location_if_unset``, the one computed from the old
        name, in the same update: without it the renamed row would point at the new name's (empty)
        directory, and the table would silently read as another one.

        Raises:
            TableNotFoundError: the source is not registered (or the target database does not exist).
            TableAlreadyExistsError: the target name is taken.
        """
        validate_identifier("database", new_database)
        validate_identifier("table", new_name)
        unset = None if location_if_unset is None else normalise_uri(location_if_unset)
        unset_key = None if location_if_unset is None else location_key(location_if_unset)
        with self._tx(conn) as c:
            if not self.database_exists(new_database, conn=c):
                raise DatabaseNotFoundError(
                    f"database {new_database!r} does not exist", database=new_database
                )
            lock_object_name(c, self.catalog_key, new_database, new_name)
            if view_exists(c, self.catalog_key, new_database, new_name):
                raise TableAlreadyExistsError(
                    f"a view {new_database}.{new_name} has that name", table=f"{new_database}.{new_name}"
                )
            try:
                with c.begin_nested():
                    row = c.execute(
                        update(PaimonTable)
                        .where(
                            PaimonTable.catalog_key == self.catalog_key,
                            PaimonTable.database_name == database,
                            PaimonTable.table_name == name,
                        )
                        .values(
                            database_name=new_database,
                            table_name=new_name,
                            location=func.coalesce(PaimonTable.location, unset),
                            # a row Java inserted gets the key of the location it gets
                            location_key=case(
                                (PaimonTable.location.is_(None), unset_key), else_=PaimonTable.location_key
                            ),
                            updated_at=func.now(),
                        )
                        .returning(*PaimonTable.__table__.c)
                    ).first()
            except IntegrityError as exc:
                raise TableAlreadyExistsError(
                    f"table {new_database}.{new_name} already exists", table=f"{new_database}.{new_name}"
                ) from exc
            if row is not None:  # its assignments follow it (migration 0022; policies are by id)
                on_table_renamed(
                    c,
                    catalog_key=self.catalog_key,
                    table_id=row.table_id,
                    old=(database, name),
                    new=(new_database, new_name),
                    principal=None,
                )
        if row is None:
            raise TableNotFoundError(f"table {database}.{name} does not exist", table=f"{database}.{name}")
        return TableRow.from_row(row)

    def store_schema_summary(
        self, table_id: int, summary: Mapping[str, Any], *, conn: Connection | None = None
    ) -> bool:
        """Store ``summary`` (Paimon's schema JSON, ``id`` inside) as the table's schema summary, and
        record its id as the table's schema id if the row had an older one (an engine wrote the schema
        straight on storage). Never over a newer schema id (an ALTER recorded meanwhile): False then."""
        schema_id = int(summary["id"])
        with self._tx(conn) as c:
            done = c.execute(
                update(PaimonTable)
                .where(
                    PaimonTable.table_id == table_id,
                    func.coalesce(PaimonTable.schema_id, 0) <= schema_id,
                    # a Paimon table (its ``table_schema`` SQL NULL, or JSON null as the ORM writes it)
                    text(
                        "(paimon_tables.table_schema IS NULL OR paimon_tables.table_schema = 'null'::jsonb)"
                    ),
                )
                .values(schema_summary=dict(summary), schema_id=schema_id)
                .returning(PaimonTable.table_id)
            ).first()
        return done is not None

    def set_schema_id(self, table_id: int, schema_id: int, *, conn: Connection | None = None) -> None:
        """Record the table's current schema id (after an ALTER wrote ``schema-<schema_id>``)."""
        with self._tx(conn) as c:
            c.execute(
                update(PaimonTable)
                .where(PaimonTable.table_id == table_id)
                .values(schema_id=func.greatest(func.coalesce(PaimonTable.schema_id, 0), schema_id))
            )

    def replace_table_schema(
        self,
        table_id: int,
        expected_schema_id: int,
        table_schema: Mapping[str, Any],
        *,
        conn: Connection | None = None,
    ) -> None:
        """Store a metadata-only table's next schema (id ``expected_schema_id + 1``), by compare-and-set on
        the schema id: two concurrent ALTERs cannot both build on the same schema.

        Raises:
            TableRowChangedError: the table's schema changed (or it was dropped) meanwhile.
        """
        with self._tx(conn) as c:
            done = c.execute(
                update(PaimonTable)
                .where(PaimonTable.table_id == table_id, PaimonTable.schema_id == expected_schema_id)
                .values(
                    table_schema=dict(table_schema), schema_id=expected_schema_id + 1, updated_at=func.now()
                )
                .returning(PaimonTable.table_id)
            ).first()
        if done is None:
            raise TableRowChangedError(
                f"table {table_id}'s schema is no longer {expected_schema_id}; read it again",
                table_id=table_id,
            )

    def roll_back_schema_id(self, table_id: int, schema_id: int, *, conn: Connection | None = None) -> None:
        """Record that the table's schemas after ``schema_id`` were deleted (a schema rollback): unlike
        :meth:`set_schema_id`, the recorded id may go down."""
        with self._tx(conn) as c:
            c.execute(
                update(PaimonTable)
                .where(PaimonTable.table_id == table_id)
                .values(schema_id=schema_id, updated_at=func.now())
            )

    @staticmethod
    def check_pointer_move(table_id: int, expected_prev: int | None, new_snapshot_id: int) -> None:
        """Raise ``ValidationError`` unless ``expected_prev -> new_snapshot_id`` moves forward."""
        if new_snapshot_id < 1 or (expected_prev is not None and new_snapshot_id <= expected_prev):
            raise ValidationError(
                f"snapshot pointer must move forward: {expected_prev} -> {new_snapshot_id}",
                table_id=table_id,
                expected=expected_prev,
                new=new_snapshot_id,
            )

    @staticmethod
    def advance_pointer_sql(
        table_id: int, expected_prev: int | None, new_snapshot_id: int
    ) -> tuple[str, dict[str, Any]]:
        """:meth:`advance_pointer` as one UPDATE in psycopg's paramstyle, for plain psycopg connections:
        it returns the ``table_id`` iff the pointer was ``expected_prev`` and moved (use it as a CTE and
        make the rest of the statement depend on its row).

        Raises:
            ValidationError: ``new_snapshot_id`` does not move the pointer forward.
        """
        Registry.check_pointer_move(table_id, expected_prev, new_snapshot_id)
        return ADVANCE_POINTER_SQL, {
            "table_id": table_id,
            "expected_prev": expected_prev,
            "new_snapshot_id": new_snapshot_id,
        }

    @staticmethod
    def advance_pointer(
        conn: Connection, table_id: int, expected_prev: int | None, new_snapshot_id: int
    ) -> None:
        """Compare-and-set the table's ``latest_snapshot_id`` from ``expected_prev`` to ``new_snapshot_id``.

        Run it in the transaction that appends the ``snapshot_published`` event, so both land or
        neither does.

        Raises:
            ValidationError: ``new_snapshot_id`` does not move the pointer forward.
            TableNotFoundError: no table with ``table_id``.
            SnapshotPointerConflictError: the pointer was not ``expected_prev`` (fields: table_id,
                expected, actual); nothing was changed.
        """
        Registry.check_pointer_move(table_id, expected_prev, new_snapshot_id)
        result = conn.execute(
            update(PaimonTable)
            .where(
                PaimonTable.table_id == table_id,
                PaimonTable.latest_snapshot_id.is_not_distinct_from(expected_prev),
            )
            .values(latest_snapshot_id=new_snapshot_id, updated_at=func.now())
        )
        if result.rowcount == 1:
            return
        actual = conn.execute(
            select(PaimonTable.latest_snapshot_id).where(PaimonTable.table_id == table_id)
        ).first()
        if actual is None:
            raise TableNotFoundError(f"no table with id {table_id}", table_id=table_id)
        raise SnapshotPointerConflictError(
            f"table {table_id}: latest snapshot is {actual[0]}, expected {expected_prev}",
            table_id=table_id,
            expected=expected_prev,
            actual=actual[0],
            new=new_snapshot_id,
        )


@dataclass(frozen=True, slots=True)
class Relocation:
    """One location :func:`relocate` rewrote (or, in a dry run, would rewrite)."""

    kind: str  # "table", "database" or "database_property" (Java's ``location`` property)
    catalog_key: str
    name: str
    old: str
    new: str


#: Every registry row whose location is ``:old`` or below it (``starts_with``: no LIKE wildcards).
_RELOCATABLE = (
    ("table", "paimon_tables", "database_name || '.' || table_name", "location", ""),
    ("database", "paimon_databases", "database_name", "location", ""),
    (
        "database_property",
        "paimon_database_properties",
        "database_name",
        "property_value",
        " AND property_key = 'location'",
    ),
)


def relocate(engine: Engine, old: str, new: str, *, dry_run: bool = False) -> list[Relocation]:
    """Rewrite every stored location at or below ``old`` to the same place below ``new``, in one
    transaction, for every catalog key: table and database rows and Java's ``location`` property. For a
    restored metastore whose warehouse was copied elsewhere (the registry stores absolute locations; the
    files inside a table are relative). ``dry_run``: only say what would change.

    Raises:
        ValidationError: ``old`` or ``new`` is not absolute (a URI or a path from ``/``), or they are equal.
    """
    roots = []
    for value in (old, new):
        root = value.rstrip("/")
        if not root or not (root.startswith("/") or "://" in root):
            raise ValidationError(
                f"{value!r} is not an absolute location (a URI or a path from /)", value=value
            )
        roots.append(root)
    old_root, new_root = roots
    if old_root == new_root:
        raise ValidationError(f"relocating {old_root} onto itself changes nothing", value=old)
    out: list[Relocation] = []
    params = {"old": old_root, "prefix": old_root + "/"}
    with engine.begin() as conn:
        for kind, table, name, column, extra in _RELOCATABLE:
            where = f"({column} = :old OR starts_with({column}, :prefix)){extra}"
            # constant identifiers of _RELOCATABLE; the values are parameters
            select_sql = f"SELECT catalog_key, {name} AS name, {column} AS loc FROM {table} WHERE {where}"  # noqa: S608
            update_sql = (
                f"UPDATE {table} SET {column} = :new || substr({column}, length(:old) + 1) WHERE {where}"  # noqa: S608
            )
            rows = conn.execute(text(select_sql + " FOR UPDATE"), params).all()
            for r in rows:
                out.append(Relocation(kind, r.catalog_key, r.name, r.loc, new_root + r.loc[len(old_root) :]))
            if not dry_run and rows:
                conn.execute(text(update_sql), {**params, "new": new_root})
        if dry_run:
            conn.rollback()
    return sorted(out, key=lambda r: (r.kind, r.catalog_key, r.name))
