"""Tables the catalog keeps as metadata only: format tables (plain Parquet/ORC/CSV/JSON/text directories),
object tables and Iceberg tables, as Paimon's REST catalog carries them (``type`` option). Their files are
their clients' business: pypaimon and Java read and write them directly. The catalog keeps the row
(name, location, uuid) and the schema, as Paimon's schema JSON in the row's ``table_schema``: nothing of
ours is written into the table's directory, which its clients read as a whole (a ``schema/`` directory
there would be read as data).

Invariants: a metadata-only table has no snapshots, commits, tags or branches here (the library's
``get_table`` refuses it by type, so every such operation answers a typed refusal naming the type); its
schema changes by compare-and-set on the row's schema id; its location is the warehouse's table
directory or, with a ``path`` option, a location under a root the catalog allows (an external table,
whose files a drop leaves alone), kept in its normal form; the options that place files follow the
placement policy of Paimon tables (:mod:`paimon_meta.table.placement`) at create and ALTER alike.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from paimon_meta.errors import TableAlreadyExistsError, UnsupportedError, ValidationError
from paimon_meta.io.base import location_key, normalise_uri
from paimon_meta.metastore.registry import Registry, TableRow
from paimon_meta.model import limits
from paimon_meta.model.identifier import split_identifier
from paimon_meta.model.schema import TableSchema
from paimon_meta.serde.json import schema_from_json, schema_to_json
from paimon_meta.table import schema_change
from paimon_meta.table.containment import is_under
from paimon_meta.table.option_policy import (
    CATALOG_ONLY_TABLE_TYPES,
    FILE_FORMAT,
    FORMAT_TABLE_FORMATS,
    table_type,
)
from paimon_meta.table.placement import check_external_location, check_placement_options


class MetastoreCatalog(Protocol):
    """What this module needs of :class:`paimon_meta.catalog.metastore.MetastoreCatalog` (which imports
    this module: no import back)."""

    registry: Registry
    warehouse: str
    allowed_external_roots: tuple[str, ...]

    def table_location(self, database: str, table: str) -> str: ...

    def location_of(self, row: TableRow) -> str: ...


#: A metadata-only table's own location, when not the warehouse's table directory (Java's ``path``).
PATH_OPTION = "path"


def is_metadata_only(options: dict[str, str] | TableSchema) -> bool:
    """Whether a table with these options (or this schema) is kept as metadata only."""
    opts = options.options if isinstance(options, TableSchema) else options
    return table_type(opts) in CATALOG_ONLY_TABLE_TYPES


def schema_of(row: TableRow) -> TableSchema:
    """The schema of a metadata-only table's row."""
    if row.table_schema is None:
        raise ValidationError(f"table {row.identifier} is a Paimon table: its schema is on storage")
    return schema_from_json(json.dumps(row.table_schema))


def refuse(row: TableRow) -> UnsupportedError:
    """The error of an operation that needs Paimon's layout (snapshots, commits, tags, branches, reads)."""
    kind = table_type(row.table_schema.get("options") or {}) if row.table_schema else "table"
    return UnsupportedError(
        f"table {row.identifier} is a {kind}: the catalog keeps its metadata only and its files are its "
        "clients' (no snapshots, commits, tags or branches here)",
        table=row.identifier,
        option="type",
        value=kind,
    )


def check(schema: TableSchema) -> None:
    """What a metadata-only table's schema must be: a type kept that way; a format table's
    ``file.format`` one of the format tables' (``parquet`` when unset)."""
    kind = table_type(schema.options)
    if kind not in CATALOG_ONLY_TABLE_TYPES:
        raise UnsupportedError(f"table type {kind!r} is not kept as metadata only", option="type", value=kind)
    if kind == "format-table":
        fmt = (schema.options.get(FILE_FORMAT) or "parquet").strip().lower()
        if fmt not in FORMAT_TABLE_FORMATS:
            raise ValidationError(
                f"{FILE_FORMAT}={fmt!r} is not a format of format tables "
                f"({', '.join(sorted(FORMAT_TABLE_FORMATS))})",
                option=FILE_FORMAT,
            )
    if schema.primary_keys and kind != "iceberg-table":
        raise ValidationError(f"a {kind} has no primary key", field="primaryKeys")


def create(catalog: MetastoreCatalog, identifier: str, schema: TableSchema) -> TableRow:
    """Register a metadata-only table (nothing written to storage).

    Raises:
        DatabaseNotFoundError, TableAlreadyExistsError (the name, or another table's files at the
        location), ValidationError / UnsupportedError (see :func:`check`; a ``path`` outside the roots the
        catalog allows).
    """
    db, name = split_identifier(identifier)
    check(schema)
    limits.check_table(schema)
    location = catalog.table_location(db, name)
    path = schema.options.get(PATH_OPTION) or ""
    if path:
        path = normalise_uri(path)
    if path and location_key(path) != location_key(location):
        check_external_location(
            PATH_OPTION, path, allowed_roots=catalog.allowed_external_roots, warehouse=catalog.warehouse
        )
        location = path
    # the path is the row's location, not an option of the schema (pypaimon puts it back from `path`)
    options = {k: v for k, v in schema.options.items() if k != PATH_OPTION}
    # the placement policy of Paimon tables: options that place files (object-location, external
    # paths, directories, name fragments) keep them in the table or under a root the catalog allows
    check_placement_options(
        options,
        table_path=location,
        allowed_roots=catalog.allowed_external_roots,
        warehouse=catalog.warehouse,
    )
    holders = catalog.registry.table_rows_overlapping(location, warehouse=catalog.warehouse)
    if holders:
        raise TableAlreadyExistsError(
            f"{location} overlaps the files of table {holders[0].identifier}; choose another name or path",
            identifier=identifier,
            path=location,
            holder=holders[0].identifier,
        )
    stored = replace(schema, id=0, options=options, time_millis=schema.time_millis or int(time.time() * 1000))
    return catalog.registry.create_table_row(
        db,
        name,
        location,
        uuid.uuid4(),
        0,
        table_schema=json.loads(schema_to_json(stored)),
        warehouse=catalog.warehouse,
    )


def alter(
    catalog: MetastoreCatalog, row: TableRow, changes: Sequence[schema_change.SchemaChange]
) -> TableSchema:
    """Apply ``changes`` to a metadata-only table's schema as one new version, stored by compare-and-set
    (``TableRowChangedError``, 409, when another ALTER won). Its type cannot change."""
    current = schema_of(row)
    schema = current
    for change in changes:
        schema = schema_change.apply_change(schema, change, has_snapshots=False)
    schema = replace(schema, id=current.id + 1)
    if table_type(schema.options) != table_type(current.options):
        raise ValidationError("option 'type' cannot be changed on an existing table", option="type")
    check(schema)
    limits.check_table(schema, current)
    catalog.registry.replace_table_schema(row.table_id, current.id, json.loads(schema_to_json(schema)))
    return schema


def is_external(catalog: MetastoreCatalog, row: TableRow) -> bool:
    """A table whose location is outside the warehouse (its files are not the catalog's to delete)."""
    return not is_under(catalog.location_of(row), catalog.warehouse)
