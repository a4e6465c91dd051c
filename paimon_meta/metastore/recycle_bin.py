"""The recycle bin (``paimon_dropped_tables``, migration 0017): dropped tables kept for a retention.

A drop moves the table's catalog row and its grants into the bin in one transaction: to every client the
table is gone (no row in ``paimon_tables``, Java's catalog included) and its name is free, while its
files stay at its location. An undrop moves them back, with the same ``table_id`` (so its event log,
statistics, timelines and branches are its own again), if the name is free and the database exists. A
purge deletes the bin row once the caller deleted the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from paimon_meta.errors import DatabaseNotFoundError, DroppedTableNotFoundError, TableAlreadyExistsError
from paimon_meta.metastore.registry import Registry, TableRow


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


class RecycleBin:
    """The bin of one catalog."""

    def __init__(self, engine: Engine, catalog_key: str) -> None:
        self.engine = engine
        self.catalog_key = catalog_key

    def put(
        self, database: str, name: str, *, retention_seconds: float, dropped_by: str | None
    ) -> DroppedTableRow:
        """Move the table's row and grants into the bin (``TableNotFoundError`` if not registered)."""
        from paimon_meta.errors import TableNotFoundError

        params = {
            "catalog": self.catalog_key,
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
                          AND EXISTS (SELECT 1 FROM t)
                        RETURNING principal_id, privilege, granted_by
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
                    "first",
                    database=database,
                )
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
            grants = conn.execute(
                text(
                    "INSERT INTO paimon_grants (principal_id, privilege, database_name, table_name, "
                    "granted_by) SELECT x.principal_id, x.privilege, :db, :name, x.granted_by FROM "
                    "jsonb_to_recordset(CAST(:grants AS jsonb)) AS x(principal_id bigint, privilege text, "
                    "granted_by text) WHERE EXISTS (SELECT 1 FROM paimon_principals p "
                    "WHERE p.principal_id = x.principal_id) ON CONFLICT DO NOTHING"
                ),
                {"db": database, "name": name, "grants": json.dumps(dropped.grants)},
            ).rowcount
            conn.execute(
                text("DELETE FROM paimon_dropped_tables WHERE drop_id = :id"), {"id": dropped.drop_id}
            )
        return TableRow.from_mapping(restored), int(grants)

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
