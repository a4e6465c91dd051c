"""The recycle bin (``paimon_dropped_tables``, migration 0017; ``paimon_dropped_databases``, 0021):
dropped tables and databases kept for a retention.

A drop moves the table's catalog row and its grants into the bin in one transaction: to every client the
table is gone (no row in ``paimon_tables``, Java's catalog included) and its name is free, while its
files stay at its location. An undrop moves them back, with the same ``table_id`` (so its event log,
statistics, timelines and branches are its own again), if the name is free and the database exists. A
purge deletes the bin row once the caller deleted the files.

A dropped database: its tables go to the bin one by one first (each its own entry, as a table drop),
then, in one transaction, its row, Java's property rows, its views, functions and semantic views (each
still a ``dropped`` event), its database-level grants, and the drop ids of its tables are moved into
``paimon_dropped_databases``. An undrop of the database restores all of it in one transaction, refused
(``DatabaseAlreadyExistsError``) if the name is taken: the tables still in the bin come back with it.
Invariant: a dropped database's entry outlives its tables' entries (it is removed only once none of
them is left), so an undrop never finds a table whose database is not restorable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from paimon_meta.db.models import PaimonFunction, PaimonSemanticView, PaimonView, Privilege
from paimon_meta.errors import (
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    DroppedDatabaseNotFoundError,
    DroppedTableNotFoundError,
    TableAlreadyExistsError,
)
from paimon_meta.metastore.assignments import Assignments, on_table_dropped
from paimon_meta.metastore.catalog_objects import restore_database_objects
from paimon_meta.metastore.registry import Registry, TableRow

#: the catalog objects a dropped database keeps (restored with it)
_OBJECT_TABLES = tuple(m.__tablename__ for m in (PaimonView, PaimonFunction, PaimonSemanticView))


@dataclass(frozen=True, slots=True)
class DroppedTableRow:
    """One table in the bin."""

    drop_id: int
    database: str
    name: str
    table_id: int
    location: str | None
    table_row: dict[str, Any]
    grants: list[dict[str, Any]]
    dropped_by: str | None
    dropped_at: datetime
    purge_after: datetime

    @property
    def identifier(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def metadata_only(self) -> bool:
        """A format/object/Iceberg table kept as metadata only (its schema in the row)."""
        return self.table_row.get("table_schema") is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "drop_id": self.drop_id,
            "table": self.identifier,
            "table_id": self.table_id,
            "location": self.location,
            "grants": len(self.grants),
            "dropped_by": self.dropped_by,
            "dropped_at": self.dropped_at.isoformat(),
            "purge_after": self.purge_after.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class DroppedDatabaseRow:
    """One database in the bin."""

    drop_id: int
    name: str
    location: str | None
    database_row: dict[str, Any] | None
    properties: list[dict[str, Any]]
    grants: list[dict[str, Any]]
    objects: dict[str, list[dict[str, Any]]]
    table_drop_ids: list[int]
    run_id: str | None
    dropped_by: str | None
    dropped_at: datetime
    purge_after: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "drop_id": self.drop_id,
            "database": self.name,
            "location": self.location,
            "tables": len(self.table_drop_ids),
            "objects": sum(len(rows) for rows in self.objects.values()),
            "grants": len(self.grants),
            "dropped_by": self.dropped_by,
            "dropped_at": self.dropped_at.isoformat(),
            "purge_after": self.purge_after.isoformat(),
        }


_DB_COLUMNS = (
    "drop_id, database_name, location, database_row, properties, grants, objects, table_drop_ids, run_id, "
    "dropped_by, dropped_at, purge_after"
)


def _database_row(m: Any) -> DroppedDatabaseRow:
    return DroppedDatabaseRow(
        drop_id=m["drop_id"],
        name=m["database_name"],
        location=m["location"],
        database_row=None if m["database_row"] is None else dict(m["database_row"]),
        properties=list(m["properties"]),
        grants=list(m["grants"]),
        objects={str(k): list(v) for k, v in dict(m["objects"]).items()},
        table_drop_ids=[int(i) for i in m["table_drop_ids"]],
        run_id=m["run_id"],
        dropped_by=m["dropped_by"],
        dropped_at=m["dropped_at"],
        purge_after=m["purge_after"],
    )


_COLUMNS = (
    "drop_id, database_name, table_name, table_id, location, table_row, grants, dropped_by, dropped_at, "
    "purge_after"
)


def _row(m: Any) -> DroppedTableRow:
    return DroppedTableRow(
        drop_id=m["drop_id"],
        database=m["database_name"],
        name=m["table_name"],
        table_id=m["table_id"],
        location=m["location"],
        table_row=dict(m["table_row"]),
        grants=list(m["grants"]),
        dropped_by=m["dropped_by"],
        dropped_at=m["dropped_at"],
        purge_after=m["purge_after"],
    )


#: The grants of the bin's catalog: those naming its key, and those naming no catalog when it is the
#: service's default catalog (``Access.in_catalog``'s rule). A drop moves exactly these, never another
#: catalog's grants on the same names, and an undrop restores each with the catalog it named.
_OWN_GRANTS = "(catalog_key = :catalog OR (CAST(:default_catalog AS boolean) AND catalog_key IS NULL))"


class RecycleBin:
    """The bin of one catalog. ``default_catalog``: whether it is the default catalog, whose grants
    also include those naming no catalog (issue 35)."""

    def __init__(self, engine: Engine, catalog_key: str, *, default_catalog: bool = True) -> None:
        self.engine = engine
        self.catalog_key = catalog_key
        self.default_catalog = default_catalog

    def put(
        self, database: str, name: str, *, retention_seconds: float, dropped_by: str | None
    ) -> DroppedTableRow:
        """Move the table's row and grants into the bin (``TableNotFoundError`` if not registered)."""
        from paimon_meta.errors import TableNotFoundError

        params = {
            "catalog": self.catalog_key,
            "default_catalog": self.default_catalog,
            "db": database,
            "name": name,
            "by": dropped_by,
            "retention": retention_seconds,
        }
        with self.engine.begin() as conn:
            row = (
                conn.execute(
                    text(
                        f"""
                    WITH t AS (
                        DELETE FROM paimon_tables
                        WHERE catalog_key = :catalog AND database_name = :db AND table_name = :name
                        RETURNING *
                    ), g AS (
                        DELETE FROM paimon_grants WHERE database_name = :db AND table_name = :name
                          AND {_OWN_GRANTS} AND EXISTS (SELECT 1 FROM t)
                        RETURNING principal_id, privilege, granted_by, catalog_key
                    )
                    INSERT INTO paimon_dropped_tables (catalog_key, database_name, table_name, table_id,
                        location, table_row, grants, dropped_by, purge_after)
                    SELECT t.catalog_key, t.database_name, t.table_name, t.table_id, t.location, to_jsonb(t),
                        (SELECT coalesce(jsonb_agg(to_jsonb(g)), '[]'::jsonb) FROM g), :by,
                        now() + make_interval(secs => :retention)
                    FROM t
                    RETURNING {_COLUMNS}
                    """  # noqa: S608 - constant column list
                    ),
                    params,
                )
                .mappings()
                .first()
            )
            if row is not None:  # assignments and policies bind to the object: a drop removes them
                on_table_dropped(
                    conn,
                    catalog_key=self.catalog_key,
                    default=self.default_catalog,
                    table_id=row["table_id"],
                    database=database,
                    table=name,
                    principal=dropped_by,
                )
        if row is None:
            raise TableNotFoundError(f"table {database}.{name} does not exist", table=f"{database}.{name}")
        return _row(row)

    def entries(self, *, database: str | None = None) -> list[DroppedTableRow]:
        """The bin's tables (of one database), oldest drop first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM paimon_dropped_tables WHERE catalog_key = :catalog "  # noqa: S608
                    "AND (CAST(:db AS text) IS NULL OR database_name = :db) ORDER BY dropped_at, drop_id"
                ),
                {"catalog": self.catalog_key, "db": database},
            ).mappings()
            return [_row(r) for r in rows]

    def find(self, database: str, name: str, *, drop_id: int | None = None) -> DroppedTableRow:
        """The latest drop of ``database.name`` in the bin (or the one ``drop_id`` names)."""
        with self.engine.connect() as conn:
            return self._find(conn, database, name, drop_id, lock=False)

    def _find(
        self, conn: Connection, database: str, name: str, drop_id: int | None, *, lock: bool
    ) -> DroppedTableRow:
        row = (
            conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM paimon_dropped_tables WHERE catalog_key = :catalog "  # noqa: S608
                    "AND database_name = :db AND table_name = :name "
                    "AND (CAST(:drop_id AS bigint) IS NULL OR drop_id = :drop_id) "
                    "ORDER BY dropped_at DESC, drop_id DESC LIMIT 1" + (" FOR UPDATE" if lock else "")
                ),
                {"catalog": self.catalog_key, "db": database, "name": name, "drop_id": drop_id},
            )
            .mappings()
            .first()
        )
        if row is None:
            raise DroppedTableNotFoundError(
                f"no dropped table {database}.{name} in the recycle bin", table=f"{database}.{name}"
            )
        return _row(row)

    def holder_of(self, location: str) -> DroppedTableRow | None:
        """The dropped table whose files are at ``location``, if any."""
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    text(
                        f"SELECT {_COLUMNS} FROM paimon_dropped_tables WHERE location = :location "  # noqa: S608
                        "ORDER BY drop_id LIMIT 1"
                    ),
                    {"location": location.rstrip("/")},
                )
                .mappings()
                .first()
            )
        return None if row is None else _row(row)

    def restore(self, database: str, name: str, *, drop_id: int | None = None) -> tuple[TableRow, int]:
        """Move a dropped table back into the catalog with its grants (those of principals that still
        exist); the restored row and how many grants came back.

        Raises:
            DroppedTableNotFoundError: not in the bin.
            DatabaseNotFoundError: its database is gone.
            TableAlreadyExistsError: the name is taken again, or another table now holds its files.
        """
        with self.engine.begin() as conn:
            dropped = self._find(conn, database, name, drop_id, lock=True)
            exists = Registry(self.engine, catalog_key=self.catalog_key).database_exists(database, conn=conn)
            if not exists:
                raise DatabaseNotFoundError(
                    f"database {database!r} of dropped table {dropped.identifier} does not exist: create it "
                    "first (or undrop it)",
                    database=database,
                )
            return self._restore(conn, dropped)

    def _restore(self, conn: Connection, dropped: DroppedTableRow) -> tuple[TableRow, int]:
        """Restore ``dropped`` (locked by the caller) in ``conn``'s transaction: see :meth:`restore`."""
        database, name = dropped.database, dropped.name
        if dropped.location is not None:
            holder = conn.execute(
                text("SELECT database_name, table_name FROM paimon_tables WHERE location = :location"),
                {"location": dropped.location},
            ).first()
            if holder is not None:
                raise TableAlreadyExistsError(
                    f"{dropped.location} is held by table {holder[0]}.{holder[1]}",
                    identifier=dropped.identifier,
                )
        try:
            with conn.begin_nested():
                restored = (
                    conn.execute(
                        text(
                            "INSERT INTO paimon_tables SELECT * FROM "
                            "jsonb_populate_record(NULL::paimon_tables, CAST(:row AS jsonb)) RETURNING *"
                        ),
                        {"row": json.dumps(dropped.table_row)},
                    )
                    .mappings()
                    .one()
                )
        except IntegrityError:
            raise TableAlreadyExistsError(
                f"table {dropped.identifier} exists again: drop or rename it before the undrop",
                identifier=dropped.identifier,
            ) from None
        grants = _restore_grants(conn, database, name, dropped.grants)
        conn.execute(text("DELETE FROM paimon_dropped_tables WHERE drop_id = :id"), {"id": dropped.drop_id})
        return TableRow.from_mapping(restored), grants

    # ---- databases ------------------------------------------------------------------------------------

    def put_database(
        self,
        name: str,
        *,
        table_drop_ids: list[int],
        run_id: str | None,
        retention_seconds: float,
        dropped_by: str | None,
    ) -> tuple[DroppedDatabaseRow, dict[str, list[str]]]:
        """Move a database without tables (its tables already in the bin: ``table_drop_ids``) into the
        bin, in one transaction: its row and property rows, its database-level grants, its views,
        functions and semantic views (each a ``dropped`` event naming ``dropped_by``). The bin row and
        the dropped objects by kind.

        Raises:
            DatabaseNotFoundError: unknown database.
            ValidationError: it still has tables.
        """
        registry = Registry(self.engine, catalog_key=self.catalog_key)
        params = {"catalog": self.catalog_key, "default_catalog": self.default_catalog, "db": name}
        with self.engine.begin() as conn:
            database_row = conn.execute(
                text(
                    "SELECT to_jsonb(d) FROM paimon_databases d WHERE catalog_key = :catalog "
                    "AND database_name = :db FOR UPDATE"
                ),
                params,
            ).scalar()
            properties = conn.execute(
                text(
                    "SELECT coalesce(jsonb_agg(to_jsonb(p)), '[]'::jsonb) FROM paimon_database_properties p "
                    "WHERE catalog_key = :catalog AND database_name = :db"
                ),
                params,
            ).scalar_one()
            objects = {
                table: conn.execute(
                    text(
                        f"SELECT coalesce(jsonb_agg(to_jsonb(o)), '[]'::jsonb) FROM {table} o "  # noqa: S608
                        "WHERE catalog_key = :catalog AND database_name = :db"
                    ),
                    params,
                ).scalar_one()
                for table in _OBJECT_TABLES
            }
            # raises DatabaseNotFoundError / ValidationError (tables left) before anything is kept
            dropped_objects = registry.drop_database(name, principal=dropped_by, conn=conn)
            grants = [
                dict(g)
                for g in conn.execute(
                    text(
                        "DELETE FROM paimon_grants WHERE database_name = :db AND table_name IS NULL "  # noqa: S608
                        f"AND {_OWN_GRANTS} RETURNING principal_id, privilege, granted_by, catalog_key"
                    ),
                    params,
                ).mappings()
            ]
            row = (
                conn.execute(
                    text(
                        f"""
                        INSERT INTO paimon_dropped_databases (catalog_key, database_name, location,
                            database_row, properties, grants, objects, table_drop_ids, run_id, dropped_by,
                            purge_after)
                        VALUES (:catalog, :db, :location, CAST(:row AS jsonb), CAST(:props AS jsonb),
                            CAST(:grants AS jsonb), CAST(:objects AS jsonb), CAST(:tables AS jsonb), :run,
                            :by, now() + make_interval(secs => :retention))
                        RETURNING {_DB_COLUMNS}
                        """  # noqa: S608 - constant column list
                    ),
                    {
                        **params,
                        "location": (database_row or {}).get("location"),
                        "row": None if database_row is None else json.dumps(database_row),
                        "props": json.dumps(properties),
                        "grants": json.dumps(grants, default=str),
                        "objects": json.dumps(objects),
                        "tables": json.dumps(table_drop_ids),
                        "run": run_id,
                        "by": dropped_by,
                        "retention": retention_seconds,
                    },
                )
                .mappings()
                .one()
            )
        return _database_row(row), dropped_objects

    def databases(self) -> list[DroppedDatabaseRow]:
        """The bin's databases, oldest drop first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_DB_COLUMNS} FROM paimon_dropped_databases "  # noqa: S608
                    "WHERE catalog_key = :catalog ORDER BY dropped_at, drop_id"
                ),
                {"catalog": self.catalog_key},
            ).mappings()
            return [_database_row(r) for r in rows]

    def find_database(self, name: str, *, drop_id: int | None = None) -> DroppedDatabaseRow:
        """The latest drop of database ``name`` in the bin (or the one ``drop_id`` names)."""
        with self.engine.connect() as conn:
            return self._find_database(conn, name, drop_id, lock=False)

    def _find_database(
        self, conn: Connection, name: str, drop_id: int | None, *, lock: bool
    ) -> DroppedDatabaseRow:
        row = (
            conn.execute(
                text(
                    f"SELECT {_DB_COLUMNS} FROM paimon_dropped_databases WHERE catalog_key = :catalog "  # noqa: S608
                    "AND database_name = :db AND (CAST(:drop_id AS bigint) IS NULL OR drop_id = :drop_id) "
                    "ORDER BY dropped_at DESC, drop_id DESC LIMIT 1" + (" FOR UPDATE" if lock else "")
                ),
                {"catalog": self.catalog_key, "db": name, "drop_id": drop_id},
            )
            .mappings()
            .first()
        )
        if row is None:
            raise DroppedDatabaseNotFoundError(
                f"no dropped database {name!r} in the recycle bin", database=name
            )
        return _database_row(row)

    def tables_of(self, dropped: DroppedDatabaseRow) -> list[DroppedTableRow]:
        """The tables of a dropped database still in the bin (not purged)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM paimon_dropped_tables WHERE catalog_key = :catalog "  # noqa: S608
                    "AND drop_id = ANY(:ids) ORDER BY drop_id"
                ),
                {"catalog": self.catalog_key, "ids": dropped.table_drop_ids},
            ).mappings()
            return [_row(r) for r in rows]

    def restore_database(
        self, name: str, *, drop_id: int | None = None, principal: str | None = None
    ) -> tuple[DroppedDatabaseRow, list[tuple[TableRow, int]], int]:
        """Bring a dropped database back in one transaction: its row and properties, its views,
        functions and semantic views, its database-level grants (of principals that still exist) and
        every one of its tables still in the bin, with theirs. The bin row, the restored tables with
        their grant counts, and the database grants restored.

        Raises:
            DroppedDatabaseNotFoundError: not in the bin.
            DatabaseAlreadyExistsError: the name is taken (nothing is restored).
            TableAlreadyExistsError: another table now holds one of its tables' files (nothing restored).
        """
        registry = Registry(self.engine, catalog_key=self.catalog_key)
        with self.engine.begin() as conn:
            dropped = self._find_database(conn, name, drop_id, lock=True)
            if registry.database_exists(name, conn=conn):
                raise DatabaseAlreadyExistsError(
                    f"database {name!r} exists again: drop or rename it before the undrop", database=name
                )
            try:
                with conn.begin_nested():
                    if dropped.database_row is not None:
                        conn.execute(
                            text(
                                "INSERT INTO paimon_databases SELECT * FROM "
                                "jsonb_populate_record(NULL::paimon_databases, CAST(:row AS jsonb))"
                            ),
                            {"row": json.dumps(dropped.database_row)},
                        )
                    _insert_rows(conn, "paimon_database_properties", dropped.properties)
                    restore_database_objects(conn, self.catalog_key, dropped.objects, principal=principal)
            except IntegrityError:
                raise DatabaseAlreadyExistsError(
                    f"database {name!r} (or one of its views or functions) exists again", database=name
                ) from None
            grants = _restore_grants(conn, name, None, dropped.grants)
            tables = []
            for kept in (
                conn.execute(
                    text(
                        f"SELECT {_COLUMNS} FROM paimon_dropped_tables WHERE catalog_key = :catalog "  # noqa: S608
                        "AND drop_id = ANY(:ids) ORDER BY drop_id FOR UPDATE"
                    ),
                    {"catalog": self.catalog_key, "ids": dropped.table_drop_ids},
                )
                .mappings()
                .all()
            ):
                tables.append(self._restore(conn, _row(kept)))
            conn.execute(
                text("DELETE FROM paimon_dropped_databases WHERE drop_id = :id"), {"id": dropped.drop_id}
            )
        return dropped, tables, grants

    def remove_database(self, drop_id: int) -> bool:
        """Delete a dropped database's bin row once none of its tables is left in the bin; False if it
        was gone or still has tables there (purge them first)."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text(
                    "DELETE FROM paimon_dropped_databases d WHERE drop_id = :id AND catalog_key = :catalog "
                    "AND NOT EXISTS (SELECT 1 FROM paimon_dropped_tables t "
                    "WHERE t.catalog_key = d.catalog_key AND t.drop_id IN "
                    "(SELECT CAST(jsonb_array_elements_text(d.table_drop_ids) AS bigint)))"
                ),
                {"id": drop_id, "catalog": self.catalog_key},
            ).rowcount
        return bool(count)

    def expired_databases(self) -> list[DroppedDatabaseRow]:
        """Databases whose retention has passed, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_DB_COLUMNS} FROM paimon_dropped_databases WHERE catalog_key = :catalog "  # noqa: S608
                    "AND purge_after <= now() ORDER BY purge_after, drop_id"
                ),
                {"catalog": self.catalog_key},
            ).mappings()
            return [_database_row(r) for r in rows]

    def remove(self, drop_id: int) -> bool:
        """Delete a bin row (after its files were purged); False if it was gone."""
        with self.engine.begin() as conn:
            count = conn.execute(
                text("DELETE FROM paimon_dropped_tables WHERE drop_id = :id AND catalog_key = :catalog"),
                {"id": drop_id, "catalog": self.catalog_key},
            ).rowcount
        return bool(count)

    def expired(self) -> list[DroppedTableRow]:
        """Tables whose retention has passed, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM paimon_dropped_tables WHERE catalog_key = :catalog "  # noqa: S608
                    "AND purge_after <= now() ORDER BY purge_after, drop_id"
                ),
                {"catalog": self.catalog_key},
            ).mappings()
            return [_row(r) for r in rows]


def _restore_grants(conn: Connection, database: str, table: str | None, grants: list[dict[str, Any]]) -> int:
    """Insert kept grants on ``database`` (``table``: None for database-level ones) of principals that
    still exist; how many came back."""
    restored = int(
        conn.execute(
            text(
                "INSERT INTO paimon_grants (principal_id, privilege, database_name, table_name, "
                "granted_by, catalog_key) SELECT x.principal_id, x.privilege, :db, :name, x.granted_by, "
                "x.catalog_key FROM "
                "jsonb_to_recordset(CAST(:grants AS jsonb)) AS x(principal_id bigint, privilege text, "
                "granted_by text, catalog_key text) WHERE EXISTS (SELECT 1 FROM paimon_principals p "
                "WHERE p.principal_id = x.principal_id) ON CONFLICT DO NOTHING"
            ),
            {"db": database, "name": table, "grants": json.dumps(grants)},
        ).rowcount
    )
    # and their bundles' assignments, as ``principals grant`` writes them (migration 0022): the drop
    # removed the assignments; the restored grants give them back
    for g in grants:
        name = conn.execute(
            text("SELECT name FROM paimon_principals WHERE principal_id = :p"), {"p": g["principal_id"]}
        ).scalar_one_or_none()
        if name is None:
            continue
        key = g.get("catalog_key")
        Assignments(conn.engine, catalog_key=key, default=key is None).grant_bundle(
            conn,
            name,
            Privilege(g["privilege"]),
            database=database,
            table=table,
            granted_by=g.get("granted_by"),
            reason="restored with the grant by an undrop",
        )
    return restored


def _insert_rows(conn: Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert rows kept as ``to_jsonb`` of ``table`` back, column by column."""
    if rows:
        conn.execute(
            text(
                f"INSERT INTO {table} SELECT * FROM "  # noqa: S608 - a constant table name
                f"jsonb_populate_recordset(NULL::{table}, CAST(:rows AS jsonb))"
            ),
            {"rows": json.dumps(rows)},
        )
