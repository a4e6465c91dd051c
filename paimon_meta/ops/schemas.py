"""A table's schemas by version and the paged schema list (the Java client's ``getSchema`` and
``listSchemas``: ``GET .../tables/{t}/schemas[/{version}]``).

A version is a schema id (digits), ``LATEST`` or ``EARLIEST``, as Java's ``RESTApi.loadSchema`` sends it.
A Paimon table's schemas are its ``schema/schema-<id>`` files; a table the catalog keeps as metadata only
(format, object, Iceberg) has one, kept in its row. Anything that names no schema is
``SchemaNotFoundError`` (404 ``SCHEMA``). The list is ascending by id; the page token is the last id of
the previous page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paimon_meta.catalog import metadata_tables
from paimon_meta.errors import SchemaNotFoundError, ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.snapshots import SchemaManager

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

LATEST = "LATEST"
EARLIEST = "EARLIEST"
#: Schemas per page when the client names no ``maxResults``.
DEFAULT_PAGE = 100


class TableSchemas:
    """The schemas of one table: its schema files, or the single schema of a metadata-only table."""

    def __init__(self, catalog: MetastoreCatalog, identifier: str) -> None:
        self.identifier = identifier
        row = catalog.table_row(identifier)
        self._single: TableSchema | None = None
        self._files: SchemaManager | None = None
        if row.table_schema is not None:
            self._single = metadata_tables.schema_of(row)
        else:
            location = catalog.location_of(row)
            self._files = SchemaManager(catalog.table_file_io(location), location)

    def ids(self) -> list[int]:
        if self._single is not None:
            return [self._single.id]
        assert self._files is not None
        return self._files.list_ids()

    def schema(self, schema_id: int) -> TableSchema:
        if self._single is not None:
            return self._single
        assert self._files is not None
        return self._files.schema(schema_id)

    def at(self, version: str) -> TableSchema:
        """The schema ``version`` names (see the module's docstring)."""
        ids = self.ids()
        found: int | None = None
        if version == LATEST and ids:
            found = ids[-1]
        elif version == EARLIEST and ids:
            found = ids[0]
        elif version.isascii() and version.isdigit() and len(version) <= 18 and int(version) in ids:
            found = int(version)
        if found is None:
            raise SchemaNotFoundError(
                f"table {self.identifier} has no schema {version!r} (a schema id, LATEST or EARLIEST)",
                resource_name=version,
            )
        return self.schema(found)

    def page(
        self, *, max_results: int | None, page_token: str | None, max_page: int
    ) -> tuple[list[TableSchema], str | None]:
        """The schemas after ``page_token`` (the last id of the previous page), ascending, at most
        ``max_results``; the next token is None on the last page."""
        limit = DEFAULT_PAGE if max_results is None else max_results
        if not 0 < limit <= max_page:
            raise ValidationError(f"maxResults must be between 1 and {max_page}", field="maxResults")
        after = -1
        if page_token:
            if not (page_token.isascii() and page_token.isdigit()) or len(page_token) > 18:
                raise ValidationError("pageToken is not one this server issued", field="pageToken")
            after = int(page_token)
        following = [i for i in self.ids() if i > after]
        chosen = following[:limit]
        token = str(chosen[-1]) if len(following) > limit else None
        return [self.schema(i) for i in chosen], token
